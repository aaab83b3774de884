#include "kernels/check.h"

#include <sstream>

namespace minitrain {

namespace {
std::string describe(std::initializer_list<Operand> operands, bool with_device, bool with_dtype) {
  std::ostringstream os;
  bool first = true;
  for (const Operand& o : operands) {
    if (!first) os << ", ";
    first = false;
    os << o.name;
    if (with_device) os << " on " << o.tensor.device();
    if (with_dtype) os << " " << o.tensor.dtype();
    os << " " << o.tensor.shape();
  }
  return os.str();
}
}  // namespace

void check_compatible(const char* op, std::initializer_list<Operand> operands) {
  for (const Operand& o : operands)
    MT_CHECK(o.tensor.defined(), op, ": operand '", o.name, "' is an undefined tensor");
  const Operand& first = *operands.begin();
  for (const Operand& o : operands)
    MT_CHECK_AS(DeviceError, o.tensor.device() == first.tensor.device(), op,
                ": operands are on different devices: ", describe(operands, true, false),
                "; move them with .to(device) first");
  for (const Operand& o : operands)
    MT_CHECK_AS(DTypeError, o.tensor.dtype() == first.tensor.dtype(), op,
                ": operands have different dtypes: ", describe(operands, false, true));
  check_available(first.tensor.device());
}

void check_same_shape(const char* op, std::initializer_list<Operand> operands) {
  const Operand& first = *operands.begin();
  for (const Operand& o : operands)
    MT_CHECK_AS(ShapeError, o.tensor.shape() == first.tensor.shape(), op,
                ": shapes do not match: ", describe(operands, false, false));
}

void check_ndim(const char* op, const Operand& t, int64_t ndim) {
  MT_CHECK_AS(ShapeError, t.tensor.ndim() == ndim, op, ": ", t.name, " must have ", ndim,
              " dimension", ndim == 1 ? "" : "s", " but has shape ", t.tensor.shape());
}

}  // namespace minitrain
