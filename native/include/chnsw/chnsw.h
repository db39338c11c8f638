// C-HNSW: ArchRAG's community-based HNSW (specs/seed-archrag.md §2), header-only, no Python.
//
// Structure (§2.1). A list of layers; layer 0 is the finest (entities), layer L the coarsest. Every
// node lives in exactly one layer. Inside a layer nodes are linked to their neighbours chosen with
// the HNSW neighbour-selection heuristic (at most 2M links on layer 0, M above; A6). Every node of
// layer i >= 1 keeps one down-link psi(v) to (approximately) its nearest node of layer i-1 (Eq. 2;
// stored as a plain array, many-to-one allowed: A8).
//
// Build order. Layers are added bottom-up (layer 0 first) through the API, while the paper builds
// top-down (Alg. 3). The invariants are kept as follows:
//  * inserting v into layer l >= 1: after linking v inside layer l, psi(v) is found by a beam
//    search (ef = ef_construction) of layer l-1 entered at psi(nearest new neighbour of v);
//  * inserting v into layer l < L: the insertion descends from the top; at layer l+1 it runs a
//    small beam search (kRepairEf) whose results U are the upper nodes most likely to have v as
//    their new nearest lower node; for each u in U with d(u, v) < d(u, psi(u)) we set psi(u) = v
//    (the A.2 update rule, applied to all of U rather than to the single nearest upper node).
//
// Queries (§2.3, §2.4). The top layer is entered at a fixed, seeded random node, or scanned
// exactly when it has at most `scan_threshold` nodes (default 1024; A11). Descent through the
// layers above the target is the greedy (ef = 1) walk of v1 Alg. 2; the target layer is searched
// with a beam of max(ef_search, k) (A7), or scanned exactly when it is small: a scan of <= 1k
// contiguous vectors costs no more than a beam search over a small layer and is exact (measured
// in native/README.md). search_all_layers is TR Alg. 2: each layer is entered at psi(best hit of
// the layer above) and returns k_i results; the down-links of the next best hits (up to kSeeds
// seeds in all) join the first as extra entry points: on the benchmark's 10k-centroid layer this
// lifts recall@10 at ef 80 from 0.947 to 0.952, enough to drop that layer's beam from 96 to 80.
//
// Concurrency. Readers (searches, save) take a shared lock, writers (add_layer, add, mark_deleted)
// an exclusive one; writers are additionally serialised by their own mutex. `add` releases the
// exclusive lock between chunks of kAddChunkPerThread * threads nodes, so searches interleave
// with a long insert; `add_layer` holds it for the whole call. Inside one insert batch, n threads
// insert in parallel with striped per-node locks on the link lists of the layer being built.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "distance.h"
#include "io.h"
#include "sync.h"
#include "visited.h"

namespace chnsw {

enum class Metric : uint32_t { Cosine = 0, IP = 1, L2 = 2 };

inline const char* metric_name(Metric m) {
  switch (m) {
    case Metric::Cosine: return "cosine";
    case Metric::IP: return "ip";
    case Metric::L2: return "l2";
  }
  return "?";
}

inline bool parse_metric(const std::string& s, Metric& out) {
  if (s == "cosine") { out = Metric::Cosine; return true; }
  if (s == "ip") { out = Metric::IP; return true; }
  if (s == "l2") { out = Metric::L2; return true; }
  return false;
}

/// An id that is not in the index (KeyError in Python).
class unknown_id : public std::out_of_range {
 public:
  explicit unknown_id(int64_t id) : std::out_of_range("id " + std::to_string(id) + " is not in the index") {}
};

constexpr uint32_t kNone = 0xFFFFFFFFu;   ///< no node (e.g. the down-link of a layer-0 node)
constexpr int64_t kPadId = -1;            ///< id used to pad result rows
constexpr std::size_t kMaxDim = 1u << 16;
constexpr std::size_t kMaxM = 512;
constexpr std::size_t kMaxLayers = 1u << 16;
constexpr std::size_t kMaxEf = 1u << 24;
constexpr std::size_t kRepairEf = 32;         ///< beam at layer l+1 when inserting into layer l
constexpr std::size_t kAddChunkPerThread = 256;
constexpr std::size_t kDefaultScanThreshold = 1024;  ///< see Index::scan_threshold
#ifndef CHNSW_PREFETCH_AHEAD
#define CHNSW_PREFETCH_AHEAD 2
#endif
#ifndef CHNSW_PREFETCH_LINES
#define CHNSW_PREFETCH_LINES 1024
#endif
#ifndef CHNSW_SEEDS
#define CHNSW_SEEDS 4
#endif
constexpr std::size_t kSeeds = CHNSW_SEEDS;  ///< entry seeds of each layer in search_all_layers
static_assert(kSeeds >= 1, "CHNSW_SEEDS must be at least 1 (psi of the best hit)");
constexpr uint32_t kPrefetchAhead = CHNSW_PREFETCH_AHEAD;   ///< vectors prefetched ahead in the beam search
constexpr std::size_t kPrefetchLines = CHNSW_PREFETCH_LINES;  ///< cache lines prefetched per vector (cap)

struct Cand {
  float d;
  uint32_t id;
};
/// Max-heap order (furthest on top); ties broken by id for determinism.
struct CandLess {
  bool operator()(const Cand& a, const Cand& b) const { return a.d < b.d || (a.d == b.d && a.id < b.id); }
};
/// Push ``c`` into the max-heap ``R`` (by distance) and drop its worst entry beyond ``ef``.
inline void push_bounded(std::vector<Cand>& R, Cand c, std::size_t ef) {
  R.push_back(c);
  std::push_heap(R.begin(), R.end(), CandLess());
  if (R.size() > ef) {
    std::pop_heap(R.begin(), R.end(), CandLess());
    R.pop_back();
  }
}

/// Min-heap order (nearest on top).
struct CandGreater {
  bool operator()(const Cand& a, const Cand& b) const { return a.d > b.d || (a.d == b.d && a.id > b.id); }
};

/// Advise the kernel to back ``[p, p + bytes)`` with transparent huge pages (Linux; matters
/// where THP is in "madvise" mode, the usual default). The beam search reads vectors and
/// neighbour lists at random over the whole index: with 4 KiB pages nearly every hop of a
/// search over a million nodes misses the TLB (measured at 1M chunks: 5-8 % of a graph
/// method's query time). Called before the buffer is first written, so the pages are huge
/// from their first fault. Advice only: buffers under 4 MiB, other systems and a kernel that
/// refuses are left as they are.
inline void advise_huge_pages(const void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == nullptr || bytes < (std::size_t{4} << 20)) return;
  const long ps = ::sysconf(_SC_PAGESIZE);
  const std::uintptr_t page = ps > 0 ? static_cast<std::uintptr_t>(ps) : 4096u;
  const std::uintptr_t a = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t b = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(page - 1);
  if (b > a) (void)::madvise(reinterpret_cast<void*>(a), b - a, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

/// ``std::allocator`` whose large blocks are advised to huge pages (:func:`advise_huge_pages`)
/// before the vector constructs (writes) its elements.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    T* p = std::allocator<T>().allocate(n);
    advise_huge_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const noexcept { return false; }
};

/// 64-byte-aligned, zero-initialised float buffer (huge pages advised when large).
class AlignedFloats {
 public:
  AlignedFloats() = default;
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  ~AlignedFloats() { release(); }
  float* data() { return p_; }
  const float* data() const { return p_; }
  std::size_t size() const { return n_; }
  /// Grow to n floats keeping the first `keep` floats; the rest is zero.
  void grow(std::size_t n, std::size_t keep) {
    if (n <= n_) return;
    float* q = static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t(64)));
    advise_huge_pages(q, n * sizeof(float));
    if (keep) std::memcpy(q, p_, keep * sizeof(float));
    std::memset(q + keep, 0, (n - keep) * sizeof(float));
    release();
    p_ = q;
    n_ = n;
  }

 private:
  void release() {
    if (p_) ::operator delete(p_, std::align_val_t(64));
    p_ = nullptr;
    n_ = 0;
  }
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Per-thread scratch space reused across queries (no allocation on the hot path once warm).
/// 64-byte aligned: the vector headers are written on every heap push, and two threads' contexts
/// must never share a cache line (false sharing).
struct alignas(64) SearchCtx {
  VisitedSet visited;
  std::vector<Cand> cand, res, work, sel, up, scan, prune, prune_out;
  std::vector<uint32_t> linkbuf, todo;
  AlignedFloats qbuf;
  DistFn dist = nullptr;
};

