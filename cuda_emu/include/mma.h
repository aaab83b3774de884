#pragma once
// WMMA (nvcuda::wmma) on the emulated GPU: a fragment is spread over the warp's 32 lanes, each
// holding num_elements values, and load/store/mma_sync are warp collectives: all 32 lanes must
// call them with the same arguments, and mma_sync computes the whole tile once every lane has
// arrived. TF32 inputs keep the top 19 bits of each float (the tensor core ignores the rest); BF16
// inputs are already bf16; products accumulate in float32. The lane layout is the emulator's own
// (row-major, lane l holding elements [l*E, (l+1)*E)): on a GPU it is opaque, and code that
// relies on a particular one is wrong on both.

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_emu/device_api.h"

namespace mtemu::detail {
enum class WmmaOp : int { Load, Store, Mma };
/// A warp collective over all 32 lanes for a WMMA call: checks that every lane passed the same
/// `check` value; the last lane to arrive runs `compute(lane_args)` with every lane's `arg`.
void wmma_collective(WmmaOp op, const void* check, void* arg,
                     void (*compute)(void* const* lane_args));
int lane_id();
}  // namespace mtemu::detail

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

namespace detail {
template <class Use, int M, int N, int K>
struct Dims;
template <int M, int N, int K>
struct Dims<matrix_a, M, N, K> {
  static constexpr int kRows = M, kCols = K;
};
template <int M, int N, int K>
struct Dims<matrix_b, M, N, K> {
  static constexpr int kRows = K, kCols = N;
};
template <int M, int N, int K>
struct Dims<accumulator, M, N, K> {
  static constexpr int kRows = M, kCols = N;
};
template <class T>
struct Storage {
  using type = T;
};
template <>
struct Storage<precision::tf32> {
  using type = float;
};
inline float to_float(float v) { return v; }
inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float tf32_truncate(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  u &= 0xffffe000u;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
 public:
  using Dims = detail::Dims<Use, M, N, K>;
  using storage_element_type = typename detail::Storage<T>::type;
  using element_type = T;
  using layout = Layout;
  static constexpr int kRows = Dims::kRows, kCols = Dims::kCols;
  static constexpr int num_elements = kRows * kCols / 32;
  storage_element_type x[num_elements];
};

/// tf32 rounding as cvt.rna.tf32.f32: to nearest, ties away from zero, low 13 bits cleared.
inline float __float_to_tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) {  // finite: round the magnitude; inf and NaN pass
    u += 0x1000u;
    u &= 0xffffe000u;
  }
  std::memcpy(&v, &u, sizeof v);
  return v;
}

template <class Use, int M, int N, int K, class T, class L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f,
                   typename fragment<Use, M, N, K, T, L>::storage_element_type v) {
  for (auto& e : f.x) e = v;
}

namespace detail {
template <class Frag, class Elem>
struct LoadStoreArgs {
  Frag* frag;
  Elem* ptr;
  unsigned ld;
  bool col_major;
};
inline bool is_col_major(row_major) { return false; }
inline bool is_col_major(col_major) { return true; }
// Element e of lane l is tile element l * E + e, row-major over the fragment's tile.
template <class Frag, class Elem, bool kStore>
void move_tile(void* const* lane_args) {
  constexpr int E = Frag::num_elements;
  for (int lane = 0; lane < 32; ++lane) {
    auto* a = static_cast<LoadStoreArgs<Frag, Elem>*>(lane_args[lane]);
    for (int e = 0; e < E; ++e) {
      const int idx = lane * E + e, r = idx / Frag::kCols, c = idx % Frag::kCols;
      const std::size_t off =
          a->col_major ? std::size_t(c) * a->ld + r : std::size_t(r) * a->ld + c;
      if constexpr (kStore)
        a->ptr[off] = a->frag->x[e];
      else
        a->frag->x[e] = a->ptr[off];
    }
  }
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class L, class Elem>
void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const Elem* p, unsigned ldm) {
  using Frag = fragment<Use, M, N, K, T, L>;
  detail::LoadStoreArgs<Frag, const Elem> args{&f, p, ldm, detail::is_col_major(L{})};
  const uintptr_t check = reinterpret_cast<uintptr_t>(p) ^ (uintptr_t(ldm) << 48);
  ::mtemu::detail::wmma_collective(::mtemu::detail::WmmaOp::Load,
                                   reinterpret_cast<const void*>(check), &args,
                                   &detail::move_tile<Frag, const Elem, false>);
}

template <int M, int N, int K, class T, class Elem>
void store_matrix_sync(Elem* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                       layout_t layout) {
  using Frag = fragment<accumulator, M, N, K, T, void>;
  detail::LoadStoreArgs<const Frag, Elem> args{&f, p, ldm, layout == mem_col_major};
  const uintptr_t check =
      reinterpret_cast<uintptr_t>(p) ^ (uintptr_t(ldm) << 48) ^ uintptr_t(layout);
  ::mtemu::detail::wmma_collective(::mtemu::detail::WmmaOp::Store,
                                   reinterpret_cast<const void*>(check), &args,
                                   &detail::move_tile<const Frag, Elem, true>);
}

namespace detail {
template <class D, class A, class B, class C>
struct MmaArgs {
  D* d;
  const A* a;
  const B* b;
  const C* c;
};
template <class T>
float input_value(T v, bool tf32) {
  const float f = to_float(v);
  return tf32 ? tf32_truncate(f) : f;
}
// Gathers the 32 lanes' fragments into whole tiles, multiplies, and scatters D back.
template <class D, class A, class B, class C, bool kTf32>
void mma_tile(void* const* lane_args) {
  constexpr int M = D::kRows, N = D::kCols, K = A::kCols;
  float a[M * K], b[K * N], c[M * N];
  for (int lane = 0; lane < 32; ++lane) {
    auto* args = static_cast<MmaArgs<D, A, B, C>*>(lane_args[lane]);
    for (int e = 0; e < A::num_elements; ++e)
      a[lane * A::num_elements + e] = input_value(args->a->x[e], kTf32);
    for (int e = 0; e < B::num_elements; ++e)
      b[lane * B::num_elements + e] = input_value(args->b->x[e], kTf32);
    for (int e = 0; e < C::num_elements; ++e) c[lane * C::num_elements + e] = args->c->x[e];
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = c[i * N + j];
      for (int q = 0; q < K; ++q) acc += a[i * K + q] * b[q * N + j];
      c[i * N + j] = acc;
    }
  for (int lane = 0; lane < 32; ++lane) {
    auto* args = static_cast<MmaArgs<D, A, B, C>*>(lane_args[lane]);
    for (int e = 0; e < D::num_elements; ++e) args->d->x[e] = c[lane * D::num_elements + e];
  }
}
}  // namespace detail

template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC>
void mma_sync(fragment<accumulator, M, N, K, TC, void>& d,
              const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b,
              const fragment<accumulator, M, N, K, TC, void>& c) {
  using D = fragment<accumulator, M, N, K, TC, void>;
  using A = fragment<matrix_a, M, N, K, TA, LA>;
  using B = fragment<matrix_b, M, N, K, TB, LB>;
  detail::MmaArgs<D, A, B, D> args{&d, &a, &b, &c};
  ::mtemu::detail::wmma_collective(
      ::mtemu::detail::WmmaOp::Mma, nullptr, &args,
      &detail::mma_tile<D, A, B, D, std::is_same<TA, precision::tf32>::value>);
}

}  // namespace nvcuda::wmma
