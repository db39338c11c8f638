// C++-only stress test of the header library (no Python): parallel inserts while other threads
// search, then a save/load round trip. Build it under ThreadSanitizer / AddressSanitizer with
//   cmake -S native -B build-tsan -DCHNSW_BUILD_TESTS=ON -DCMAKE_CXX_FLAGS=-fsanitize=thread
//   cmake --build build-tsan --target chnsw_stress && build-tsan/chnsw_stress
#include <atomic>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "chnsw/chnsw.h"

int main() {
  const std::size_t dim = 24, n0 = 4000, n1 = 300;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> a(n0 * dim), b(n1 * dim), q(64 * dim);
  for (auto& x : a) x = nd(rng);
  for (auto& x : b) x = nd(rng);
  for (auto& x : q) x = nd(rng);

  chnsw::Index index(dim, chnsw::Metric::Cosine, 8, 48);
  index.add_layer(a.data(), 1000, nullptr, 2);
  std::vector<int64_t> up_ids(n1);
  for (std::size_t i = 0; i < n1; ++i) up_ids[i] = static_cast<int64_t>(100000 + i);
  index.add_layer(b.data(), 100, up_ids.data(), 2);

  std::atomic<bool> stop{false};
  std::atomic<long> searches{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      std::vector<int64_t> ids(64 * 10), ids1(64 * 5);
      std::vector<float> d(64 * 10), d1(64 * 5);
      while (!stop.load()) {
        index.search(q.data(), 64, 10, 0, 0, ids.data(), d.data(), 1 + t % 2);
        index.search_all_layers(q.data(), 64, {10, 5}, {}, true, {ids.data(), ids1.data()}, {d.data(), d1.data()}, 1);
        for (int64_t id : ids)
          if (id < 0 || id >= static_cast<int64_t>(n0)) std::abort();
        ++searches;
      }
    });
  }
  std::vector<int64_t> ids0(n0);
  for (std::size_t i = 0; i < n0; ++i) ids0[i] = static_cast<int64_t>(i);
  for (std::size_t off = 1000; off < n0; off += 600) {
    const std::size_t m = std::min<std::size_t>(600, n0 - off);
    index.add(a.data() + off * dim, m, 0, ids0.data() + off, 2);
  }
  index.add(b.data() + 100 * dim, n1 - 100, 1, up_ids.data() + 100, 2);
  for (int64_t i = 0; i < 200; i += 7) index.mark_deleted(i);
  stop = true;
  for (auto& t : readers) t.join();

  if (index.size() != n0 + n1) return 1;
  const std::string bytes = index.to_bytes();
  auto loaded = chnsw::Index::from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (loaded->to_bytes() != bytes) return 2;
  // every live layer-0 node finds itself
  std::size_t self_hits = 0, live = 0;
  std::vector<int64_t> ids(1);
  std::vector<float> d(1);
  for (std::size_t i = 0; i < n0; ++i) {
    if (loaded->is_deleted(static_cast<int64_t>(i))) continue;
    ++live;
    loaded->search(a.data() + i * dim, 1, 1, 0, 64, ids.data(), d.data(), 1);
    self_hits += ids[0] == static_cast<int64_t>(i);
  }
  std::printf("searches=%ld self_hits=%zu/%zu simd=%s\n", searches.load(), self_hits, live,
              chnsw::simd_level_name(chnsw::active_simd_level()));
  return self_hits * 100 >= live * 99 ? 0 : 3;
}
