#pragma once
// NumPy .npy arrays (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
// the format of --data X.npy and of predict's output. float32 and float64 only; files are
// checked field by field so a bad file fails with a message naming the file and the field.

#include <string>

#include "core/device.h"
#include "core/tensor.h"

namespace minitrain {

/// Reads a float32/float64 array (format 1.0, 2.0 or 3.0; little- or big-endian; C order) onto
/// `device`. Throws IoError for a missing, malformed or unsupported file (an integer array, a
/// Fortran-order one, ...) with advice on how to convert it.
Tensor read_npy(const std::string& path, Device device = Device::cpu());

/// Writes `t` (any device) as NumPy itself would: format 1.0 (2.0 when the header needs it),
/// little-endian, C order, data aligned to 64 bytes. Atomic: a failed write leaves `path` as it
/// was. Throws IoError, or ValueError for an undefined tensor.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace minitrain
