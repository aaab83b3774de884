#pragma once
// safetensors (https://github.com/huggingface/safetensors): the format of weights and checkpoints,
// loadable by PyTorch's safetensors.torch.load_file. An 8-byte little-endian header length N, N
// bytes of JSON {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the data.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace minitrain {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< in the file's data order
  std::map<std::string, std::string> metadata;          ///< "__metadata__", e.g. {"format": "pt"}

  /// The tensor called `name`; throws ValueError listing the names there are.
  const Tensor& at(const std::string& name) const;
};

/// Reads every tensor onto `device`. F32 and F64 keep their type; F16 and BF16 (what PyTorch
/// users often save) are widened to float32 exactly. Throws IoError for a missing or malformed
/// file, naming the file, the tensor and the offending values.
SafetensorsFile read_safetensors(const std::string& path, Device device = Device::cpu());

/// Writes `tensors` (any devices) in the order given, with `metadata` plus "format": "pt" in
/// "__metadata__". Atomic: a failed write leaves `path` as it was. Throws ValueError for
/// duplicate, empty or reserved names, undefined tensors, or a "format" other than "pt";
/// IoError when the file cannot be written.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace minitrain
