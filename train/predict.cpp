// `minitrain predict`: weights + model spec + X.npy -> Y.npy.

#include "train/predict.h"

#include <filesystem>

#include "core/error.h"
#include "core/npy.h"
#include "core/shape.h"
#include "kernels/activation.h"
#include "kernels/cast.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "train/flag_context.h"

namespace minitrain {

Tensor predict(Module& model, const Tensor& x, Device device, int64_t batch_size) {
  MT_CHECK_AS(ShapeError, x.ndim() == 2, "predict: input must be 2-D [rows, features], got ",
              x.shape());
  MT_CHECK_AS(ValueError, batch_size >= 1, "predict: batch_size must be >= 1, got ", batch_size);
  const bool was_training = model.is_training();
  model.eval();
  Tensor input = x.dtype() == DType::Float32 ? x : cast(x, DType::Float32);
  std::vector<Tensor> parts;
  int64_t out_dim = 0;
  for (int64_t row = 0; row < input.size(0); row += batch_size) {
    const int64_t n = std::min(batch_size, input.size(0) - row);
    Tensor y = model.forward(input.narrow(row, n).to(device)).to(Device::cpu());
    out_dim = y.size(1);
    parts.push_back(y);
  }
  model.train(was_training);
  if (parts.size() == 1) return parts.front();
  Tensor out = Tensor::empty(Shape{input.size(0), out_dim}, DType::Float32, Device::cpu());
  int64_t row = 0;
  for (const Tensor& p : parts) {
    out.narrow(row, p.size(0)).copy_(p);
    row += p.size(0);
  }
  return out;
}

int64_t run_predict(const PredictConfig& c) {
  MT_CHECK_AS(ValueError, !c.weights.empty(), "predict needs --weights W.safetensors");
  MT_CHECK_AS(ValueError, !c.model.empty(),
              "predict needs --model mlp:IN,...,OUT (the model the weights are for)");
  MT_CHECK_AS(ValueError, !c.input.empty(), "predict needs --input X.npy");
  MT_CHECK_AS(ValueError, !c.output.empty(), "predict needs --output Y.npy");
  const Device device = Device::parse(c.device);
  check_available(device);
  const std::vector<int64_t> sizes = parse_mlp_spec(c.model);
  Generator gen(0);  // every parameter is then overwritten by the weights file
  auto model = make_mlp(sizes, parse_activation(c.activation), gen, device);
  with_flag_context("--weights", [&] { load_weights(c.weights, *model); });

  const Tensor x = read_npy(c.input);
  if (x.ndim() != 2 || x.size(1) != sizes.front())
    MT_THROW(ShapeError, "--input ", c.input, " has shape ", x.shape(), " but --model ", c.model,
             " expects [rows, ", sizes.front(), "]",
             x.ndim() == 1 ? " (a 1-D array: reshape it to [rows, features])" : "");
  const std::filesystem::path dir = std::filesystem::path(c.output).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    MT_THROW(IoError, "--output ", c.output, ": directory '", dir.string(), "' does not exist");

  const Tensor y = predict(*model, x, device, c.batch_size);
  write_npy(c.output, y);
  return x.size(0);
}

}  // namespace minitrain
