#include "core/shape.h"

#include "core/error.h"

namespace minitrain {

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

namespace {
// Every extent is non-negative and their product fits in int64, so numel() can never wrap.
void check_dims(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    MT_CHECK_AS(ShapeError, dims[i] >= 0, "shape: dimension ", i, " has negative extent ", dims[i]);
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n))
      MT_THROW(ValueError, "shape ", dims_str(dims), " has more elements than fit in 64 bits");
}
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) : dims_(dims) { check_dims(dims_); }
Shape::Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) { check_dims(dims_); }

int64_t Shape::numel() const noexcept {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t Shape::operator[](int64_t i) const {
  const int64_t n = ndim();
  const int64_t j = i < 0 ? i + n : i;
  MT_CHECK_AS(ShapeError, j >= 0 && j < n, "dimension ", i, " is out of range for shape ", str());
  return dims_[static_cast<size_t>(j)];
}

std::string Shape::str() const { return dims_str(dims_); }

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

}  // namespace minitrain
