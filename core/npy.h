#pragma once
// NumPy .npy arrays (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
// the format of --data X.npy and of predict's output. float32 and float64 only; files are
// checked field by field so a bad file fails with a message naming the file and the field.

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace minitrain {

/// What read_npy does with an integer or bool array.
enum class NpyIntegers {
  Refuse,     ///< an IoError saying how to convert it (features must be floats)
  AsFloat64,  ///< read as float64, exactly (class labels); a value past 2^53 is an IoError
};

/// Reads a float32/float64 array (format 1.0, 2.0 or 3.0; little- or big-endian; C order) onto
/// `device`. Throws IoError for a missing, malformed or unsupported file (an integer array unless
/// `integers` says otherwise, a Fortran-order one, ...) with advice on how to convert it.
Tensor read_npy(const std::string& path, Device device = Device::cpu(),
                NpyIntegers integers = NpyIntegers::Refuse);

/// Where a float32/float64 .npy keeps its data, found with every check of read_npy but without
/// reading the data: for reading rows on demand (data/npy_file_dataset.h).
struct NpyLayout {
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t data_offset = 0;  ///< the first data byte; C order from there
  bool swap_bytes = false;   ///< the file's byte order is not the host's
};
NpyLayout read_npy_layout(const std::string& path);

/// Writes `t` (any device) as NumPy itself would: format 1.0 (2.0 when the header needs it),
/// little-endian, C order, data aligned to 64 bytes. Atomic: a failed write leaves `path` as it
/// was. Throws IoError, or ValueError for an undefined tensor.
void write_npy(const std::string& path, const Tensor& t);

/// Writes int64 values ('<i8' as NumPy's np.int64) of `shape`, C order, as write_npy does: class
/// indices, which torch.argmax gives as int64 (float32 holds integers exactly only to 2^24).
/// ShapeError when the count of values is not the shape's.
void write_npy_int64(const std::string& path, const std::vector<int64_t>& values,
                     const Shape& shape);

}  // namespace minitrain
