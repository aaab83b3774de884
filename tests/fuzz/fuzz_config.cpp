// libFuzzer target: the run-config reader (train/config.h) on arbitrary bytes, through the path a
// `--config FILE` takes in `minitrain train`: apply_toml_config, then validate, then
// config_to_json (what checkpoints store). The reader takes text, so no file is involved.
//
// Any minitrain::Error is the expected answer to a bad config; a crash, a sanitizer report,
// another exception type (a toml++ or nlohmann::json one escaping, say) or a hang is a finding.
// So is an accepted file that gives one key twice under its two spellings ("batch-size" and
// "batch_size"): the reader must reject it rather than let the last one silently win.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "core/error.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/config.h"

namespace {

// The key's canonical spelling: '_' read as '-', as the reader does.
std::string canonical(std::string_view key) {
  std::string s(key);
  for (char& c : s)
    if (c == '_') c = '-';
  return s;
}

// Aborts when two top-level keys of an accepted document are spellings of the same key.
void check_no_key_twice(const std::string& text) {
  toml::table table;
  try {
    table = toml::parse(std::string_view(text), std::string_view("fuzz.toml"));
  } catch (const toml::parse_error&) {
    FUZZ_CHECK(false, "apply_toml_config accepted a document that toml++ rejects");
  }
  std::map<std::string, std::string> seen;  // canonical -> spelling
  for (const auto& [key, node] : table) {
    (void)node;
    const auto [it, inserted] = seen.emplace(canonical(key.str()), std::string(key.str()));
    FUZZ_CHECK(inserted, ("key '" + canonical(key.str()) + "' given twice, as '" + it->second +
                          "' and '" + std::string(key.str()) + "', and accepted")
                             .c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    minitrain::TrainConfig config;
    minitrain::apply_toml_config(config, text, "fuzz.toml");
    check_no_key_twice(text);
    minitrain::validate(config);
    const std::string json = minitrain::config_to_json(config);
    FUZZ_CHECK(!json.empty() && json.front() == '{', json.c_str());
  } catch (const minitrain::Error&) {
    // a bad key, value, combination or TOML syntax: the reader said so with a typed error
  }
  return 0;
}
