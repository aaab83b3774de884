#pragma once
// y = x W^T + b with W [out, in] and b [out], as torch.nn.Linear. Forward is one GEMM and a bias
// add; backward is two GEMMs (dx = dy W, dW += dy^T x) and a column sum (db += sum_rows(dy)).
// The three GEMMs run through a GEMM backend chosen by name (kernels/gemm/gemm_registry.h): "auto",
// the device's default, unless set_gemm_backend picks another ("cublaslt" fuses the bias add).
//
// Under mixed precision (set_precision(bfloat16 or float16), torch.autocast's rule for linear)
// the layer takes a float32 or 16-bit input and returns 16-bit: y = round16(x16 round16(W)^T +
// round16(b)), every product exact and summed in float32, rounded once. Backward gives torch's
// 16-bit gradients: dx = round16(dy W16), and dW, db rounded to 16 bits before they are added
// into the float32 gradients of the master weights. A backend with a mixed GEMM (warptile,
// reference; cuBLAS/cuBLASLt for dW) takes the 16-bit operands as they are and rounds at its
// store, the bias added in its epilogue (Note [16-bit GEMM operands] in nn/linear.cpp); any other
// gets them widened to float32 (exact), so every backend that multiplies float32 exactly serves
// every precision; the input is cached for backward in 16 bits, half the memory of float32.
// Backward multiplies by the forward's round16(W), as torch's autocast saves it, not by a new
// rounding of the weight: the same bits unless W changed in between, and one launch fewer. The
// casts of the weights and of the gradients are multi-tensor launches (Notes [the weight casts] and
// [the gradient casts] in nn/linear.cpp): a Sequential rounds all its layers' weights in one launch
// (RoundedWeights) and adds all their rounded gradients in one (RoundedGradients).

#include <string>
#include <vector>

#include "core/buffer_slot.h"
#include "core/generator.h"
#include "kernels/activation.h"
#include "nn/module.h"

namespace minitrain {

class Linear final : public Module {
 public:
  /// PyTorch's default init: W ~ kaiming_uniform(a=sqrt(5)) (= U(+-1/sqrt(in))), b ~
  /// U(+-1/sqrt(in)).
  Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias = true,
         Device device = Device::cpu(), DType dtype = DType::Float32);

  Tensor forward(const Tensor& x) override;  ///< x [batch, in]; ShapeError names both shapes
  Tensor backward(const Tensor& grad_output) override;

  /// Sequential's fusion of this layer with a neighbouring activation layer (Note [Linear +
  /// activation] in nn/sequential.cpp), for an input x where fuses_activation(x): a layer that
  /// computes in its own dtype (no mixed precision) on the CPU's OpenBLAS path, where the
  /// activation's work runs on each tile of the GEMM as it is made (kernels/linear_layer.h).
  bool fuses_activation(const Tensor& x) const;
  /// Whether forward_activation(x) is allowed: fuses_activation(x), or a CUDA layer that computes
  /// in x's dtype (float32 or float64, no mixed precision) with a backend other than "cublaslt",
  /// where the bias add and the activation run as one pass after the GEMM.
  bool fuses_activation_forward(const Tensor& x) const;
  /// Whether backward_through_activation applies: a GPU layer with a bias as in
  /// fuses_activation_forward, for the activation's kept input `pre`.
  bool fuses_activation_grad(const Tensor& pre) const;
  /// forward(x), then `act` (where fuses_activation_forward(x)): returns act(x W^T + b) and
  /// sets `pre` to what the activation layer keeps for its backward: x W^T + b, or for ReLU the
  /// output itself (Note [ReLU in place] in nn/linear.cpp). The same bits as forward followed by
  /// the activation.
  Tensor forward_activation(const Tensor& x, Activation act, Tensor& pre);
  /// backward(grad_output) with its input gradient carried on through `act`, the activation layer
  /// before this one, whose input was `pre`: returns dL/d(pre) (undefined when this layer needs no
  /// input gradient). The same bits as backward followed by the activation's backward.
  Tensor backward_activation(const Tensor& grad_output, Activation act, const Tensor& pre);
  /// The backward of this layer and of the activation layer after it, from the gradient of the
  /// activation's output (where fuses_activation_grad(pre)): the activation's backward and the
  /// bias gradient's column sums in one pass, then the two GEMMs. Returns dL/dx (undefined when
  /// this layer needs no input gradient). The same bits as the activation's backward followed
  /// by backward().
  Tensor backward_through_activation(const Tensor& grad_activation_output, Activation act,
                                     const Tensor& pre);
  NamedParameters named_parameters(const std::string& prefix = "") override;
  void to(Device device) override;  ///< also drops the cached input
  std::string repr() const override;

