// MSE loss forward + backward (kernels/loss/mse_loss.h). Mean: the fused pass reads pred and target
// and writes the gradient (and one loss value); unfused, forward and backward each read both.
// None: one pass writes the per-element loss and the gradient; the scalar kernel against its
// 16-byte-pack variant (mse_loss_none_fused_vec4_cuda). The reference is the CPU twin,
// mse_loss_forward_backward_cpu.

#include "kernels/dispatch.h"
#include "kernels/loss/mse_loss.h"
#include "kernels/op_bench/op_registry.h"

namespace minitrain::opbench {
namespace {

constexpr double kF = 4.0;

// in: pred, target, and (mean) a 0-d 1 for the unfused backward's grad_out.
OpFamily mean_op() {
  OpFamily f;
  f.name = "mse_forward_backward";
  f.what = "MSE (mean) loss and gradient of n predictions: two reads, one write";
  f.make = [](int64_t n, Device d) {
    Tensor one = Tensor::from_vector(std::vector<float>{1.0f}, Shape{}, d);
    return OpTensors{{uniform({n}, d, 1), uniform({n}, d, 2), one},
                     {Tensor::empty({}, DType::Float32, d), Tensor::empty({n}, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    const int64_t n = t.in[0].numel();
    mse_loss_forward_backward_cpu<float>(t.out[0].data<float>(), t.out[1].data<float>(),
                                         t.in[0].data<float>(), t.in[1].data<float>(), n, double(n),
                                         static_cast<float>(2.0 / double(n)), false);
  };
  f.bytes = [](int64_t n) { return 3 * kF * double(n); };
  f.tolerance = 1e-6;  // the loss: the GPU's blocks sum in another order
  f.variants.push_back(
      {"fused",
       "one pass: squares summed in double, the gradient stored on the way",
       {DeviceType::CPU, DeviceType::CUDA},
       [](OpTensors& t) { mse_loss_forward_backward(t.out[0], t.out[1], t.in[0], t.in[1]); }});
  f.variants.push_back({"unfused",
                        "mse_loss_forward, then mse_loss_backward: pred and target read twice",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) {
                          mse_loss_forward(t.out[0], t.in[0], t.in[1]);
                          mse_loss_backward(t.out[1], t.in[2], t.in[0], t.in[1]);
                        }});
  return f;
}

OpFamily none_op() {
  OpFamily f;
  f.name = "mse_none_forward_backward";
  f.what = "MSE (none) per-element loss and gradient: two reads, two writes";
  f.make = [](int64_t n, Device d) {
    return OpTensors{
        {uniform({n}, d, 1), uniform({n}, d, 2)},
        {Tensor::empty({n}, DType::Float32, d), Tensor::empty({n}, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    mse_loss_forward_backward_cpu<float>(t.out[0].data<float>(), t.out[1].data<float>(),
                                         t.in[0].data<float>(), t.in[1].data<float>(),
                                         t.in[0].numel(), 1.0, 2.0f, true);
  };
  f.bytes = [](int64_t n) { return 4 * kF * double(n); };
  f.tolerance = 0;  // element-wise, the same expressions: the same bits
  f.variants.push_back({"scalar",
                        "mse_loss_forward_backward(reduction none): one float per load",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) {
                          mse_loss_forward_backward(t.out[0], t.out[1], t.in[0], t.in[1],
                                                    Reduction::None);
                        }});
  f.variants.push_back(
      {"vec4",
       "16-byte packs (float4): two vector loads and two vector stores per 4 elements",
       {DeviceType::CUDA},
       [](OpTensors& t) {
         on_device(
             "mse_none_vec4", t.in[0].device(), [] {},
             [&](auto stream) {
               mse_loss_none_fused_vec4_cuda<float>(t.out[0].data<float>(), t.out[1].data<float>(),
                                                    t.in[0].data<float>(), t.in[1].data<float>(),
                                                    t.in[0].numel(), 2.0f, stream);
             });
       }});
  return f;
}

}  // namespace
}  // namespace minitrain::opbench

MINITRAIN_REGISTER_OP(mse_forward_backward, minitrain::opbench::mean_op())
MINITRAIN_REGISTER_OP(mse_none_forward_backward, minitrain::opbench::none_op())