namespace detail {
inline uint32_t atomic_load_u32(const uint32_t* p) {
#if defined(__GNUC__) || defined(__clang__)
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
  return *reinterpret_cast<const volatile uint32_t*>(p);
#endif
}
inline void atomic_store_u32(uint32_t* p, uint32_t v) {
#if defined(__GNUC__) || defined(__clang__)
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#else
  *reinterpret_cast<volatile uint32_t*>(p) = v;
#endif
}
inline void prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}
}  // namespace detail

class Index {
 public:
  Index(std::size_t dim, Metric metric, std::size_t M = 16, std::size_t ef_construction = 200,
        uint64_t seed = 12345)
      : dim_(dim), pdim_(padded_dim(dim)), metric_(metric), M_(M), M0_(2 * M),
        stride_(1 + 2 * M), ef_construction_(ef_construction), seed_(seed) {
    if (dim < 1 || dim > kMaxDim)
      throw std::invalid_argument("dim must be in [1, " + std::to_string(kMaxDim) + "], got " + std::to_string(dim));
    if (M < 2 || M > kMaxM)
      throw std::invalid_argument("M must be in [2, " + std::to_string(kMaxM) + "], got " + std::to_string(M));
    if (ef_construction < 1 || ef_construction > kMaxEf)
      throw std::invalid_argument("ef_construction must be in [1, " + std::to_string(kMaxEf) + "], got " +
                                  std::to_string(ef_construction));
    if (static_cast<uint32_t>(metric) > 2) throw std::invalid_argument("unknown metric");
  }
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  // ------------------------------------------------------------------ parameters
  std::size_t dim() const { return dim_; }
  Metric metric() const { return metric_; }
  std::size_t M() const { return M_; }
  std::size_t max_links(std::size_t layer) const { return layer == 0 ? M0_ : M_; }
  std::size_t ef_construction() const { return ef_construction_; }
  uint64_t seed() const { return seed_; }
  std::size_t ef_search() const { return ef_search_.load(std::memory_order_relaxed); }
  void set_ef_search(std::size_t ef) {
    if (ef < 1 || ef > kMaxEf) throw std::invalid_argument("ef_search must be in [1, " + std::to_string(kMaxEf) + "]");
    ef_search_.store(ef, std::memory_order_relaxed);
  }
  /// Layers with at most this many nodes are searched by an exact scan instead of the graph.
  std::size_t scan_threshold() const { return scan_threshold_.load(std::memory_order_relaxed); }
  void set_scan_threshold(std::size_t t) { scan_threshold_.store(t, std::memory_order_relaxed); }
  std::size_t num_threads() const { return num_threads_.load(std::memory_order_relaxed); }
  /// Threads for batch queries and inserts, clamped to [1, max_threads()] (the machine's
  /// hardware threads); returns the count actually set.
  std::size_t set_num_threads(std::size_t n) {
    if (n < 1) throw std::invalid_argument("num_threads must be >= 1");
    n = std::min(n, max_threads());
    num_threads_.store(n, std::memory_order_relaxed);
    return n;
  }

  // ------------------------------------------------------------------ sizes
  std::size_t size() const {
    SharedGuard g(rw_);
    return n_;
  }
  std::size_t num_layers() const {
    SharedGuard g(rw_);
    return layer_nodes_.size();
  }
  std::size_t layer_size(std::size_t layer) const {
    SharedGuard g(rw_);
    check_layer(layer);
    return layer_nodes_[layer].size();
  }
  std::size_t num_deleted() const {
    SharedGuard g(rw_);
    return n_deleted_;
  }

  // ------------------------------------------------------------------ validation
  /// Throws std::invalid_argument if a row has NaN/inf (or is zero under the cosine metric).
  void check_vectors(const float* data, std::size_t n, const char* what) const {
    for (std::size_t i = 0; i < n; ++i)
      if (!row_ok(data + i * dim_)) throw row_error(data + i * dim_, i, what);
  }
  /// True if the row is finite (and non-zero under the cosine metric).
  bool row_ok(const float* r) const {
    double ss = 0.0;
    for (std::size_t j = 0; j < dim_; ++j) {
      const float x = r[j];
      if (!std::isfinite(x)) return false;
      ss += static_cast<double>(x) * x;
    }
    return metric_ != Metric::Cosine || ss > 0.0;
  }
  std::invalid_argument row_error(const float* r, std::size_t i, const char* what) const {
    for (std::size_t j = 0; j < dim_; ++j)
      if (!std::isfinite(r[j]))
        return std::invalid_argument(std::string(what) + " row " + std::to_string(i) + " contains NaN or inf");
    return std::invalid_argument(std::string(what) + " row " + std::to_string(i) +
                                 " is a zero vector, which has no direction under the cosine metric");
  }

  // ------------------------------------------------------------------ building
  /// Add a new top layer (layers are added bottom-up, 0 first). `ids` may be null (consecutive
  /// ids from size()). Returns the new layer's index.
  std::size_t add_layer(const float* data, std::size_t n, const int64_t* ids, std::size_t nthreads) {
    if (n == 0) throw std::invalid_argument("vectors is empty: a layer needs at least one vector");
    check_vectors(data, n, "vectors");
    std::lock_guard<std::mutex> w(write_mu_);
    if (layer_nodes_.size() >= kMaxLayers) throw std::invalid_argument("too many layers");
    check_growth(n);
    std::vector<int64_t> ext = resolve_ids(ids, n);
    const Kernels kern = active_kernels();
    ExclusiveGuard g(rw_);
    const std::size_t layer = layer_nodes_.size();
    layer_nodes_.emplace_back();
    layer_entry_.push_back(kNone);
    const uint32_t first = allocate(data, n, ext.data(), layer);
    insert_range(layer, first, n, nthreads, kern);
    return layer;
  }

