#pragma once
// Registers and static shared memory of minitrain's kernels as the real compiler gives them
// (cuda_emu/kernel_registers.tsv, made by scripts/kernel_registers_table.py from nvcc
// --resource-usage and compiled into the emulator), for the occupancy of each emulated launch
// (docs/emulator_counters.md). A template's instantiations are one entry: the emulator knows a
// launch by its kernel's name as written (`fill_kernel<T>`), not by its template arguments.

#include <cstddef>
#include <string>

namespace mtemu {

struct KernelRegisters {
  std::string file;    // as in the table: "kernels/fill.cu"
  std::string kernel;  // the base name: "fill_kernel"
  int instantiations = 0;
  int registers_min = 0, registers_max = 0;  // equal where every instantiation uses the same
  std::size_t static_smem_max = 0;
  std::string source_sha256;  // of the .cu file when the table was made (first 16 hex digits)
};

/// The table's entry for a launch: `file` is the launch's __FILE__ (any path ending in the table's
/// file), `kernel` the launch expression's kernel (namespaces and template arguments ignored).
/// Null where the table has none (a user's own kernel, or a kernel added after the table was
/// made): registers unknown.
const KernelRegisters* kernel_registers(const std::string& file, const std::string& kernel);

/// "nvcc 13.0 (V13.0.88), sm_90": where the table's figures come from.
const std::string& kernel_registers_source();

/// Every entry (for the table's own test).
std::size_t kernel_registers_count();
const KernelRegisters& kernel_registers_at(std::size_t i);

}  // namespace mtemu
