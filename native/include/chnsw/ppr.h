// Personalised PageRank by forward push (Andersen, Chung and Lang 2006, "Local graph
// partitioning using PageRank vectors", FOCS): the work of one query is bounded by the seeds and
// the tolerance, never by the size of the graph.
//
// The walk: from a node u, with probability `damping` step along one of u's out-edges (chosen
// with the edge's probability), otherwise restart at a seed (chosen with its reset weight). A
// node with no out-edge ("dangling") restarts at the seeds with probability `damping` too. A
// *relay* node holds no mass: a walk entering it moves on at once along one of its out-edges,
// without a restart chance, so a bipartite graph item -> relay -> item expresses the two-hop
// walk item -> shared node -> item with one damping step per two hops (HippoRAG 2's passage
// walk through entities).
//
// Push keeps an estimate x and a residual r with  pi = x + sum_u r_u * pi_u  (pi_u: the walk's
// stationary distribution started at u), so the L1 error of x is exactly the residual left.
// A node is pushed while r_u >= epsilon * max(1, out_degree(u)); each push moves
// (1 - damping) * r_u >= (1 - damping) * epsilon into x, so at most 1 / ((1 - damping) * epsilon)
// pushes and that many out-edge visits per unit of out-degree happen per query.
//
// Nothing here knows Python. The graph arrays are only read; every index is checked when it is
// visited (a bad graph is an error, never an out-of-bounds read).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace chnsw {

namespace detail {

/// Open-addressing hash map from a node id (>= 0) to a dense slot 0, 1, 2, ... in first-insert
/// order (linear probing, power-of-two capacity, at most half full). Replaces
/// std::unordered_map in the push loop: one multiply and usually one probe per lookup, no
/// allocation per node.
class NodeTable {
 public:
  explicit NodeTable(int64_t expected) {
    size_t cap = 16;
    while (cap < static_cast<size_t>(std::max<int64_t>(expected, 1)) * 2) cap <<= 1;
    resize(cap);
  }

  /// (slot, inserted): the slot of `key`, a new one (the next dense number) when absent.
  std::pair<uint32_t, bool> find_or_insert(int64_t key) {
    size_t i = hash(key);
    while (true) {
      const Bucket& bk = buckets_[i];
      if (bk.key == key) return {bk.slot, false};
      if (bk.key < 0) break;
      i = (i + 1) & mask_;
    }
    if ((size_ + 1) * 2 > buckets_.size()) {
      grow();
      return find_or_insert(key);
    }
    if (size_ >= UINT32_MAX) throw std::length_error("ppr_push: too many touched nodes");
    buckets_[i] = Bucket{key, static_cast<uint32_t>(size_)};
    return {static_cast<uint32_t>(size_++), true};
  }