  /// Insert into an existing layer; intra-layer links and the down-links of layer+1 are repaired.
  void add(const float* data, std::size_t n, std::size_t layer, const int64_t* ids, std::size_t nthreads) {
    if (n == 0) throw std::invalid_argument("vectors is empty: nothing to add");
    std::lock_guard<std::mutex> w(write_mu_);
    if (layer_nodes_.empty())
      throw std::out_of_range("the index has no layers yet: call add_layer first");
    check_layer(layer);
    check_vectors(data, n, "vectors");
    std::vector<int64_t> ext = resolve_ids(ids, n);
    check_growth(n);
    const Kernels kern = active_kernels();
    const std::size_t chunk = kAddChunkPerThread * std::max<std::size_t>(1, nthreads);
    for (std::size_t off = 0; off < n; off += chunk) {
      const std::size_t m = std::min(chunk, n - off);
      ExclusiveGuard g(rw_);
      const uint32_t first = allocate(data + off * dim_, m, ext.data() + off, layer);
      insert_range(layer, first, m, nthreads, kern);
    }
  }

  void mark_deleted(int64_t id) { set_deleted(id, true); }
  void unmark_deleted(int64_t id) { set_deleted(id, false); }
  bool is_deleted(int64_t id) const {
    SharedGuard g(rw_);
    return deleted_[internal(id)] != 0;
  }
  bool contains(int64_t id) const {
    SharedGuard g(rw_);
    return id_map_.count(id) != 0;
  }

  // ------------------------------------------------------------------ queries
  /// k nearest live nodes of `layer` for each of nq queries (row-major, dim floats each).
  /// out_ids / out_dist: nq * k. ef == 0 means ef_search().
  void search(const float* queries, std::size_t nq, std::size_t k, std::size_t layer, std::size_t ef,
              int64_t* out_ids, float* out_dist, std::size_t nthreads) const {
    if (k < 1) throw std::invalid_argument("k must be >= 1");
    SharedGuard g(rw_);
    if (layer_nodes_.empty()) throw std::out_of_range("the index is empty: call add_layer first");
    check_layer(layer);
    const std::size_t ef_eff = std::max(ef ? ef : ef_search(), k);
    auto ctxs = lease_contexts(std::min(std::max<std::size_t>(nthreads, 1), std::max<std::size_t>(nq, 1)));
    BadRow bad;
    parallel_for(0, nq, ctxs.size(), [&](std::size_t i, std::size_t w) {
      if (!row_ok(queries + i * dim_)) return bad.note(i);
      SearchCtx& ctx = *ctxs[w].ctx;
      const float* q = prepare_query(queries + i * dim_, ctx);
      search_one(q, k, layer, ef_eff, out_ids + i * k, out_dist + i * k, ctx);
    }, query_grain(nq, ctxs.size()));
    if (bad.any()) throw row_error(queries + bad.row * dim_, bad.row, "queries");
  }

