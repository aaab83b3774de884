#include "core/dtype.h"

#include "core/error.h"

namespace minitrain {

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
  }
  return "unknown";
}

const char* safetensors_dtype(DType t) noexcept {
  switch (t) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
  }
  return "unknown";
}

DType dtype_from_safetensors(const std::string& s) {
  if (s == "F32") return DType::Float32;
  if (s == "F64") return DType::Float64;
  MT_THROW(DTypeError, "unsupported safetensors dtype '", s,
           "' (minitrain reads F32 and F64; convert with tensor.float() before saving)");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace minitrain
