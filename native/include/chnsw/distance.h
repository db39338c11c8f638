// Distance kernels for C-HNSW with run-time SIMD dispatch.
//
// Every vector the index touches is stored zero-padded to a multiple of kPadFloats (16) floats
// and 64-byte aligned, so the kernels never need a tail loop on the hot path (the tails below are
// only for callers that pass other lengths).
//
// Dispatch: the kernels for AVX-512F, AVX2+FMA (x86-64, GCC/Clang function attributes, no
// -march flag needed) and NEON (aarch64) are compiled into the same translation unit; the best
// level the CPU and OS support is picked at first use with __builtin_cpu_supports, and callers may
// lower it (set_simd_level) to force e.g. the scalar fallback.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define CHNSW_HAVE_X86_DISPATCH 1
#include <immintrin.h>
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define CHNSW_HAVE_NEON 1
#include <arm_neon.h>
#endif

namespace chnsw {

/// Vectors are padded to a multiple of this many floats (64 bytes).
constexpr std::size_t kPadFloats = 16;

inline std::size_t padded_dim(std::size_t dim) {
  return (dim + kPadFloats - 1) / kPadFloats * kPadFloats;
}

enum class SimdLevel : int { Scalar = 0, Neon = 1, AVX2 = 2, AVX512 = 3 };

inline const char* simd_level_name(SimdLevel l) {
  switch (l) {
    case SimdLevel::Scalar: return "scalar";
    case SimdLevel::Neon: return "neon";
    case SimdLevel::AVX2: return "avx2";
    case SimdLevel::AVX512: return "avx512";
  }
  return "scalar";
}

inline bool parse_simd_level(const std::string& s, SimdLevel& out) {
  if (s == "scalar") { out = SimdLevel::Scalar; return true; }
  if (s == "neon") { out = SimdLevel::Neon; return true; }
  if (s == "avx2") { out = SimdLevel::AVX2; return true; }
  if (s == "avx512") { out = SimdLevel::AVX512; return true; }
  return false;
}

/// A distance kernel: f(a, b, n) with n floats each.
using DistFn = float (*)(const float*, const float*, std::size_t);

namespace kernels {

// ---------------------------------------------------------------- scalar
inline float dot_scalar(const float* a, const float* b, std::size_t n) {
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

inline float l2sq_scalar(const float* a, const float* b, std::size_t n) {
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float d0 = a[i] - b[i], d1 = a[i + 1] - b[i + 1];
    const float d2 = a[i + 2] - b[i + 2], d3 = a[i + 3] - b[i + 3];
    s0 += d0 * d0;
    s1 += d1 * d1;
    s2 += d2 * d2;
    s3 += d3 * d3;
  }
  for (; i < n; ++i) {
    const float d = a[i] - b[i];
    s0 += d * d;
  }
  return (s0 + s1) + (s2 + s3);
}

inline float ipdist_scalar(const float* a, const float* b, std::size_t n) {
  return 1.0f - dot_scalar(a, b, n);
}

#if defined(CHNSW_HAVE_X86_DISPATCH)
// ---------------------------------------------------------------- AVX2 + FMA
__attribute__((target("avx2,fma"))) inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  __m128 s = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, s);
  s = _mm_add_ss(s, sh);
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) inline float dot_avx2(const float* a, const float* b,
                                                          std::size_t n) {
  // Four independent accumulators: the FMA latency (4-5 cycles) is hidden, so an in-cache
  // 384-d distance runs at load throughput rather than at one FMA chain's latency.
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float r = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

__attribute__((target("avx2,fma"))) inline float l2sq_avx2(const float* a, const float* b,
                                                           std::size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
    const __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16));
    const __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24));
    s0 = _mm256_fmadd_ps(d0, d0, s0);
    s1 = _mm256_fmadd_ps(d1, d1, s1);
    s2 = _mm256_fmadd_ps(d2, d2, s2);
    s3 = _mm256_fmadd_ps(d3, d3, s3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    s0 = _mm256_fmadd_ps(d0, d0, s0);
  }
  s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  s1 = _mm256_setzero_ps();
  float r = hsum256(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) {
    const float d = a[i] - b[i];
    r += d * d;
  }
  return r;
}

__attribute__((target("avx2,fma"))) inline float ipdist_avx2(const float* a, const float* b,
                                                             std::size_t n) {
  return 1.0f - dot_avx2(a, b, n);
}