  /// TR Alg. 2: one top-down pass returning ks[i] results for every layer i (beam max(efs[i], ks[i])).
  /// out_ids[i] / out_dist[i]: nq * ks[i]. With reuse_entry = false every layer is instead searched
  /// by an independent top-down `search` (the behaviour of the ArchRAG code, A9).
  /// efs: empty (ef_search() for every layer) or one beam width per layer (0 = ef_search()).
  void search_all_layers(const float* queries, std::size_t nq, const std::vector<std::size_t>& ks,
                         const std::vector<std::size_t>& efs, bool reuse_entry,
                         const std::vector<int64_t*>& out_ids, const std::vector<float*>& out_dist,
                         std::size_t nthreads) const {
    SharedGuard g(rw_);
    const std::size_t L = layer_nodes_.size();
    if (L == 0) throw std::out_of_range("the index is empty: call add_layer first");
    if (ks.size() != L || out_ids.size() != L || out_dist.size() != L)
      throw std::invalid_argument("need one k per layer: got " + std::to_string(ks.size()) + " for " +
                                  std::to_string(L) + " layers");
    for (std::size_t k : ks)
      if (k < 1) throw std::invalid_argument("k must be >= 1 for every layer");
    if (!efs.empty() && efs.size() != L)
      throw std::invalid_argument("need one ef_search per layer: got " + std::to_string(efs.size()) + " for " +
                                  std::to_string(L) + " layers");
    std::vector<std::size_t> ef_of(L);
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t e = efs.empty() || efs[l] == 0 ? ef_search() : efs[l];
      ef_of[l] = std::max(e, ks[l]);
    }
    auto ctxs = lease_contexts(std::min(std::max<std::size_t>(nthreads, 1), std::max<std::size_t>(nq, 1)));
    BadRow bad;
    parallel_for(0, nq, ctxs.size(), [&](std::size_t i, std::size_t w) {
      if (!row_ok(queries + i * dim_)) return bad.note(i);
      SearchCtx& ctx = *ctxs[w].ctx;
      const float* q = prepare_query(queries + i * dim_, ctx);
      if (!reuse_entry) {
        for (std::size_t l = 0; l < L; ++l)
          search_one(q, ks[l], l, ef_of[l], out_ids[l] + i * ks[l], out_dist[l] + i * ks[l], ctx);
        return;
      }
      uint32_t entries[kSeeds];
      std::size_t n_entries = 1;
      entries[0] = layer_entry_[L - 1];
      for (std::size_t l = L; l-- > 0;) {
        const std::size_t k = ks[l];
        int64_t* oi = out_ids[l] + i * k;
        float* od = out_dist[l] + i * k;
        Cand best;
        const std::vector<Cand>* sorted;
        if (layer_scanned(l)) {
          best = scan_layer(q, l, ctx);
          emit_scan(ctx, k, oi, od);
          sorted = &ctx.scan;
        } else {
          beam_from<false>(q, entries, n_entries, ef_of[l], ctx, true, best);
          emit_res(ctx, k, oi, od);
          sorted = &ctx.res;
        }
        // TR Alg. 2: enter layer l-1 at psi(nearest node of layer l), deleted nodes included;
        // the down-links of the next nearest results join as extra seeds.
        if (l > 0) {
          entries[0] = down_of(best.id);
          if (entries[0] == kNone) entries[0] = layer_entry_[l - 1];
          n_entries = 1;
          const std::size_t m = std::min(sorted->size(), std::min(k, kSeeds));
          for (std::size_t j = 0; j < m && n_entries < kSeeds; ++j) {
            const uint32_t s = down_of((*sorted)[j].id);
            if (s != kNone && s != entries[0]) entries[n_entries++] = s;
          }
        }
      }
    }, query_grain(nq, ctxs.size()));
    if (bad.any()) throw row_error(queries + bad.row * dim_, bad.row, "queries");
  }

  // ------------------------------------------------------------------ inspection
  int64_t down_link(int64_t id) const {
    SharedGuard g(rw_);
    const uint32_t d = down_of(internal(id));
    return d == kNone ? kPadId : ext_ids_[d];
  }
  std::vector<int64_t> neighbors(int64_t id) const {
    SharedGuard g(rw_);
    const uint32_t* l = links(internal(id));
    std::vector<int64_t> out(l[0]);
    for (uint32_t j = 0; j < l[0]; ++j) out[j] = ext_ids_[l[1 + j]];
    return out;
  }
  std::size_t layer_of(int64_t id) const {
    SharedGuard g(rw_);
    return layer_[internal(id)];
  }
  std::vector<int64_t> ids_in_layer(std::size_t layer) const {
    SharedGuard g(rw_);
    check_layer(layer);
    std::vector<int64_t> out;
    out.reserve(layer_nodes_[layer].size());
    for (uint32_t v : layer_nodes_[layer]) out.push_back(ext_ids_[v]);
    return out;
  }
  int64_t entry_point(std::size_t layer) const {
    SharedGuard g(rw_);
    check_layer(layer);
    return ext_ids_[layer_entry_[layer]];
  }
  /// Stored vectors (normalised under the cosine metric) of n ids into out (n * dim).
  void get_vectors(const int64_t* ids, std::size_t n, float* out) const {
    SharedGuard g(rw_);
    std::vector<uint32_t> iv(n);
    for (std::size_t i = 0; i < n; ++i) iv[i] = internal(ids[i]);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(out + i * dim_, vec(iv[i]), dim_ * sizeof(float));
  }

  // ------------------------------------------------------------------ zero-copy vector views
  /// If ids[0..n) are the consecutive nodes first, first+1, ..., first+n-1 (one layer's rows in
  /// insertion order, as a fresh build or a load numbers them), pins the vector buffer and returns
  /// first; otherwise returns -1 and pins nothing. While pinned (unpin_vectors() once per
  /// successful call), vector_data() pointers stay valid: an insert that would have to grow
  /// (reallocate) the buffer throws instead. Throws unknown_id for an id not in the index.
  int64_t pin_run(const int64_t* ids, std::size_t n) {
    std::lock_guard<std::mutex> w(write_mu_);  // no insert runs (or can start growing) meanwhile
    SharedGuard g(rw_);
    if (n == 0) return -1;
    const uint32_t first = internal(ids[0]);
    for (std::size_t i = 1; i < n; ++i)
      if (internal(ids[i]) != first + i) return -1;
    pins_.fetch_add(1, std::memory_order_acq_rel);
    return static_cast<int64_t>(first);
  }
  void unpin_vectors() { pins_.fetch_sub(1, std::memory_order_acq_rel); }
  std::size_t vector_pins() const { return pins_.load(std::memory_order_acquire); }
  /// Stored vector of node `node` (pdim floats, zero padded); valid while the buffer is pinned.
  const float* vector_data(uint32_t node) const { return vec(node); }
  std::size_t row_stride() const { return pdim_; }

  // ------------------------------------------------------------------ persistence
  std::string to_bytes() const {
    SharedGuard g(rw_);
    StringSink sink;
    sink.str().assign(kHeaderSize, '\0');  // placeholder, not part of the CRC
    write_payload(sink);
    const auto h = make_header(sink.size(), sink.crc());
    std::memcpy(&sink.str()[0], h.data(), kHeaderSize);
    return std::move(sink.str());
  }
  void save(const std::string& path) const {
    SharedGuard g(rw_);
    write_file_atomic(path, [&](ByteSink& s) { write_payload(s); });
  }
  static std::unique_ptr<Index> from_bytes(const uint8_t* data, std::size_t n, bool verify_checksum = true) {
    auto payload = check_container(data, n, verify_checksum);
    ByteReader r(payload.first, payload.second);
    return read_payload(r);
  }
  static std::unique_ptr<Index> load(const std::string& path) {
    std::vector<uint8_t> buf = read_file(path);
    return from_bytes(buf.data(), buf.size(), true);
  }

 private:
  // ------------------------------------------------------------------ locking helpers
  struct SharedGuard {
    explicit SharedGuard(RWLock& l) : l_(l) { l_.lock_shared(); }
    ~SharedGuard() { l_.unlock_shared(); }
    RWLock& l_;
  };
  struct ExclusiveGuard {
    explicit ExclusiveGuard(RWLock& l) : l_(l) { l_.lock(); }
    ~ExclusiveGuard() { l_.unlock(); }
    RWLock& l_;
  };
  template <bool kLocked>
  struct NodeGuard {
    NodeGuard(const StripedLocks& s, uint32_t v) : m_(kLocked ? &s.for_node(v) : nullptr) {
      if (kLocked) m_->lock();
    }
    ~NodeGuard() {
      if (kLocked) m_->unlock();
    }
    std::mutex* m_;
  };

  /// The first invalid query row of a batch. Rows are validated inside the workers (a serial pass
  /// over the whole batch would not scale with threads); the smallest bad row is reported, as a
  /// serial check would.
  struct BadRow {
    std::mutex mu;
    std::size_t row = std::numeric_limits<std::size_t>::max();
    void note(std::size_t i) {
      std::lock_guard<std::mutex> lk(mu);
      row = std::min(row, i);
    }
    bool any() const { return row != std::numeric_limits<std::size_t>::max(); }
  };

  struct CtxLease {
    const Index* owner;
    std::unique_ptr<SearchCtx> ctx;
    CtxLease(const Index* o, std::unique_ptr<SearchCtx> c) : owner(o), ctx(std::move(c)) {}
    CtxLease(CtxLease&& o) noexcept : owner(o.owner), ctx(std::move(o.ctx)) {}
    CtxLease& operator=(CtxLease&&) = delete;
    ~CtxLease() {
      if (ctx) owner->return_context(std::move(ctx));
    }
  };

  std::vector<CtxLease> lease_contexts(std::size_t n, const Kernels* kern = nullptr) const {
    const Kernels k = kern ? *kern : active_kernels();
    const DistFn f = metric_ == Metric::L2 ? k.l2_dist : k.ip_dist;
    std::vector<CtxLease> out;
    out.reserve(n);
    std::lock_guard<std::mutex> lk(pool_mu_);
    for (std::size_t i = 0; i < n; ++i) {
      std::unique_ptr<SearchCtx> c;
      if (!pool_.empty()) {
        c = std::move(pool_.back());
        pool_.pop_back();
      } else {
        c.reset(new SearchCtx());
      }
      c->dist = f;
      c->qbuf.grow(pdim_, 0);
      if (c->linkbuf.size() < stride_) c->linkbuf.resize(stride_);
      if (c->todo.size() < stride_) c->todo.resize(stride_);
      out.emplace_back(this, std::move(c));
    }
    return out;
  }
  void return_context(std::unique_ptr<SearchCtx> c) const {
    std::lock_guard<std::mutex> lk(pool_mu_);
    pool_.push_back(std::move(c));
  }

  // ------------------------------------------------------------------ storage helpers
  const float* vec(uint32_t i) const { return vecs_.data() + static_cast<std::size_t>(i) * pdim_; }
  float* vec(uint32_t i) { return vecs_.data() + static_cast<std::size_t>(i) * pdim_; }
  const uint32_t* links(uint32_t i) const { return links_.data() + static_cast<std::size_t>(i) * stride_; }
  uint32_t* links(uint32_t i) { return links_.data() + static_cast<std::size_t>(i) * stride_; }
  uint32_t down_of(uint32_t i) const { return i == kNone ? kNone : detail::atomic_load_u32(&down_[i]); }
  void prefetch_vector(uint32_t i) const {
    const char* p = reinterpret_cast<const char*>(vec(i));
    const std::size_t bytes = std::min(pdim_ * sizeof(float), kPrefetchLines * 64);
    for (std::size_t off = 0; off < bytes; off += 64) detail::prefetch(p + off);
  }
  bool layer_scanned(std::size_t layer) const { return layer_nodes_[layer].size() <= scan_threshold(); }

  void check_layer(std::size_t layer) const {
    if (layer >= layer_nodes_.size())
      throw std::out_of_range("layer " + std::to_string(layer) + " out of range: the index has " +
                              std::to_string(layer_nodes_.size()) + " layer(s)");
  }
  uint32_t internal(int64_t id) const {
    auto it = id_map_.find(id);
    if (it == id_map_.end()) throw unknown_id(id);
    return it->second;
  }

  void set_deleted(int64_t id, bool flag) {
    std::lock_guard<std::mutex> w(write_mu_);
    ExclusiveGuard g(rw_);
    const uint32_t v = internal(id);
    if ((deleted_[v] != 0) == flag) return;
    deleted_[v] = flag ? 1 : 0;
    if (flag)
      ++n_deleted_;
    else
      --n_deleted_;
  }

  /// Ids for a new batch: given ones (checked unique in the batch and against the index) or
  /// consecutive ones from size(). Caller holds write_mu_.
  std::vector<int64_t> resolve_ids(const int64_t* ids, std::size_t n) const {
    std::vector<int64_t> out(n);
    if (ids) {
      std::copy(ids, ids + n, out.begin());
    } else {
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(n_ + i);
    }
    if (n_ + n > static_cast<std::size_t>(kNone) - 1) throw std::invalid_argument("too many nodes for one index");
    std::unordered_map<int64_t, std::size_t> seen;
    seen.reserve(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i] == kPadId) throw std::invalid_argument("id -1 is reserved (it pads result rows)");
      auto ins = seen.emplace(out[i], i);
      if (!ins.second)
        throw std::invalid_argument("duplicate id " + std::to_string(out[i]) + " in this batch (positions " +
                                    std::to_string(ins.first->second) + " and " + std::to_string(i) + ")");
      if (id_map_.count(out[i]))
        throw std::invalid_argument("duplicate id " + std::to_string(out[i]) + ": already in the index" +
                                    (ids ? "" : " (default ids are consecutive from len(index))"));
    }
    return out;
  }

  /// Caller holds write_mu_: an insert of n more nodes must not reallocate a pinned buffer.
  void check_growth(std::size_t n) const {
    if (n_ + n > cap_ && pins_.load(std::memory_order_acquire) > 0)
      throw std::runtime_error("cannot insert " + std::to_string(n) + " node(s): the vector buffer is full and " +
                               std::to_string(pins_.load()) +
                               " zero-copy vector view(s) of it are alive (growing would move it); insert "
                               "into a copy of the index (from_bytes(to_bytes())) or drop the views first");
  }

  void ensure_capacity(std::size_t need) {
    if (need <= cap_) return;
    std::size_t cap = std::max<std::size_t>({need, cap_ * 2, 1024});
    vecs_.grow(cap * pdim_, n_ * pdim_);
    links_.resize(cap * stride_, 0);
    cap_ = cap;
  }

  /// Append n nodes to `layer` (vectors copied, padded and normalised), unlinked.
  uint32_t allocate(const float* data, std::size_t n, const int64_t* ext, std::size_t layer) {
    const uint32_t first = static_cast<uint32_t>(n_);
    ensure_capacity(n_ + n);
    ext_ids_.resize(n_ + n);
    layer_.resize(n_ + n);
    down_.resize(n_ + n, kNone);
    down_dist_.resize(n_ + n, std::numeric_limits<float>::infinity());
    deleted_.resize(n_ + n, 0);
    id_map_.reserve(n_ + n);
    for (std::size_t i = 0; i < n; ++i) {
      const uint32_t v = static_cast<uint32_t>(n_ + i);
      float* dst = vec(v);
      const float* src = data + i * dim_;
      store_vector(src, dst);
      std::memset(links(v), 0, stride_ * sizeof(uint32_t));
      ext_ids_[v] = ext[i];
      layer_[v] = static_cast<uint32_t>(layer);
      id_map_.emplace(ext[i], v);
      layer_nodes_[layer].push_back(v);
    }
    n_ += n;
    return first;
  }

  /// Copy ``dim_`` floats from ``src`` to ``dst``, L2-normalised under the cosine metric.
  void store_vector(const float* src, float* dst) const {
    if (metric_ == Metric::Cosine) {
      double ss = 0.0;
      for (std::size_t j = 0; j < dim_; ++j) ss += static_cast<double>(src[j]) * src[j];
      const double inv = 1.0 / std::sqrt(ss);
      for (std::size_t j = 0; j < dim_; ++j) dst[j] = static_cast<float>(src[j] * inv);
    } else {
      std::memcpy(dst, src, dim_ * sizeof(float));
    }
  }

  /// Copy a query into the context's padded buffer (normalised under the cosine metric).
  const float* prepare_query(const float* q, SearchCtx& ctx) const {
    float* dst = ctx.qbuf.data();
    store_vector(q, dst);
    for (std::size_t j = dim_; j < pdim_; ++j) dst[j] = 0.f;
    return dst;
  }

  // ------------------------------------------------------------------ search primitives
  template <bool kLocked>
  void fetch_links(uint32_t v, SearchCtx& ctx, const uint32_t*& nb, uint32_t& cnt) const {
    if (kLocked) {
      NodeGuard<true> lk(node_locks_, v);
      const uint32_t* l = links(v);
      cnt = l[0];
      std::memcpy(ctx.linkbuf.data(), l + 1, cnt * sizeof(uint32_t));
      nb = ctx.linkbuf.data();
    } else {
      const uint32_t* l = links(v);
      cnt = l[0];
      nb = l + 1;
    }
  }

  /// Greedy (ef = 1) walk inside one layer: move to the best neighbour until none is closer.
  template <bool kLocked>
  Cand greedy(const float* q, Cand cur, SearchCtx& ctx) const {
    for (;;) {
      bool moved = false;
      const uint32_t* nb;
      uint32_t cnt;
      fetch_links<kLocked>(cur.id, ctx, nb, cnt);
      for (uint32_t j = 0; j < cnt; ++j) {
        if (j + 1 < cnt) detail::prefetch(vec(nb[j + 1]));
        const float d = ctx.dist(q, vec(nb[j]), pdim_);
        if (d < cur.d) {
          cur = {d, nb[j]};
          moved = true;
        }
      }
      if (!moved) return cur;
    }
  }

  /// SearchLayer (§2.2) with a beam of `ef`: best-first expansion from `entry`, stopping when the
  /// nearest unexpanded candidate is further than the furthest of ef results. Results are left
  /// in ctx.res as a max-heap; `best` receives the nearest node visited, deleted or not.
  /// With skip_deleted, deleted nodes are traversed but not returned.
  template <bool kLocked>
  void beam(const float* q, uint32_t entry, std::size_t ef, SearchCtx& ctx, bool skip_deleted,
            Cand& best) const {
    beam_from<kLocked>(q, &entry, 1, ef, ctx, skip_deleted, best);
  }

  /// Same, entered at several nodes at once (duplicates ignored).
  template <bool kLocked>
  void beam_from(const float* q, const uint32_t* entries, std::size_t n_entries, std::size_t ef, SearchCtx& ctx,
                 bool skip_deleted, Cand& best) const {
    VisitedSet& vis = ctx.visited;
    vis.reset(n_);
    std::vector<Cand>& C = ctx.cand;
    std::vector<Cand>& R = ctx.res;
    C.clear();
    R.clear();
    const bool filter = skip_deleted && n_deleted_ > 0;
    best = {std::numeric_limits<float>::infinity(), entries[0]};
    for (std::size_t e = 0; e < n_entries; ++e) {
      const uint32_t x = entries[e];
      if (vis.test_and_set(x)) continue;
      const float dx = ctx.dist(q, vec(x), pdim_);
      C.push_back({dx, x});
      std::push_heap(C.begin(), C.end(), CandGreater());
      if (CandLess()(Cand{dx, x}, best)) best = {dx, x};
      if (!filter || !deleted_[x]) push_bounded(R, {dx, x}, ef);
    }
    float bound = R.empty() ? std::numeric_limits<float>::infinity() : R.front().d;
    while (!C.empty()) {
      const Cand c = C.front();
      if (c.d > bound && R.size() >= ef) break;
      std::pop_heap(C.begin(), C.end(), CandGreater());
      C.pop_back();
      const uint32_t* nb;
      uint32_t cnt;
      fetch_links<kLocked>(c.id, ctx, nb, cnt);
      // Gather the unvisited neighbours first, then compute their distances while prefetching
      // the vectors kPrefetchAhead positions ahead (whole vectors: at 100k x 384-d the search is
      // bound by memory latency, not by arithmetic).
      uint32_t* todo = ctx.todo.data();
      uint32_t m = 0;
      for (uint32_t j = 0; j < cnt; ++j) {
        const uint32_t x = nb[j];
        if (!vis.test_and_set(x)) todo[m++] = x;
      }
      for (uint32_t j = 0; j < m && j < kPrefetchAhead; ++j) prefetch_vector(todo[j]);
      for (uint32_t j = 0; j < m; ++j) {
        const uint32_t x = todo[j];
        if (j + kPrefetchAhead < m) prefetch_vector(todo[j + kPrefetchAhead]);
        const float dx = ctx.dist(q, vec(x), pdim_);
        if (R.size() < ef || dx < bound) {
          C.push_back({dx, x});
          std::push_heap(C.begin(), C.end(), CandGreater());
          if (dx < best.d) best = {dx, x};
          if (!filter || !deleted_[x]) {
            push_bounded(R, {dx, x}, ef);
            bound = R.front().d;
          }
        }
      }
      if (!C.empty()) detail::prefetch(links(C.front().id));
    }
  }

  /// Exact scan of one (small) layer into ctx.scan; returns its nearest node (deleted or not).
  Cand scan_layer(const float* q, std::size_t layer, SearchCtx& ctx) const {
    std::vector<Cand>& S = ctx.scan;
    S.clear();
    Cand best{std::numeric_limits<float>::infinity(), kNone};
    for (uint32_t v : layer_nodes_[layer]) {
      const Cand c{ctx.dist(q, vec(v), pdim_), v};
      S.push_back(c);
      if (CandLess()(c, best)) best = c;
    }
    return best;
  }

  void emit_scan(SearchCtx& ctx, std::size_t k, int64_t* ids, float* dists) const {
    std::vector<Cand>& S = ctx.scan;
    if (n_deleted_ > 0)
      S.erase(std::remove_if(S.begin(), S.end(), [&](const Cand& c) { return deleted_[c.id] != 0; }), S.end());
    const std::size_t m = std::min(k, S.size());
    std::partial_sort(S.begin(), S.begin() + m, S.end(), CandLess());
    write_out(S, m, k, ids, dists);
  }

  void emit_res(SearchCtx& ctx, std::size_t k, int64_t* ids, float* dists) const {
    std::vector<Cand>& R = ctx.res;
    std::sort_heap(R.begin(), R.end(), CandLess());
    write_out(R, std::min(k, R.size()), k, ids, dists);
  }

  void write_out(const std::vector<Cand>& S, std::size_t m, std::size_t k, int64_t* ids, float* dists) const {
    for (std::size_t i = 0; i < m; ++i) {
      ids[i] = ext_ids_[S[i].id];
      dists[i] = S[i].d;
    }
    for (std::size_t i = m; i < k; ++i) {
      ids[i] = kPadId;
      dists[i] = std::numeric_limits<float>::infinity();
    }
  }

  /// A node of layer `target` to enter it from: scan (small top) or fixed entry of the top layer,
  /// greedy walks in the layers above `target`, following down-links (v1 Alg. 2 lines 1-4).
  Cand descend_to(const float* q, std::size_t target, SearchCtx& ctx) const {
    const std::size_t T = layer_nodes_.size() - 1;
    if (target == T) return {ctx.dist(q, vec(layer_entry_[T]), pdim_), layer_entry_[T]};
    // Top layer: exact scan if small (A11), else the fixed entry and a greedy walk. Intermediate
    // layers are always walked greedily: scanning them would cost far more than the walk.
    Cand c = layer_scanned(T) ? scan_layer(q, T, ctx)
                              : greedy<false>(q, {ctx.dist(q, vec(layer_entry_[T]), pdim_), layer_entry_[T]}, ctx);
    for (std::size_t i = T; i > target; --i) {
      if (i < T) c = greedy<false>(q, c, ctx);
      uint32_t s = down_of(c.id);
      if (s == kNone) s = layer_entry_[i - 1];
      c = {ctx.dist(q, vec(s), pdim_), s};
    }
    return c;
  }

  void search_one(const float* q, std::size_t k, std::size_t layer, std::size_t ef, int64_t* ids,
                  float* dists, SearchCtx& ctx) const {
    if (layer_scanned(layer)) {
      scan_layer(q, layer, ctx);
      emit_scan(ctx, k, ids, dists);
      return;
    }
    const Cand entry = descend_to(q, layer, ctx);
    Cand best;
    beam<false>(q, entry.id, ef, ctx, true, best);
    emit_res(ctx, k, ids, dists);
  }

  // ------------------------------------------------------------------ insertion
  /// HNSW neighbour-selection heuristic: keep a candidate only if it is closer to the base node
  /// than to every neighbour already kept. `W` is sorted nearest first.
  void select_neighbors(const std::vector<Cand>& W, std::size_t m, std::vector<Cand>& out,
                        const SearchCtx& ctx) const {
    out.clear();
    if (W.size() <= m) {
      out = W;
      return;
    }
    for (const Cand& c : W) {
      if (out.size() >= m) break;
      bool keep = true;
      for (const Cand& r : out) {
        if (ctx.dist(vec(c.id), vec(r.id), pdim_) < c.d) {
          keep = false;
          break;
        }
      }
      if (keep) out.push_back(c);
    }
  }

  /// Add the link u -> v (distance d) inside `layer`, pruning u's list with the heuristic when full.
  template <bool kLocked>
  void connect(uint32_t u, uint32_t v, float d, std::size_t layer, SearchCtx& ctx) {
    NodeGuard<kLocked> lk(node_locks_, u);
    uint32_t* lu = links(u);
    const uint32_t cnt = lu[0];
    const std::size_t maxm = max_links(layer);
    for (uint32_t j = 0; j < cnt; ++j)
      if (lu[1 + j] == v) return;
    if (cnt < maxm) {
      lu[1 + cnt] = v;
      lu[0] = cnt + 1;
      return;
    }
    std::vector<Cand>& P = ctx.prune;
    P.clear();
    P.push_back({d, v});
    for (uint32_t j = 0; j < cnt; ++j) P.push_back({ctx.dist(vec(u), vec(lu[1 + j]), pdim_), lu[1 + j]});
    std::sort(P.begin(), P.end(), CandLess());
    select_neighbors(P, maxm, ctx.prune_out, ctx);
    lu[0] = static_cast<uint32_t>(ctx.prune_out.size());
    for (std::size_t j = 0; j < ctx.prune_out.size(); ++j) lu[1 + j] = ctx.prune_out[j].id;
  }

  /// Insert node v (allocated, unlinked) into `layer`; see the file comment for the algorithm.
  /// Order matters under parallel insertion: v's own links are written before any down-link is
  /// pointed at v, so a concurrent inserter entering layer `layer` through a down-link never
  /// lands on an unlinked node.
  template <bool kLocked>
  void insert_one(uint32_t v, std::size_t layer, SearchCtx& ctx) {
    const float* q = vec(v);
    const std::size_t T = layer_nodes_.size() - 1;
    uint32_t entry = layer_entry_[layer];
    Cand best;
    std::vector<Cand>& U = ctx.up;
    U.clear();
    if (layer < T) {
      // Descend to layer+1 and collect v's nearest upper nodes there (repair candidates).
      if (layer + 1 == T && layer_scanned(T)) {
        scan_layer(q, T, ctx);
        U = ctx.scan;
        const std::size_t m = std::min(kRepairEf, U.size());
        std::partial_sort(U.begin(), U.begin() + m, U.end(), CandLess());
        U.resize(m);
      } else {
        const Cand e = descend_to(q, layer + 1, ctx);
        beam<false>(q, e.id, kRepairEf, ctx, false, best);
        U = ctx.res;
        std::sort(U.begin(), U.end(), CandLess());
      }
      // Enter `layer` at the down-link target of the nearest upper node.
      for (const Cand& u : U) {
        const uint32_t s = down_of(u.id);
        if (s != kNone && s != v) {
          entry = s;
          break;
        }
      }
    }
    std::vector<Cand>& sel = ctx.sel;
    sel.clear();
    if (entry != v && entry != kNone) {
      beam<kLocked>(q, entry, ef_construction_, ctx, false, best);
      std::vector<Cand>& W = ctx.work;
      W.clear();
      for (const Cand& c : ctx.res)
        if (c.id != v) W.push_back(c);
      std::sort(W.begin(), W.end(), CandLess());
      select_neighbors(W, M_, sel, ctx);
      {
        NodeGuard<kLocked> lk(node_locks_, v);
        uint32_t* lv = links(v);
        lv[0] = static_cast<uint32_t>(sel.size());
        for (std::size_t j = 0; j < sel.size(); ++j) lv[1 + j] = sel[j].id;
      }
      for (const Cand& u : sel) connect<kLocked>(u.id, v, u.d, layer, ctx);
    }
    if (layer >= 1) {
      // psi(v): nearest node of layer-1, entered at psi(nearest neighbour of v).
      uint32_t s = kNone;
      for (const Cand& u : sel) {
        s = down_of(u.id);
        if (s != kNone) break;
      }
      if (s == kNone) s = layer_entry_[layer - 1];
      if (layer_scanned(layer - 1))
        best = scan_layer(q, layer - 1, ctx);
      else
        beam<false>(q, s, ef_construction_, ctx, false, best);
      down_dist_[v] = best.d;
      detail::atomic_store_u32(&down_[v], best.id);
    }
    // A.2 update rule: upper nodes for which v is now the nearest lower node point down to v.
    for (const Cand& u : U) {
      NodeGuard<kLocked> lk(node_locks_, u.id);
      if (u.d < down_dist_[u.id]) {
        down_dist_[u.id] = u.d;
        detail::atomic_store_u32(&down_[u.id], v);
      }
    }
  }

  /// Insert the allocated nodes [first, first+n) into `layer` on nthreads threads.
  void insert_range(std::size_t layer, uint32_t first, std::size_t n, std::size_t nthreads, const Kernels& kern) {
    nthreads = std::max<std::size_t>(1, std::min(nthreads, n));
    auto ctxs = lease_contexts(nthreads, &kern);
    std::size_t skip = n;  // position inserted first (the layer's seeded entry), if any
    if (layer_entry_[layer] == kNone) {
      std::mt19937_64 rng(seed_ ^ (0x9E3779B97F4A7C15ull * (layer + 1)));
      skip = static_cast<std::size_t>(rng() % n);
      layer_entry_[layer] = first + static_cast<uint32_t>(skip);
      insert_one<false>(first + static_cast<uint32_t>(skip), layer, *ctxs[0].ctx);
    }
    const std::size_t todo = skip < n ? n - 1 : n;
    auto node_at = [&](std::size_t i) {
      return first + static_cast<uint32_t>(skip < n && i >= skip ? i + 1 : i);
    };
    if (nthreads == 1) {
      for (std::size_t i = 0; i < todo; ++i) insert_one<false>(node_at(i), layer, *ctxs[0].ctx);
    } else {
      parallel_for(0, todo, nthreads, [&](std::size_t i, std::size_t w) {
        insert_one<true>(node_at(i), layer, *ctxs[w].ctx);
      });
    }
  }

  // ------------------------------------------------------------------ serialisation
  // Payload (little-endian):
  //   u32 dim, u32 metric, u32 M, u32 ef_construction, u32 ef_search, u32 scan_threshold, u64 seed,
  //   u32 num_layers, u32 reserved=0, u64 n,
  //   num_layers x {u64 size, u32 entry (internal index), u32 reserved=0},
  //   n x i64 id, n x u32 layer, n x u32 down (0xFFFFFFFF on layer 0), n x u8 deleted,
  //   n x {u32 count, count x u32 neighbour}, n x dim x f32 vector (stored, i.e. normalised for cosine).
  void write_payload(ByteSink& s) const {
    s.u32(static_cast<uint32_t>(dim_));
    s.u32(static_cast<uint32_t>(metric_));
    s.u32(static_cast<uint32_t>(M_));
    s.u32(static_cast<uint32_t>(ef_construction_));
    s.u32(static_cast<uint32_t>(ef_search()));
    s.u32(static_cast<uint32_t>(std::min<std::size_t>(scan_threshold(), 0xFFFFFFFFu)));
    s.u64(seed_);
    s.u32(static_cast<uint32_t>(layer_nodes_.size()));
    s.u32(0);
    s.u64(n_);
    for (std::size_t l = 0; l < layer_nodes_.size(); ++l) {
      s.u64(layer_nodes_[l].size());
      s.u32(layer_entry_[l]);
      s.u32(0);
    }
    std::vector<uint8_t> idbytes(n_ * 8);
    for (std::size_t i = 0; i < n_; ++i) put_le(idbytes.data() + 8 * i, static_cast<uint64_t>(ext_ids_[i]), 8);
    s.write(idbytes.data(), idbytes.size());
    s.array32(layer_.data(), n_);
    s.array32(down_.data(), n_);
    s.write(deleted_.data(), n_);
    std::vector<uint32_t> lbuf;
    lbuf.reserve(n_ * (M_ + 1));
    for (std::size_t i = 0; i < n_; ++i) {
      const uint32_t* l = links(static_cast<uint32_t>(i));
      lbuf.insert(lbuf.end(), l, l + 1 + l[0]);
    }
    s.array32(lbuf.data(), lbuf.size());
    for (std::size_t i = 0; i < n_; ++i) s.array32(vec(static_cast<uint32_t>(i)), dim_);
  }

  static std::unique_ptr<Index> read_payload(ByteReader& r) {
    auto bad = [](const std::string& m) { return format_error("corrupt payload: " + m); };
    const uint32_t dim = r.u32("dim");
    const uint32_t metric = r.u32("metric");
    const uint32_t M = r.u32("M");
    const uint32_t efc = r.u32("ef_construction");
    const uint32_t efs = r.u32("ef_search");
    const uint32_t scan_threshold = r.u32("scan_threshold");
    const uint64_t seed = r.u64("seed");
    const uint32_t L = r.u32("num_layers");
    if (r.u32("reserved") != 0) throw bad("reserved field is not zero");
    const uint64_t n = r.u64("node count");
    if (dim < 1 || dim > kMaxDim) throw bad("dim " + std::to_string(dim) + " out of range");
    if (metric > 2) throw bad("unknown metric code " + std::to_string(metric));
    if (M < 2 || M > kMaxM) throw bad("M " + std::to_string(M) + " out of range");
    if (efc < 1 || efc > kMaxEf) throw bad("ef_construction out of range");
    if (efs < 1 || efs > kMaxEf) throw bad("ef_search out of range");
    if (L > kMaxLayers) throw bad("too many layers");
    if (n >= kNone) throw bad("node count out of range");
    if ((n == 0) != (L == 0) || n < L) throw bad("node count inconsistent with layer count");
    // Each node needs at least id + layer + down + deleted + count + vector bytes.
    const uint64_t per_node = 8 + 4 + 4 + 1 + 4 + 4ull * dim;
    if (n > (r.remaining() / per_node)) throw format_error("corrupt payload: truncated (node count " + std::to_string(n) + " needs more bytes than remain)");
    if (L > r.remaining() / 16) throw format_error("corrupt payload: truncated while reading layer table");

    std::unique_ptr<Index> idx(new Index(dim, static_cast<Metric>(metric), M, efc, seed));
    idx->ef_search_.store(efs);
    idx->scan_threshold_.store(scan_threshold);
    std::vector<uint64_t> sizes(L);
    std::vector<uint32_t> entries(L);
    uint64_t total = 0;
    for (uint32_t l = 0; l < L; ++l) {
      sizes[l] = r.u64("layer size");
      entries[l] = r.u32("layer entry");
      if (r.u32("reserved") != 0) throw bad("reserved field is not zero");
      if (sizes[l] == 0 || sizes[l] > n) throw bad("layer " + std::to_string(l) + " size out of range");
      total += sizes[l];
      if (entries[l] >= n) throw bad("layer " + std::to_string(l) + " entry out of range");
    }
    if (total != n) throw bad("layer sizes do not add up to the node count");

    const std::size_t N = static_cast<std::size_t>(n);
    Index& x = *idx;
    x.ensure_capacity(N);
    x.ext_ids_.resize(N);
    x.layer_.resize(N);
    x.down_.resize(N);
    x.down_dist_.resize(N, std::numeric_limits<float>::infinity());
    x.deleted_.resize(N);
    x.layer_nodes_.resize(L);
    x.layer_entry_ = entries;
    x.id_map_.reserve(N);
    for (std::size_t i = 0; i < N; ++i) {
      const int64_t id = r.i64("ids");
      if (id == kPadId) throw bad("id -1 is reserved");
      if (!x.id_map_.emplace(id, static_cast<uint32_t>(i)).second) throw bad("duplicate id " + std::to_string(id));
      x.ext_ids_[i] = id;
    }
    r.array32(x.layer_.data(), N, "layers");
    for (std::size_t i = 0; i < N; ++i) {
      if (x.layer_[i] >= L) throw bad("node layer out of range");
      x.layer_nodes_[x.layer_[i]].push_back(static_cast<uint32_t>(i));
    }
    for (uint32_t l = 0; l < L; ++l) {
      if (x.layer_nodes_[l].size() != sizes[l]) throw bad("layer " + std::to_string(l) + " size mismatch");
      if (x.layer_[entries[l]] != l) throw bad("layer " + std::to_string(l) + " entry is not in that layer");
    }
    r.array32(x.down_.data(), N, "down-links");
    for (std::size_t i = 0; i < N; ++i) {
      const uint32_t d = x.down_[i];
      if (x.layer_[i] == 0) {
        if (d != kNone) throw bad("layer-0 node with a down-link");
      } else if (d >= N || x.layer_[d] + 1 != x.layer_[i]) {
        throw bad("down-link of node " + std::to_string(i) + " does not point into the layer below");
      }
    }
    r.need(N, "deleted flags");
    for (std::size_t i = 0; i < N; ++i) {
      const uint8_t f = r.u8("deleted flags");
      if (f > 1) throw bad("deleted flag is not 0 or 1");
      x.deleted_[i] = f;
      x.n_deleted_ += f;
    }
    for (std::size_t i = 0; i < N; ++i) {
      uint32_t* l = x.links(static_cast<uint32_t>(i));
      const uint32_t cnt = r.u32("link count");
      if (cnt > x.max_links(x.layer_[i])) throw bad("node " + std::to_string(i) + " has too many links");
      l[0] = cnt;
      r.array32(l + 1, cnt, "links");
      for (uint32_t j = 0; j < cnt; ++j) {
        const uint32_t t = l[1 + j];
        if (t >= N || t == i || x.layer_[t] != x.layer_[i])
          throw bad("link of node " + std::to_string(i) + " leaves its layer or is out of range");
      }
    }
    if (N > r.remaining() / (4ull * dim) || r.remaining() != N * 4ull * dim)
      throw format_error(r.remaining() < N * 4ull * dim ? "corrupt payload: truncated while reading vectors"
                                                        : "corrupt payload: trailing bytes after the vectors");
    for (std::size_t i = 0; i < N; ++i) {
      float* v = x.vec(static_cast<uint32_t>(i));
      r.array32(v, dim, "vectors");
      for (std::size_t j = 0; j < dim; ++j)
        if (!std::isfinite(v[j])) throw bad("vector of node " + std::to_string(i) + " is not finite");
    }
    x.n_ = N;
    const Kernels k = active_kernels();
    const DistFn f = x.metric_ == Metric::L2 ? k.l2_dist : k.ip_dist;
    for (std::size_t i = 0; i < N; ++i)
      if (x.down_[i] != kNone) x.down_dist_[i] = f(x.vec(static_cast<uint32_t>(i)), x.vec(x.down_[i]), x.pdim_);
    return idx;
  }

  // ------------------------------------------------------------------ data
  const std::size_t dim_, pdim_;
  const Metric metric_;
  const std::size_t M_, M0_, stride_;
  const std::size_t ef_construction_;
  const uint64_t seed_;
  std::atomic<std::size_t> ef_search_{64};
  std::atomic<std::size_t> scan_threshold_{kDefaultScanThreshold};
  std::atomic<std::size_t> num_threads_{1};
  std::atomic<std::size_t> pins_{0};   // live zero-copy views of vecs_ (pin_run / unpin_vectors)

  std::size_t n_ = 0, cap_ = 0, n_deleted_ = 0;
  AlignedFloats vecs_;                 // cap_ x pdim_, 64-byte aligned, zero padded
  std::vector<uint32_t, HugePageAllocator<uint32_t>> links_;  // cap_ x (1 + 2M): count, then neighbours
  std::vector<int64_t> ext_ids_;
  std::vector<uint32_t> layer_;
  std::vector<uint32_t> down_;         // psi, kNone on layer 0
  std::vector<float> down_dist_;       // d(v, psi(v)), kept for the repair rule
  std::vector<uint8_t> deleted_;
  std::unordered_map<int64_t, uint32_t> id_map_;
  std::vector<std::vector<uint32_t>> layer_nodes_;
  std::vector<uint32_t> layer_entry_;

  mutable RWLock rw_;
  std::mutex write_mu_;
  StripedLocks node_locks_;
  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<SearchCtx>> pool_;
};

}  // namespace chnsw
