// Unweighted shortest path by bidirectional breadth-first search (HiRAG's bridge paths, spec
// seed-hirag.md §3.1 Eq. 15), in the order networkx's `bidirectional_shortest_path` searches:
// the side with the smaller fringe expands a whole level, each node's neighbours in CSR order,
// and the first neighbour already reached from the other side is the meeting node. The same
// graph therefore gives the same path as networkx, node for node.
//
// The scan stops at the meeting neighbour (networkx does too): on graphs with hub nodes the
// last level is most of a search, and stopping there read about a quarter of the neighbour
// entries a whole-level scan reads on the kernel-docs corpus. Memory grows with the nodes the
// search reaches (a NodeTable), never with the graph.
//
// Nothing here knows Python. The graph arrays are only read; every index is checked when it is
// visited (a malformed graph is an error, never an out-of-bounds read).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "node_table.h"

namespace chnsw {

struct PathResult {
  std::vector<int64_t> path;  // the nodes from a to b; empty when not found
  bool found = false;         // a path was found
  bool exhausted = false;     // the search stopped at max_visits before finding one
  int64_t visits = 0;         // neighbour entries scanned
};

/// Shortest path between nodes `a` and `b` of an undirected graph given as symmetric CSR
/// adjacency (indptr: n + 1 int64 offsets; indices: nnz neighbour indices).
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
  // slot -> (side, parent): side 1 = reached from a, 2 = reached from b; parent -1 at a and b
  detail::NodeTable table(256);
  std::vector<int8_t> side;
  std::vector<int64_t> parent;
  auto reach = [&](int64_t v, int8_t s, int64_t p) {
    table.find_or_insert(v);
    side.push_back(s);
    parent.push_back(p);
  };
  reach(a, 1, -1);
  reach(b, 2, -1);
  // the chain of parents from v (inclusive) to its side's endpoint
  auto chain = [&](int64_t v) {
    std::vector<int64_t> c;
    while (v != -1) {
      c.push_back(v);
      v = parent[table.find_or_insert(v).first];
    }
    return c;
  };
  std::vector<int64_t> fringe[3] = {{}, {a}, {b}};
  std::vector<int64_t> next;
  while (!fringe[1].empty() && !fringe[2].empty()) {
    const int8_t s = fringe[1].size() <= fringe[2].size() ? 1 : 2;
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
        const auto [slot, fresh] = table.find_or_insert(w);
        if (fresh) {
          side.push_back(s);
          parent.push_back(v);
          next.push_back(w);
          continue;
        }
        if (side[slot] == s) continue;
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
