// Printing tensors the way torch does: nested brackets, 4 decimals, and for large tensors the
// first and last three entries of each dimension around "...".

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/tensor.h"

namespace minitrain {

namespace {
constexpr int64_t kSummariseAbove = 1000;  // torch's default threshold
constexpr int64_t kEdgeItems = 3;

std::string format_value(double v, bool scientific) {
  char buf[32];
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::snprintf(buf, sizeof buf, scientific ? "%.4e" : "%.4f", v);
  return buf;
}

void print_dim(std::ostringstream& os, const std::vector<double>& values, const Shape& shape,
               int64_t dim, int64_t offset, bool summarise, bool scientific, int indent) {
  const int64_t n = shape[dim];
  int64_t stride = 1;
  for (int64_t d = dim + 1; d < shape.ndim(); ++d) stride *= shape[d];
  os << '[';
  const bool cut = summarise && n > 2 * kEdgeItems;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdgeItems) {
      os << (dim + 1 == shape.ndim() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - kEdgeItems;
    }
    if (dim + 1 == shape.ndim()) {
      os << format_value(values[static_cast<size_t>(offset + i)], scientific);
    } else {
      print_dim(os, values, shape, dim + 1, offset + i * stride, summarise, scientific, indent + 1);
    }
    if (i + 1 < n) os << (dim + 1 == shape.ndim() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << ']';
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const Tensor host = to(Device::cpu());
  const std::vector<double> values = host.to_double_vector();
  double largest = 0;
  for (double v : values)
    if (std::isfinite(v)) largest = std::max(largest, std::fabs(v));
  const bool scientific = largest >= 1e8 || (largest > 0 && largest < 1e-4);

  std::ostringstream os;
  os << "tensor(";
  if (shape().ndim() == 0)
    os << format_value(values[0], scientific);
  else
    print_dim(os, values, shape(), 0, 0, numel() > kSummariseAbove, scientific, 7);
  if (numel() == 0) os << ", size=" << shape();
  if (device().is_cuda()) os << ", device='" << device() << "'";
  if (dtype() != DType::Float32) os << ", dtype=" << dtype();
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace minitrain
