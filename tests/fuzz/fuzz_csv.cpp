// libFuzzer target: the CSV reader (data/readers.h, load_csv_dataset) on arbitrary bytes.
//
// Input layout: the first line names the target columns, comma-separated (as --target-columns
// does); everything after that first '\n' is the CSV file. So the fuzzer varies the target
// choice too (unknown, repeated, every column) without a second input channel. Seeds in
// corpus/csv/ follow this layout.
//
// Any minitrain::Error is the expected answer to a malformed table; a crash, a sanitizer report,
// another exception type, an allocation over -malloc_limit_mb or a hang is a finding.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/readers.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(s.substr(start, comma - start));
  out.push_back(s.substr(start));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const minitrain::fuzz::ScratchFile file("csv");
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = input.find('\n');
  if (newline == std::string::npos) return 0;  // no CSV part at all: nothing to read
  const std::vector<std::string> targets = split_commas(input.substr(0, newline));
  const std::string csv = input.substr(newline + 1);
  file.write(reinterpret_cast<const uint8_t*>(csv.data()), csv.size());
  try {
    const minitrain::TensorDataset d = minitrain::load_csv_dataset(file.path(), targets);
    FUZZ_CHECK(d.features().ndim() == 2 && d.targets().ndim() == 2, "dataset rank");
    FUZZ_CHECK(d.features().size(0) == d.targets().size(0), "rows of features and targets");
    FUZZ_CHECK(d.targets().size(1) == int64_t(targets.size()), "one target column per name");
    FUZZ_CHECK(d.size() > 0, "a table with no data rows was accepted");
    minitrain::fuzz::touch(d.features());
    minitrain::fuzz::touch(d.targets());
  } catch (const minitrain::Error&) {
    // malformed table or bad target columns: the reader said so with a typed error
  }
  return 0;
}