 private:
  size_t hash(int64_t key) const {
    return static_cast<size_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  struct Bucket {
    int64_t key;
    uint32_t slot;
  };
  void resize(size_t cap) {
    buckets_.assign(cap, Bucket{-1, 0});
    mask_ = cap - 1;
    int bits = 0;
    while ((size_t{1} << bits) < cap) ++bits;
    shift_ = 64 - bits;
  }
  void grow() {
    std::vector<Bucket> old;
    old.swap(buckets_);
    resize(old.size() * 2);
    for (const Bucket& bk : old) {
      if (bk.key < 0) continue;
      size_t i = hash(bk.key);
      while (buckets_[i].key >= 0) i = (i + 1) & mask_;
      buckets_[i] = bk;
    }
  }

  std::vector<Bucket> buckets_;
  size_t mask_ = 0;
  int shift_ = 60;
  size_t size_ = 0;
};

}  // namespace detail

struct PushResult {
  std::vector<int64_t> nodes;  // nodes with mass > 0, ascending
  std::vector<double> mass;    // their estimated PageRank mass
  double residual = 0.0;       // total residual left: an upper bound on the L1 error of `mass`
  int64_t pushes = 0;          // nodes pushed
  int64_t edges = 0;           // out-edges visited
};

/// Forward-push personalised PageRank over a graph given as CSR out-adjacency.
///
/// indptr: n + 1 offsets (int64); indices / probs: nnz targets and step probabilities (each
/// node's out-edge probabilities sum to 1, or the node has none). relay: n flags or nullptr.
/// seeds / weights: reset distribution (weights >= 0, normalised here; duplicates add).
/// Throws std::invalid_argument on bad arguments or a malformed graph met during the push.
template <typename Index, typename Prob>
PushResult ppr_push(int64_t n, const int64_t* indptr, const Index* indices, const Prob* probs, int64_t nnz,
                    const uint8_t* relay, const int64_t* seeds, const double* weights, int64_t n_seeds,
                    double damping, double epsilon, int64_t max_pushes) {
  if (!(damping >= 0.0 && damping < 1.0)) throw std::invalid_argument("damping must be in [0, 1)");
  if (!(epsilon > 0.0) || !std::isfinite(epsilon)) throw std::invalid_argument("epsilon must be a positive number");
  if (max_pushes < 0) throw std::invalid_argument("max_pushes must be >= 0");
  PushResult out;
  // reset distribution, normalised and merged (duplicates add up), in first-seen order
  std::vector<std::pair<int64_t, double>> reset;
  double total = 0.0;
  {
    detail::NodeTable merged(n_seeds);
    std::vector<double> w_of;
    for (int64_t i = 0; i < n_seeds; ++i) {
      const int64_t s = seeds[i];
      const double w = weights[i];
      if (s < 0 || s >= n) throw std::invalid_argument("seed " + std::to_string(s) + " is not a node of the graph");
      if (!(w >= 0.0) || !std::isfinite(w)) throw std::invalid_argument("seed weights must be finite and >= 0");
      if (w > 0.0) {
        const auto [slot, fresh] = merged.find_or_insert(s);
        if (fresh) {
          reset.emplace_back(s, 0.0);
          w_of.push_back(0.0);
        }
        w_of[slot] += w;
        total += w;
      }
    }
    if (total <= 0.0) return out;
    for (size_t i = 0; i < reset.size(); ++i) reset[i].second = w_of[i] / total;
  }
  auto degree = [&](int64_t u) -> int64_t {
    const int64_t a = indptr[u], b = indptr[u + 1];
    if (a < 0 || b < a || b > nnz) throw std::invalid_argument("malformed graph: bad indptr at node " + std::to_string(u));
    return b - a;
  };

  // Per touched node, in first-touch order: node id, push threshold, residual, estimate and
  // whether it is queued. `table` maps a node id to its slot; memory grows with the nodes the
  // push touches, never with the graph.
  struct Entry {
    double r;       // residual
    double thr;     // push threshold: epsilon * max(1, out-degree)
    uint32_t queued;
  };
  detail::NodeTable table(1024);
  std::vector<Entry> entry;
  std::vector<int64_t> node_of;
  std::vector<double> est;
  entry.reserve(1024);
  node_of.reserve(1024);
  est.reserve(1024);
  std::vector<uint32_t> queue;  // FIFO of slots: pushed at the back, read at `head`
  size_t head = 0;
  auto add = [&](int64_t v, double amount) {
    const auto [slot, fresh] = table.find_or_insert(v);
    if (fresh) {
      entry.push_back(Entry{0.0, epsilon * static_cast<double>(std::max<int64_t>(1, degree(v))), 0});
      node_of.push_back(v);
      est.push_back(0.0);
    }
    Entry& en = entry[slot];
    en.r += amount;
    if (!en.queued && en.r >= en.thr) {
      en.queued = 1;
      queue.push_back(slot);
    }
  };
  for (const auto& [s, w] : reset) add(s, w);

  while (head < queue.size() && out.pushes < max_pushes) {
    const uint32_t slot = queue[head++];
    if (head > 4096 && head * 2 > queue.size()) {  // drop the consumed front: memory stays bounded by what is queued
      queue.erase(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(head));
      head = 0;
    }
    Entry& en = entry[slot];
    en.queued = 0;
    const double ru = en.r;
    if (ru < en.thr) continue;
    en.r = 0.0;
    ++out.pushes;
    const int64_t u = node_of[slot];
    const bool is_relay = relay != nullptr && relay[u] != 0;
    double spread = ru;
    if (!is_relay) {
      est[slot] += (1.0 - damping) * ru;
      spread = damping * ru;
    }
    const int64_t a = indptr[u], b = indptr[u + 1];
    if (a == b) {  // dangling: the walk restarts at the seeds
      for (const auto& [s, w] : reset) add(s, spread * w);
      continue;
    }
    for (int64_t e = a; e < b; ++e) {
      const int64_t v = static_cast<int64_t>(indices[e]);
      if (v < 0 || v >= n) throw std::invalid_argument("malformed graph: edge to node " + std::to_string(v));
      const double p = static_cast<double>(probs[e]);
      if (!(p >= 0.0)) throw std::invalid_argument("malformed graph: negative or NaN step probability");
      ++out.edges;
      if (p > 0.0) add(v, spread * p);
    }
  }
  for (const Entry& en : entry) out.residual += en.r;
  std::vector<std::pair<int64_t, double>> kept;
  kept.reserve(est.size());
  for (size_t i = 0; i < est.size(); ++i)
    if (est[i] > 0.0) kept.emplace_back(node_of[i], est[i]);
  std::sort(kept.begin(), kept.end());
  out.nodes.reserve(kept.size());
  out.mass.reserve(kept.size());
  for (const auto& [node, mass] : kept) {
    out.nodes.push_back(node);
    out.mass.push_back(mass);
  }
  return out;
}

}  // namespace chnsw
