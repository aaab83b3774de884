// Multi-tensor clipping: entry points and the CPU implementation. The CPU norm runs every
// (tensor, chunk) piece of the list in one fork/join, then folds each tensor's chunks in order
// exactly as reduce_cpu does (Note [the per-tensor norm's bits], multi_tensor_norm.h).

#include "kernels/multi_tensor_norm.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "core/buffer_slot.h"
#include "core/parallel_for.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/reduce.h"

namespace minitrain {

namespace {

// Every tensor defined, contiguous in the sense the kernels need (a whole storage range), on
// `device`, of float32 or float64. Errors name the index.
void check_list(const char* op, const std::vector<Tensor>& xs, const Device& device) {
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const std::string name = "xs[" + std::to_string(k) + "]";
    check_compatible(op, {{name.c_str(), xs[k]}});
    MT_CHECK_AS(DeviceError, xs[k].device() == device, op, ": ", name, " is on ", xs[k].device(),
                " but the list's total is on ", device, "; every tensor must be on one device");
    dispatch_float(xs[k].dtype(), [](auto) {});  // DTypeError for the 16-bit storage types
  }
}

}  // namespace

// ---- CPU ----

void squared_norm_multi_cpu(double* total, const NormList& list) {
  // Pieces: (tensor, chunk), tensor by tensor; piece_begin[k] is tensor k's first.
  const std::size_t count = list.sizes.size();
  std::vector<int64_t> piece_begin(count + 1, 0);
  for (std::size_t k = 0; k < count; ++k) {
    const int64_t chunks = (list.sizes[k] + kReducePartialChunk - 1) / kReducePartialChunk;
    piece_begin[k + 1] = piece_begin[k] + std::max<int64_t>(chunks, 1);  // an empty tensor: 1
  }
  std::vector<double> pieces(static_cast<std::size_t>(piece_begin[count]));
  parallel_for(piece_begin[count], 1, [&](int64_t begin, int64_t end) {
    std::size_t k = static_cast<std::size_t>(
        std::upper_bound(piece_begin.begin(), piece_begin.end(), begin) - piece_begin.begin() - 1);
    for (int64_t p = begin; p < end; ++p) {
      while (p >= piece_begin[k + 1]) ++k;
      const int64_t start = (p - piece_begin[k]) * kReducePartialChunk;
      const int64_t len = std::min(kReducePartialChunk, list.sizes[k] - start);
      pieces[static_cast<std::size_t>(p)] =
          list.is_double[k]
              ? squared_norm_chunk_cpu(static_cast<const double*>(list.ptrs[k]) + start, len)
              : squared_norm_chunk_cpu(static_cast<const float*>(list.ptrs[k]) + start, len);
    }
  });
  double acc_total = 0.0;
  for (std::size_t k = 0; k < count; ++k) {
    // reduce_cpu: one chunk is its own result, several are 0.0 + each in order.
    const int64_t first = piece_begin[k], n_pieces = piece_begin[k + 1] - first;
    double s = pieces[static_cast<std::size_t>(first)];
    if (n_pieces > 1) {
      s = 0.0;
      for (int64_t p = first; p < first + n_pieces; ++p)
        s = s + pieces[static_cast<std::size_t>(p)];
    }
    // squared_norm returns the tensor's type; the per-tensor path widened it and added.
    const double v = list.is_double[k] ? s : static_cast<double>(static_cast<float>(s));
    acc_total = k == 0 ? v : acc_total + v;
  }
  *total = acc_total;
}