// ---------------------------------------------------------------- AVX-512F
__attribute__((target("avx512f"))) inline float dot_avx512(const float* a, const float* b,
                                                           std::size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  float r = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

__attribute__((target("avx512f"))) inline float l2sq_avx512(const float* a, const float* b,
                                                            std::size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16));
    const __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32));
    const __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48));
    s0 = _mm512_fmadd_ps(d0, d0, s0);
    s1 = _mm512_fmadd_ps(d1, d1, s1);
    s2 = _mm512_fmadd_ps(d2, d2, s2);
    s3 = _mm512_fmadd_ps(d3, d3, s3);
  }
  s0 = _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3));
  s1 = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    s0 = _mm512_fmadd_ps(d0, d0, s0);
  }
  float r = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  for (; i < n; ++i) {
    const float d = a[i] - b[i];
    r += d * d;
  }
  return r;
}

__attribute__((target("avx512f"))) inline float ipdist_avx512(const float* a, const float* b,
                                                              std::size_t n) {
  return 1.0f - dot_avx512(a, b, n);
}
#endif  // CHNSW_HAVE_X86_DISPATCH

#if defined(CHNSW_HAVE_NEON)
// ---------------------------------------------------------------- NEON (aarch64)
inline float dot_neon(const float* a, const float* b, std::size_t n) {
  float32x4_t s0 = vdupq_n_f32(0.f), s1 = vdupq_n_f32(0.f);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
  }
  float r = vaddvq_f32(vaddq_f32(s0, s1));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

inline float l2sq_neon(const float* a, const float* b, std::size_t n) {
  float32x4_t s0 = vdupq_n_f32(0.f), s1 = vdupq_n_f32(0.f);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t d0 = vsubq_f32(vld1q_f32(a + i), vld1q_f32(b + i));
    const float32x4_t d1 = vsubq_f32(vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    s0 = vfmaq_f32(s0, d0, d0);
    s1 = vfmaq_f32(s1, d1, d1);
  }
  float r = vaddvq_f32(vaddq_f32(s0, s1));
  for (; i < n; ++i) {
    const float d = a[i] - b[i];
    r += d * d;
  }
  return r;
}

inline float ipdist_neon(const float* a, const float* b, std::size_t n) {
  return 1.0f - dot_neon(a, b, n);
}
#endif  // CHNSW_HAVE_NEON

}  // namespace kernels

/// The pair of distance kernels used by an index at one SIMD level.
struct Kernels {
  DistFn ip_dist;  ///< 1 - <a, b>
  DistFn l2_dist;  ///< ||a - b||^2
  SimdLevel level;
};

/// Best level this CPU (and OS) supports.
inline SimdLevel best_supported_simd() {
#if defined(CHNSW_HAVE_X86_DISPATCH)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return SimdLevel::AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::AVX2;
  return SimdLevel::Scalar;
#elif defined(CHNSW_HAVE_NEON)
  return SimdLevel::Neon;
#else
  return SimdLevel::Scalar;
#endif
}

inline bool simd_supported(SimdLevel l) {
  if (l == SimdLevel::Scalar) return true;
  const SimdLevel best = best_supported_simd();
#if defined(CHNSW_HAVE_X86_DISPATCH)
  if (l == SimdLevel::Neon) return false;
  return static_cast<int>(l) <= static_cast<int>(best);
#else
  return l == best;
#endif
}

inline Kernels kernels_for(SimdLevel l) {
  switch (l) {
#if defined(CHNSW_HAVE_X86_DISPATCH)
    case SimdLevel::AVX512:
      return {&kernels::ipdist_avx512, &kernels::l2sq_avx512, SimdLevel::AVX512};
    case SimdLevel::AVX2:
      return {&kernels::ipdist_avx2, &kernels::l2sq_avx2, SimdLevel::AVX2};
#endif
#if defined(CHNSW_HAVE_NEON)
    case SimdLevel::Neon:
      return {&kernels::ipdist_neon, &kernels::l2sq_neon, SimdLevel::Neon};
#endif
    default:
      return {&kernels::ipdist_scalar, &kernels::l2sq_scalar, SimdLevel::Scalar};
  }
}

namespace detail {
inline std::atomic<int>& simd_level_slot() {
  static std::atomic<int> slot{static_cast<int>(best_supported_simd())};
  return slot;
}
}  // namespace detail

/// Level currently used by every index (process-wide).
inline SimdLevel active_simd_level() {
  return static_cast<SimdLevel>(detail::simd_level_slot().load(std::memory_order_relaxed));
}

/// Kernels for the active level. Indexes read this at the start of every operation.
inline Kernels active_kernels() { return kernels_for(active_simd_level()); }

/// Select a level. An unsupported request falls back to the best supported level below it
/// (scalar at worst). Returns the level now in use.
inline SimdLevel set_simd_level(SimdLevel requested) {
  SimdLevel l = requested;
  if (!simd_supported(l)) {
    const SimdLevel best = best_supported_simd();
    l = static_cast<int>(best) < static_cast<int>(requested) ? best : SimdLevel::Scalar;
  }
  detail::simd_level_slot().store(static_cast<int>(l), std::memory_order_relaxed);
  return l;
}

}  // namespace chnsw
