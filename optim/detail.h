#pragma once
// Internal helpers of the optimizers (not part of the public API): hyperparameter checks and the
// (de)serialisation of state scalars and state tensor names, shared by sgd.cpp and adam.cpp.

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace minitrain::optim_detail {

/// ValueError "<who>: <what> must be finite and >= 0, got <value>".
void check_non_negative(const std::string& who, const char* what, double value);
/// ValueError "<who>: <what> must be in [lo, hi), got <value>".
void check_in_range(const std::string& who, const char* what, double value, double lo, double hi,
                    bool hi_inclusive);

/// Exact round-trip text for a double ("%.17g", C locale), and for bools and integers.
std::string format_double(double v);
std::string format_bool(bool v);
std::string format_int(int64_t v);

/// Reads scalars[key] if present into *out (returns false if absent); ValueError naming the key
/// for text that is not a number / bool / integer.
bool read_double(const std::string& who, const std::map<std::string, std::string>& scalars,
                 const std::string& key, double* out);
bool read_bool(const std::string& who, const std::map<std::string, std::string>& scalars,
               const std::string& key, bool* out);
bool read_int(const std::string& who, const std::map<std::string, std::string>& scalars,
              const std::string& key, int64_t* out);

/// The common part of load_state: the "optimizer" scalar must equal `kind`, "steps" must be an
/// integer >= 0 and "lr" and "initial_lr" (if present) valid. lr = current_lr if absent;
/// initial_lr (the base rate a schedule scales) = lr if absent.
struct CommonScalars {
  int64_t steps;
  double lr, initial_lr;
};
CommonScalars read_common_scalars(const std::string& kind,
                                  const std::map<std::string, std::string>& scalars,
                                  double current_lr);

/// Matches a state tensor name "<param>.<slot>" against the parameters and slots: returns the
/// parameter index and slot index, or throws ValueError naming the key and the expected names.
std::pair<std::size_t, std::size_t> match_state_name(const std::string& who, const std::string& key,
                                                     const NamedParameters& params,
                                                     const std::vector<std::string>& slots);

/// A state tensor checked against its parameter (ShapeError / DTypeError naming the key) and
/// copied onto the parameter's device (new memory, never shared with `src`).
Tensor load_state_tensor(const std::string& who, const std::string& key, const Tensor& src,
                         const Tensor& param);

/// The state tensors of load_state by slot: result[s][i] is parameter i's tensor of `slots[s]`
/// (undefined where `tensors` has none), each name matched (match_state_name), checked against
/// its parameter and copied (load_state_tensor); a name given twice is a ValueError.
std::vector<std::vector<Tensor>> read_state_slots(
    const std::string& who, const std::vector<std::pair<std::string, Tensor>>& tensors,
    const NamedParameters& params, const std::vector<std::string>& slots);

/// A host copy that shares nothing with `t` (t.to(cpu) shares a CPU tensor).
Tensor host_copy(const Tensor& t);

/// The parameters `indices` grouped by (device, dtype, keys[i]) in first-seen order: each group
/// can take one multi-tensor step (kernels/optim/multi_tensor_optim.h), the key holding what must
/// be equal within a step (SGD: first step or not; Adam: the parameter's step count t).
std::vector<std::vector<std::size_t>> group_for_multi_tensor(
    const NamedParameters& params, const std::vector<std::size_t>& indices,
    const std::vector<int64_t>& keys);

/// Appends `c` (a trivially copyable struct of step factors) to `bytes` at a 16-byte boundary and
/// returns its offset: the layout of a capturable step's factor buffer (Note [capturable step]).
template <typename C>
std::size_t append_scalars(std::vector<unsigned char>& bytes, const C& c) {
  const std::size_t offset = (bytes.size() + 15) / 16 * 16;
  bytes.resize(offset + sizeof(C));
  std::memcpy(bytes.data() + offset, &c, sizeof(C));
  return offset;
}

/// The address of a tensor's memory as a plan entry (Optimizer::step_plan); 0 when undefined.
inline int64_t plan_address(const Tensor& t) {
  return t.defined() ? static_cast<int64_t>(reinterpret_cast<intptr_t>(t.raw_data())) : 0;
}

}  // namespace minitrain::optim_detail