template <typename T>
void clip_scale_multi_cpu(const std::vector<T*>& xs, const std::vector<int64_t>& sizes,
                          const double* sum_sq, double max_norm) {
  const double coef = clip_coefficient(*sum_sq, max_norm);
  if (coef >= 1.0) return;
  const T alpha = static_cast<T>(coef);
  // Elementwise: any split gives the same bits. Pieces of kReducePartialChunk, tensor by tensor.
  std::vector<std::pair<std::size_t, int64_t>> pieces;
  for (std::size_t k = 0; k < xs.size(); ++k)
    for (int64_t start = 0; start < sizes[k]; start += kReducePartialChunk)
      pieces.emplace_back(k, start);
  parallel_for(static_cast<int64_t>(pieces.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const auto [k, start] = pieces[static_cast<std::size_t>(p)];
      T* x = xs[k] + start;
      const int64_t len = std::min(kReducePartialChunk, sizes[k] - start);
      for (int64_t i = 0; i < len; ++i) x[i] = alpha * x[i];
    }
  });
}
template void clip_scale_multi_cpu<float>(const std::vector<float*>&, const std::vector<int64_t>&,
                                          const double*, double);
template void clip_scale_multi_cpu<double>(const std::vector<double*>&, const std::vector<int64_t>&,
                                           const double*, double);

// ---- entry points ----

namespace {

// `partials_slot` null: new partials per call (freed on return while the kernels may still run:
// the caching allocator hands the block only to later work on this stream).
void squared_norm_multi_into(Tensor& total, const std::vector<Tensor>& xs,
                             BufferSlot* partials_slot) {
  constexpr const char* kOp = "squared_norm_multi";
  check_compatible(kOp, {{"total", total}});
  check_ndim(kOp, {"total", total}, 0);
  MT_CHECK_AS(DTypeError, total.dtype() == DType::Float64, kOp, ": total must be float64, got ",
              total.dtype());
  check_list(kOp, xs, total.device());
  NormList list;
  for (const Tensor& x : xs) {
    list.ptrs.push_back(x.raw_data());
    list.sizes.push_back(x.numel());
    list.is_double.push_back(x.dtype() == DType::Float64);
  }
  double* out = total.data<double>();
  on_device(
      kOp, total.device(), [&] { squared_norm_multi_cpu(out, list); },
      [&](auto stream) {
        const Shape shape{squared_norm_multi_cuda_partials(list)};
        Tensor partials = partials_slot != nullptr
                              ? partials_slot->get(shape, DType::Float64, total.device())
                              : Tensor::empty(shape, DType::Float64, total.device());
        squared_norm_multi_cuda(out, list, partials.data<double>(), stream);
      });
}

}  // namespace

void squared_norm_multi(Tensor& total, const std::vector<Tensor>& xs) {
  squared_norm_multi_into(total, xs, nullptr);
}

void squared_norm_multi(Tensor& total, const std::vector<Tensor>& xs, BufferSlot& partials) {
  squared_norm_multi_into(total, xs, &partials);
}

void clip_scale_multi_(std::vector<Tensor>& xs, const Tensor& sum_sq, double max_norm) {
  constexpr const char* kOp = "clip_scale_multi_";
  check_compatible(kOp, {{"sum_sq", sum_sq}});
  check_ndim(kOp, {"sum_sq", sum_sq}, 0);
  MT_CHECK_AS(DTypeError, sum_sq.dtype() == DType::Float64, kOp, ": sum_sq must be float64, got ",
              sum_sq.dtype());
  check_list(kOp, xs, sum_sq.device());
  const double* s = sum_sq.data<double>();
  // One pass per element type, each over that type's tensors (the order does not matter: each
  // element is scaled on its own).
  for (DType dtype : {DType::Float32, DType::Float64}) {
    dispatch_float(dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T*> ptrs;
      std::vector<int64_t> sizes;
      for (Tensor& x : xs)
        if (x.dtype() == dtype && x.numel() > 0) {
          ptrs.push_back(x.data<T>());
          sizes.push_back(x.numel());
        }
      if (ptrs.empty()) return;
      on_device(
          kOp, sum_sq.device(), [&] { clip_scale_multi_cpu(ptrs, sizes, s, max_norm); },
          [&](auto stream) { clip_scale_multi_cuda(ptrs, sizes, s, max_norm, stream); });
    });
  }
}

}  // namespace minitrain
