// Unweighted shortest path by bidirectional breadth-first search (HiRAG's bridge paths, spec
// seed-hirag.md §3.1 Eq. 15), in the order networkx's `bidirectional_shortest_path` searches:
// the side with the smaller fringe expands a whole level, each node's neighbours in CSR order,
// and the first neighbour already reached from the other side is the meeting node. The same
// graph therefore gives the same path as networkx, node for node.
//
// The scan stops at the meeting neighbour (networkx does too): on graphs with hub nodes the
// last level is most of a search, and stopping there read about a quarter of the neighbour
// entries a whole-level scan reads on the kernel-docs corpus. Each searching thread keeps one
// mark byte and one parent index per node between searches (cleared node by node after each),
// so a search costs what it scans, not the graph's size.
//
// Nothing here knows Python. The graph arrays are only read; every index is checked when it is
// visited (a malformed graph is an error, never an out-of-bounds read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace chnsw {

struct PathResult {
  std::vector<int64_t> path;  // the nodes from a to b; empty when not found
  bool found = false;         // a path was found
  bool exhausted = false;     // the search stopped at max_visits before finding one
  int64_t visits = 0;         // neighbour entries scanned
};

namespace detail {

/// One thread's search scratch, kept between searches: which side reached each node (0 none,
/// 1 from a, 2 from b; all 0 between searches) and its parent there, for graphs of up to the
/// largest n searched so far (n bytes plus n indices per searching thread). A search costs
/// what it scans, not the graph's size: it clears only the nodes it reached.
template <typename Index>
struct BfsScratch {
  std::vector<uint8_t> side;
  std::vector<Index> parent;
  std::vector<int64_t> touched;
  std::vector<int64_t> fringe[3];
  std::vector<int64_t> next;

  void fit(int64_t n) {
    if (static_cast<int64_t>(side.size()) < n) {
      side.assign(static_cast<size_t>(n), 0);
      parent.resize(static_cast<size_t>(n));
    }
  }
  void reach(int64_t v, uint8_t s, int64_t p) {
    side[static_cast<size_t>(v)] = s;
    parent[static_cast<size_t>(v)] = static_cast<Index>(p);
    touched.push_back(v);
  }
};

template <typename Index>
BfsScratch<Index>& bfs_scratch() {
  thread_local BfsScratch<Index> scratch;
  return scratch;
}

/// Clears the marks a search set, on every way out of it (a malformed graph throws mid-search).
template <typename Index>
struct BfsClear {
  BfsScratch<Index>& s;
  ~BfsClear() {
    for (const int64_t v : s.touched) s.side[static_cast<size_t>(v)] = 0;
    s.touched.clear();
  }
};

}  // namespace detail

/// Shortest path between nodes `a` and `b` of an undirected graph given as symmetric CSR
/// adjacency (indptr: n + 1 int64 offsets; indices: nnz neighbour indices, int32 or int64).
///
/// max_visits: stop after scanning this many neighbour entries (< 0: no bound); the result is
/// then not found, with `exhausted` set. Throws std::invalid_argument for endpoints outside
/// [0, n) or a malformed graph met during the search.
template <typename Index>
PathResult shortest_path(int64_t n, const int64_t* indptr, const Index* indices, int64_t nnz, int64_t a, int64_t b,
                         int64_t max_visits) {
  if (a < 0 || a >= n || b < 0 || b >= n) throw std::invalid_argument("path endpoints must be node indices in [0, n)");
  PathResult out;
  if (a == b) {
    out.path = {a};
    out.found = true;
    return out;
  }
  detail::BfsScratch<Index>& sc = detail::bfs_scratch<Index>();
  sc.fit(n);
  detail::BfsClear<Index> clear{sc};
  sc.reach(a, 1, -1);
  sc.reach(b, 2, -1);
  // the chain of parents from v (inclusive) to its side's endpoint
  auto chain = [&](int64_t v) {
    std::vector<int64_t> c;
    while (v != -1) {
      c.push_back(v);
      v = static_cast<int64_t>(sc.parent[static_cast<size_t>(v)]);
    }
    return c;
  };
  std::vector<int64_t>* fringe = sc.fringe;
  fringe[1].assign(1, a);
  fringe[2].assign(1, b);
  std::vector<int64_t>& next = sc.next;
  while (!fringe[1].empty() && !fringe[2].empty()) {
    const uint8_t s = fringe[1].size() <= fringe[2].size() ? 1 : 2;
    next.clear();
    for (const int64_t v : fringe[s]) {
      const int64_t lo = indptr[v], hi = indptr[v + 1];
      if (lo < 0 || hi < lo || hi > nnz) throw std::invalid_argument("malformed graph: indptr out of order or past the indices");
      for (int64_t p = lo; p < hi; ++p) {
        if (max_visits >= 0 && out.visits >= max_visits) {
          out.exhausted = true;
          return out;
        }
        ++out.visits;
        const int64_t w = static_cast<int64_t>(indices[p]);
        if (w < 0 || w >= n) throw std::invalid_argument("malformed graph: a neighbour index outside [0, n)");
        const uint8_t sw = sc.side[static_cast<size_t>(w)];
        if (sw == 0) {
          sc.reach(w, s, v);
          next.push_back(w);
          continue;
        }
        if (sw == s) continue;
        // met: w was reached from the other side; v is its neighbour on this side
        std::vector<int64_t> head = chain(s == 1 ? v : w);  // ... back to a
        std::vector<int64_t> tail = chain(s == 1 ? w : v);  // ... on to b
        out.path.assign(head.rbegin(), head.rend());
        out.path.insert(out.path.end(), tail.begin(), tail.end());
        out.found = true;
        return out;
      }
    }
    fringe[s].swap(next);
  }
  return out;  // disconnected
}

}  // namespace chnsw
