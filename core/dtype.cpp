#include "core/dtype.h"

#include "core/error.h"

namespace minitrain {

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::BFloat16:
    case DType::Float16:
      return 2;
  }
  return 0;
}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float16:
      return "float16";
  }
  return "unknown";
}

const char* safetensors_dtype(DType t) noexcept {
  switch (t) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::BFloat16:
      return "BF16";
    case DType::Float16:
      return "F16";
  }
  return "unknown";
}

DType dtype_from_safetensors(const std::string& s) {
  if (s == "F32") return DType::Float32;
  if (s == "F64") return DType::Float64;
  if (s == "BF16") return DType::BFloat16;
  if (s == "F16") return DType::Float16;
  MT_THROW(DTypeError, "unsupported safetensors dtype '", s,
           "' (minitrain reads F32, F64, BF16 and F16; convert with tensor.float() before saving)");
}

bool is_half(DType t) noexcept { return t == DType::BFloat16 || t == DType::Float16; }

DType parse_precision(const std::string& name, const char* what) {
  if (name == "fp32" || name == "float32") return DType::Float32;
  if (name == "bf16" || name == "bfloat16") return DType::BFloat16;
  if (name == "fp16" || name == "float16" || name == "half") return DType::Float16;
  MT_THROW(ValueError, "unknown ", what, " '", name, "' (use fp32, bf16 or fp16)");
}

const char* precision_name(DType t) noexcept {
  switch (t) {
    case DType::Float32:
      return "fp32";
    case DType::Float64:
      return "fp64";
    case DType::BFloat16:
      return "bf16";
    case DType::Float16:
      return "fp16";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace minitrain
