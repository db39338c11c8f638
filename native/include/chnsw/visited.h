// Visited-set with epoch counters: clearing is O(1) per query (bump the epoch) and the array is
// only zeroed when the 16-bit epoch wraps (every 65535 queries of one search context).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chnsw {

class VisitedSet {
 public:
  /// Start a new query over node ids [0, n).
  void reset(std::size_t n) {
    if (marks_.size() < n) marks_.resize(n + n / 4 + 64, 0);
    if (++epoch_ == 0) {
      std::fill(marks_.begin(), marks_.end(), static_cast<uint16_t>(0));
      epoch_ = 1;
    }
  }
  /// Mark i; return true if it was already marked in this query.
  bool test_and_set(uint32_t i) {
    uint16_t& m = marks_[i];
    if (m == epoch_) return true;
    m = epoch_;
    return false;
  }
  bool test(uint32_t i) const { return marks_[i] == epoch_; }
  const void* address_of(uint32_t i) const { return &marks_[i]; }

 private:
  std::vector<uint16_t> marks_;
  uint16_t epoch_ = 0;
};

}  // namespace chnsw
