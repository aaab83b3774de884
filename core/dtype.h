#pragma once
// Element types. float32 is the training type (and the master weights' under mixed precision);
// float64 exists for finite-difference gradient checks; bfloat16 and float16 are the storage types
// of mixed-precision activations and of --save-dtype files (core/half.h): the ops that take them
// say so, every other op refuses them with a DTypeError.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "core/half.h"

namespace minitrain {

enum class DType : uint8_t { Float32, Float64, BFloat16, Float16 };

std::size_t dtype_size(DType t) noexcept;
const char* dtype_name(DType t) noexcept;            ///< "float32", as torch prints it
const char* safetensors_dtype(DType t) noexcept;     ///< "F32"
DType dtype_from_safetensors(const std::string& s);  ///< throws DTypeError for unsupported names
bool is_half(DType t) noexcept;                      ///< bfloat16 or float16
/// "fp32"/"float32", "bf16"/"bfloat16", "fp16"/"float16"/"half" (as --precision and --save-dtype
/// spell them); ValueError naming `what` and the accepted names otherwise.
DType parse_precision(const std::string& name, const char* what = "precision");
const char* precision_name(DType t) noexcept;  ///< "fp32", "bf16", "fp16" ("fp64")
std::ostream& operator<<(std::ostream& os, DType t);

template <typename T>
struct dtype_of;  // maps a C++ element type to its DType
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::Float16;
};

}  // namespace minitrain
