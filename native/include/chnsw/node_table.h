// Per-query node table shared by the graph walks (ppr.h, paths.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace chnsw {

namespace detail {

/// Open-addressing hash map from a node id (>= 0) to a dense slot 0, 1, 2, ... in first-insert
/// order (linear probing, power-of-two capacity, at most half full). Replaces
/// std::unordered_map in the per-query graph walks (ppr.h, paths.h): one multiply and usually
/// one probe per lookup, no allocation per node, memory that grows with the nodes a query
/// touches, never with the graph.
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
    if (size_ >= UINT32_MAX) throw std::length_error("too many touched nodes");
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

}  // namespace chnsw