  int64_t in_features() const noexcept { return in_; }
  int64_t out_features() const noexcept { return out_; }
  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }  ///< value undefined when built without bias

  /// The GEMM backend of forward and backward by registry name, or "auto" (the default): the
  /// default backend of the device the layer is on when it runs. ValueError listing the
  /// registered names for an unknown one; a backend for another device type is refused by the
  /// first forward, naming both.
  void set_gemm_backend(std::string name);
  /// Also checks that the GEMM backend takes the precision (ValueError naming those that do).
  void set_precision(DType precision) override;
  const std::string& gemm_backend() const noexcept { return gemm_backend_; }

  /// Note [the weight casts] (nn/linear.cpp): for the span of one pass over `layers` (Sequential's
  /// forward), the 16-bit weights and biases of those that compute under mixed precision,
  /// rounded in one kernel launch per device and precision, which each layer's next forward then
  /// multiplies by instead of rounding its own (one launch each). The copies are current as of
  /// the construction; those not used by a forward are forgotten when it ends.
  class RoundedWeights {
   public:
    explicit RoundedWeights(std::vector<Linear*> layers);
    ~RoundedWeights();
    RoundedWeights(const RoundedWeights&) = delete;
    RoundedWeights& operator=(const RoundedWeights&) = delete;

   private:
    std::vector<Linear*> layers_;
  };

  /// Note [the gradient casts] (nn/linear.cpp): for the span of one backward over `layers`
  /// (Sequential's backward), the rounded weight and bias gradients of those that compute under
  /// mixed precision wait, and flush() adds them into the float32 gradients in one kernel launch
  /// per device and precision. Same bits as each layer adding its own. Ended without a flush (an
  /// exception), a gradient that was to be stored into a released buffer is released again.
  class RoundedGradients {
   public:
    explicit RoundedGradients(std::vector<Linear*> layers);
    ~RoundedGradients();
    RoundedGradients(const RoundedGradients&) = delete;
    RoundedGradients& operator=(const RoundedGradients&) = delete;
    void flush();

   private:
    friend class Linear;
    struct Pending {
      Parameter* param;
      const Tensor* product;  // the layer's float32 product (weight_grad_ or bias_scratch_)
      bool overwrite;
      DType precision;
    };
    std::vector<Linear*> layers_;
    std::vector<Pending> pending_;
  };

 private:
  int64_t in_, out_;
  Parameter weight_, bias_;
  Tensor input_;         // cached by forward in training mode (a handle: no copy)
  Tensor bias_scratch_;  // [out]: sum_rows(dy) before it is added into the bias gradient
  // Mixed precision: round16(W), what the forward multiplies by (16-bit, or float32 holding 16-bit
  // values: Note [16-bit GEMM operands]), and round16(b) in float32; backward's dx uses the
  // forward's weight16_ (torch's autocast saves the cast weight for backward too). Kept across
  // steps (rewritten in place: no allocation after the first step).
  Tensor weight16_, bias16_;
  bool weights16_current_ = false;  // rounded for the next forward by RoundedWeights
  // Mixed precision: dy^T x in float32 before it is rounded and added into the weight's gradient
  // (kept across steps; read by RoundedGradients::flush when the cast waits for it).
  Tensor weight_grad_;
  RoundedGradients* gradients_to_ = nullptr;  // the backward's RoundedGradients, if any
  std::string gemm_backend_ = "auto";
  // Note [buffers that live across steps] (core/buffer_slot.h): what each step writes anew, kept
  // and rewritten when no one else holds it; dropped by to().
  struct Buffers {
    BufferSlot out;       // forward's x W^T + b (the activation's kept input; ReLU's output too)
    BufferSlot act_out;   // forward_activation's activation output (not ReLU's: in place)
    BufferSlot grad_pre;  // dL/d(x W^T + b) of backward_through_activation / backward_activation
    BufferSlot grad_in;   // dL/dx
    // mixed precision: the 16-bit output and input gradient, and the casts around the float32
    // GEMMs of a backend without a mixed GEMM (the rounded weights and dW are weight16_, bias16_
    // and weight_grad_, kept by the multi-tensor casts; w32 widens a 16-bit weight16_ for such a
    // backend set after it was rounded)
    BufferSlot x16, x32, acc, y16, dy16, dy32, dx16, w32;
    void clear() noexcept;
  } buffers_;

  void check_input(const Tensor& x) const;             // forward's checks on its input
  const Tensor& checked_grad(const Tensor& dy) const;  // backward's checks; returns the input
  void accumulate_parameter_grads(const Tensor& dy);   // dW += dy^T x, db += sum_rows(dy)
  Tensor forward_mixed(const Tensor& x);
  Tensor backward_mixed(const Tensor& grad_output);
  // Rounds the weights of `layers` that compute under mixed precision into their weight16_ and
  // bias16_: one round_to_precision_multi launch per device and precision.
  static void round_weights(const std::vector<Linear*>& layers);
  // Adds each pending product, rounded, into its parameter's gradient: one round_to_precision_multi
  // launch per device and precision.
  static void add_rounded_gradients(const std::vector<RoundedGradients::Pending>& pending);
  bool computes_mixed() const noexcept;
  // weight16_'s dtype for this backend and precision (Note [16-bit GEMM operands]).
  DType weight_copy_dtype() const;
  // weight16_ as float32, for the cast path's float32 GEMMs.
  Tensor weight16_widened();
  // cast(in, to) into a buffer of `slot` (Note [buffers that live across steps]).
  static Tensor cast_into(BufferSlot& slot, const Tensor& in, DType to);
};

}  // namespace minitrain
