#pragma once
// Element types. float32 is the training type; float64 exists for finite-difference gradient
// checks. The enum leaves room for float16/bfloat16 (storage and file formats) later.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace minitrain {

enum class DType : uint8_t { Float32, Float64 };

std::size_t dtype_size(DType t) noexcept;
const char* dtype_name(DType t) noexcept;            ///< "float32", as torch prints it
const char* safetensors_dtype(DType t) noexcept;     ///< "F32"
DType dtype_from_safetensors(const std::string& s);  ///< throws DTypeError for unsupported names
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

}  // namespace minitrain
