// Element-wise arithmetic (kernels/elementwise.h) and a plain copy: one pass over n floats,
// memory-bound. The references are plain loops in float, as the kernels compute.

#include "kernels/elementwise.h"
#include "kernels/op_bench/op_registry.h"

namespace minitrain::opbench {
namespace {

constexpr double kF = 4.0;  // bytes per float32

OpFamily copy_op() {
  OpFamily f;
  f.name = "copy";
  f.what = "out = x: one read, one write (the roof of the memory-bound ops)";
  f.make = [](int64_t n, Device d) {
    return OpTensors{{uniform({n}, d, 1)}, {Tensor::empty({n}, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    const float* x = t.in[0].data<float>();
    float* y = t.out[0].data<float>();
    for (int64_t i = 0; i < t.in[0].numel(); ++i) y[i] = x[i];
  };
  f.bytes = [](int64_t n) { return 2 * kF * double(n); };
  f.variants.push_back({"copy_",
                        "Tensor::copy_: cudaMemcpyAsync on a GPU, memcpy on the CPU",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) { t.out[0].copy_(t.in[0]); }});
  return f;
}

OpFamily add_op() {
  OpFamily f;
  f.name = "add";
  f.what = "out = a + b: two reads, one write";
  f.make = [](int64_t n, Device d) {
    return OpTensors{{uniform({n}, d, 1), uniform({n}, d, 2)},
                     {Tensor::empty({n}, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    const float *a = t.in[0].data<float>(), *b = t.in[1].data<float>();
    float* o = t.out[0].data<float>();
    for (int64_t i = 0; i < t.in[0].numel(); ++i) o[i] = a[i] + b[i];
  };
  f.bytes = [](int64_t n) { return 3 * kF * double(n); };
  f.flops = [](int64_t n) { return double(n); };
  f.variants.push_back({"map_vec4",
                        "the shared element-wise map, 16-byte packs when aligned",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) { add(t.out[0], t.in[0], t.in[1]); }});
  return f;
}

OpFamily scale_op() {
  OpFamily f;
  f.name = "scale";
  f.what = "out = 0.5 * x: one read, one write";
  f.make = [](int64_t n, Device d) {
    return OpTensors{{uniform({n}, d, 1)}, {Tensor::empty({n}, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    const float* x = t.in[0].data<float>();
    float* o = t.out[0].data<float>();
    for (int64_t i = 0; i < t.in[0].numel(); ++i) o[i] = 0.5f * x[i];
  };
  f.bytes = [](int64_t n) { return 2 * kF * double(n); };
  f.flops = [](int64_t n) { return double(n); };
  f.variants.push_back({"map_vec4",
                        "the shared element-wise map, 16-byte packs when aligned",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) { scale(t.out[0], t.in[0], 0.5); }});
  return f;
}

OpFamily axpy_op() {
  OpFamily f;
  f.name = "axpy";
  f.what = "y += 1e-3 * x in place: two reads, one write";
  f.make = [](int64_t n, Device d) {
    return OpTensors{{uniform({n}, d, 1)}, {uniform({n}, d, 2)}};
  };
  f.reference = [](OpTensors& t) {
    const float* x = t.in[0].data<float>();
    float* y = t.out[0].data<float>();
    for (int64_t i = 0; i < t.in[0].numel(); ++i) y[i] += 1e-3f * x[i];
  };
  f.bytes = [](int64_t n) { return 3 * kF * double(n); };
  f.flops = [](int64_t n) { return 2.0 * double(n); };
  f.tolerance = 1e-7;  // a GPU may contract y + a * x into one FMA (one rounding fewer)
  f.variants.push_back({"map_vec4",
                        "the shared element-wise map, 16-byte packs when aligned",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) { axpy(t.out[0], 1e-3, t.in[0]); }});
  return f;
}

}  // namespace
}  // namespace minitrain::opbench

MINITRAIN_REGISTER_OP(copy, minitrain::opbench::copy_op())
MINITRAIN_REGISTER_OP(add, minitrain::opbench::add_op())
MINITRAIN_REGISTER_OP(scale, minitrain::opbench::scale_op())
MINITRAIN_REGISTER_OP(axpy, minitrain::opbench::axpy_op())
