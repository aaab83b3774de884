#include "cuda_emu/kernel_registers.h"

#include <sstream>
#include <vector>

namespace mtemu {
namespace detail {
extern const char* const kKernelRegistersTsv;  // kernel_registers_data.cpp, made by CMake
}  // namespace detail
namespace {

struct Table {
  std::string source;
  std::vector<KernelRegisters> rows;
};

const Table& table() {
  static const Table t = [] {
    Table out;
    std::istringstream in(detail::kKernelRegistersTsv);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("# nvcc ", 0) == 0) out.source = line.substr(2);
      if (line.empty() || line[0] == '#' || line.rfind("file\t", 0) == 0) continue;
      std::istringstream f(line);
      KernelRegisters r;
      std::string n, lo, hi, smem;
      std::getline(f, r.file, '\t');
      std::getline(f, r.kernel, '\t');
      std::getline(f, n, '\t');
      std::getline(f, lo, '\t');
      std::getline(f, hi, '\t');
      std::getline(f, smem, '\t');
      std::getline(f, r.source_sha256, '\t');
      r.instantiations = std::stoi(n);
      r.registers_min = std::stoi(lo);
      r.registers_max = std::stoi(hi);
      r.static_smem_max = std::stoul(smem);
      out.rows.push_back(std::move(r));
    }
    return out;
  }();
  return t;
}

// `a::b::k<T, 2>` -> `k`.
std::string base_name(const std::string& as_written) {
  std::string s;
  int depth = 0;
  for (char c : as_written) {
    if (c == '<')
      ++depth;
    else if (c == '>')
      --depth;
    else if (depth == 0 && c != ' ')
      s += c;
  }
  const std::size_t colon = s.rfind("::");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

bool ends_with_path(const std::string& path, const std::string& tail) {
  if (path.size() < tail.size() || path.compare(path.size() - tail.size(), tail.size(), tail) != 0)
    return false;
  return path.size() == tail.size() || path[path.size() - tail.size() - 1] == '/';
}

}  // namespace

const KernelRegisters* kernel_registers(const std::string& file, const std::string& kernel) {
  const std::string name = base_name(kernel);
  for (const KernelRegisters& r : table().rows)
    if (r.kernel == name && ends_with_path(file, r.file)) return &r;
  return nullptr;
}

const std::string& kernel_registers_source() { return table().source; }
std::size_t kernel_registers_count() { return table().rows.size(); }
const KernelRegisters& kernel_registers_at(std::size_t i) { return table().rows.at(i); }

}  // namespace mtemu
