// The fused Adam step (kernels/optim/adam_step.h) at step 10: reads param, grad, exp_avg,
// exp_avg_sq; writes param, exp_avg, exp_avg_sq (7 float passes), memory-bound. The reference is
// the CPU twin, adam_step_cpu, with the same precomputed factors.

#include "kernels/optim/adam_step.h"
#include "kernels/op_bench/op_registry.h"

namespace minitrain::opbench {
namespace {

constexpr double kF = 4.0;

AdamStepArgs args() { return adam_step_args(1e-3, 0.9, 0.999, 1e-8, 0.0, false, false, 10); }

OpFamily adam_op() {
  OpFamily f;
  f.name = "adam_step";
  f.what = "one Adam update of n parameters (step 10): four reads, three writes";
  // in: grad; out (updated in place): param, exp_avg, exp_avg_sq.
  f.make = [](int64_t n, Device d) {
    return OpTensors{
        {uniform({n}, d, 2, -1e-3f, 1e-3f)},
        {uniform({n}, d, 1), uniform({n}, d, 3, -1e-3f, 1e-3f), uniform({n}, d, 4, 0.0f, 1e-6f)}};
  };
  f.reference = [](OpTensors& t) {
    adam_step_cpu<float>(t.out[0].data<float>(), t.in[0].data<float>(), t.out[1].data<float>(),
                         t.out[2].data<float>(), nullptr, t.in[0].numel(), args());
  };
  f.bytes = [](int64_t n) { return 7 * kF * double(n); };
  f.flops = [](int64_t n) { return 12.0 * double(n); };
  f.tolerance = 1e-6;  // sqrt and division: a GPU may contract into FMAs
  f.variants.push_back({"fused",
                        "one pass over the four tensors, 16-byte packs when aligned",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) {
                          Tensor none;
                          adam_step(t.out[0], t.in[0], t.out[1], t.out[2], none, args());
                        }});
  return f;
}

}  // namespace
}  // namespace minitrain::opbench

MINITRAIN_REGISTER_OP(adam_step, minitrain::opbench::adam_op())
