// MLPs from the command line's "mlp:IN,H1,...,OUT".

#include "nn/mlp.h"

#include <cstdint>
#include <limits>

#include "core/strings.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"

namespace minitrain {

namespace {
constexpr const char* kSpecHelp =
    "expected mlp:IN,H1,...,OUT with at least two positive sizes, "
    "e.g. mlp:3,16,2";
constexpr const char* kPrefix = "mlp:";
}  // namespace

std::vector<int64_t> parse_mlp_spec(const std::string& spec) {
  const std::string prefix = kPrefix;
  if (!starts_with(spec, prefix))
    MT_THROW(ValueError, "invalid model '", spec, "': unknown kind (", kSpecHelp, ")");
  std::vector<int64_t> sizes;
  for (const std::string& item : split(spec.substr(prefix.size()), ',')) {
    if (item.empty())
      MT_THROW(ValueError, "invalid model '", spec, "': empty size (", kSpecHelp, ")");
    int64_t v = 0;
    for (char c : item) {
      if (c < '0' || c > '9')
        MT_THROW(ValueError, "invalid model '", spec, "': size '", item,
                 "' is not a positive integer (", kSpecHelp, ")");
      // A width is a GEMM dimension, which cuBLAS takes as an int.
      v = v * 10 + (c - '0');
      if (v > std::numeric_limits<int32_t>::max())
        MT_THROW(ValueError, "invalid model '", excerpt(spec), "': size '", excerpt(item, 24),
                 "' is too large (at most ", std::numeric_limits<int32_t>::max(), ")");
    }
    if (v == 0)
      MT_THROW(ValueError, "invalid model '", spec, "': size '", item,
               "' is not a positive integer (", kSpecHelp, ")");
    sizes.push_back(v);
  }
  if (sizes.size() < 2)
    MT_THROW(ValueError, "invalid model '", spec, "': needs an input and an output size (",
             kSpecHelp, ")");
  return sizes;
}

std::unique_ptr<Sequential> make_mlp(const std::vector<int64_t>& sizes, Activation activation,
                                     Generator& gen, Device device, DType dtype) {
  MT_CHECK_AS(ValueError, sizes.size() >= 2,
              "make_mlp: needs at least two sizes (input and "
              "output), got ",
              sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i)
    MT_CHECK_AS(ValueError, sizes[i] > 0, "make_mlp: size ", i, " is ", sizes[i],
                "; every size must be positive");
  auto model = std::make_unique<Sequential>();
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    model->add(std::make_unique<Linear>(sizes[i], sizes[i + 1], gen, /*bias=*/true, device, dtype));
    if (i + 2 < sizes.size()) model->add(std::make_unique<ActivationLayer>(activation));
  }
  return model;
}

}  // namespace minitrain
