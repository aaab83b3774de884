#pragma once
// Operand checks shared by every op's entry point. Each names the op, the operands and their
// shapes, devices and types, so an error says what went wrong without a debugger:
//   "add: operands are on different devices: a on cpu [3], out on cuda:0 [3]"

#include <initializer_list>

#include "core/tensor.h"

namespace minitrain {

struct Operand {
  const char* name;
  const Tensor& tensor;
};

/// Every operand defined, on one device (which must be available), of one dtype.
/// Throws Error (undefined), DeviceError or DTypeError.
void check_compatible(const char* op, std::initializer_list<Operand> operands);
/// Every operand of the same shape; throws ShapeError naming all shapes.
void check_same_shape(const char* op, std::initializer_list<Operand> operands);
/// `t` has exactly `ndim` dimensions; throws ShapeError.
void check_ndim(const char* op, const Operand& t, int64_t ndim);

}  // namespace minitrain
