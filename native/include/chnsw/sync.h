// Synchronisation helpers: a writer-preferring readers/writer lock, striped node locks for
// parallel insertion, and a small parallel-for over std::threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace chnsw {

/// Readers/writer lock that lets a waiting writer in before new readers (std::shared_mutex on
/// glibc prefers readers, so a steady stream of overlapping searches could starve `add`).
class RWLock {
 public:
  void lock_shared() {
    std::unique_lock<std::mutex> lk(m_);
    cv_.wait(lk, [&] { return !writer_ && waiting_writers_ == 0; });
    ++readers_;
  }
  void unlock_shared() {
    std::lock_guard<std::mutex> lk(m_);
    if (--readers_ == 0) cv_.notify_all();
  }
  void lock() {
    std::unique_lock<std::mutex> lk(m_);
    ++waiting_writers_;
    cv_.wait(lk, [&] { return !writer_ && readers_ == 0; });
    --waiting_writers_;
    writer_ = true;
  }
  void unlock() {
    std::lock_guard<std::mutex> lk(m_);
    writer_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::size_t readers_ = 0;
  std::size_t waiting_writers_ = 0;
  bool writer_ = false;
};

/// Most worker threads any index uses: the machine's hardware threads
/// (std::thread::hardware_concurrency; 1 when it is unknown). More would only oversubscribe
/// the cores and cost a stack per thread.
inline std::size_t max_threads() {
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? std::size_t{1} : static_cast<std::size_t>(hc);
}

/// Items per slice for a batch of `n` queries on `nthreads` threads: about 8 slices per thread
/// (load balance on a shared machine), at most 64 queries each.
inline std::size_t query_grain(std::size_t n, std::size_t nthreads) {
  const std::size_t g = n / (std::max<std::size_t>(nthreads, 1) * 8);
  return std::min<std::size_t>(std::max<std::size_t>(g, 1), 64);
}

/// Fixed pool of mutexes; node i uses stripe i % kStripes. Code never holds two at once.
class StripedLocks {
 public:
  static constexpr std::size_t kStripes = 4096;
  StripedLocks() : locks_(new std::mutex[kStripes]) {}
  std::mutex& for_node(uint32_t i) const { return locks_[i & (kStripes - 1)]; }

 private:
  std::unique_ptr<std::mutex[]> locks_;
};

/// Run f(i, worker) for i in [begin, end) on `nthreads` threads (the caller is worker 0).
/// Workers claim `grain` consecutive indices at a time from one shared counter, so a batch of
/// cheap items (queries) touches the shared atomic once per slice, not once per item, while
/// slices stay small enough to balance load when some threads are descheduled.
/// The first exception thrown by any worker stops the loop and is rethrown here.
/// A worker thread that cannot be started (std::system_error from std::thread: a ulimit, an
/// address-space limit, a container's pids limit) is not fatal: the loop runs on the threads
/// that did start, the caller included, so it always finishes (on one thread at worst).
template <class F>
void parallel_for(std::size_t begin, std::size_t end, std::size_t nthreads, F&& f, std::size_t grain = 1) {
  if (end <= begin) return;
  nthreads = std::max<std::size_t>(1, std::min(nthreads, end - begin));
  if (nthreads == 1) {
    for (std::size_t i = begin; i < end; ++i) f(i, std::size_t{0});
    return;
  }
  grain = std::max<std::size_t>(grain, 1);
  // Own cache line: the counter is the only shared word the workers write.
  struct alignas(64) Counter {
    std::atomic<std::size_t> v;
  } next{{begin}};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&](std::size_t w) {
    try {
      for (;;) {
        const std::size_t lo = next.v.fetch_add(grain, std::memory_order_relaxed);
        if (lo >= end) break;
        const std::size_t hi = std::min(end, lo + grain);
        for (std::size_t i = lo; i < hi; ++i) f(i, w);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(error_mu);
      if (!error) error = std::current_exception();
      next.v.store(end, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> threads;
  try {
    threads.reserve(nthreads - 1);
    for (std::size_t w = 1; w < nthreads; ++w) threads.emplace_back(work, w);
  } catch (const std::system_error&) {
    // fewer workers: the shared counter hands their items to the threads already running
  } catch (const std::bad_alloc&) {
  }
  work(0);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace chnsw
