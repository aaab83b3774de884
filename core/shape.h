#pragma once
// The extents of a row-major tensor. A 0-d shape ([]) holds one element.

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace minitrain {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::vector<int64_t> dims);

  int64_t ndim() const noexcept { return static_cast<int64_t>(dims_.size()); }
  int64_t numel() const noexcept;
  int64_t operator[](int64_t i) const;  ///< negative i counts from the end, as in Python
  const std::vector<int64_t>& dims() const noexcept { return dims_; }
  std::string str() const;  ///< "[32, 7]"

  bool operator==(const Shape& o) const noexcept { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const noexcept { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

/// "[32, 7]" for extents that need not form a valid Shape (negative, or too many elements): what
/// a reader's error message quotes from a bad file.
std::string dims_str(const std::vector<int64_t>& dims);

}  // namespace minitrain
