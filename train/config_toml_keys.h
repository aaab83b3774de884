#pragma once
// Internal to train/ (the files that read TOML: config_toml.cpp, runs_config.cpp).

#include <toml++/toml.h>

#include <string>

namespace minitrain::config_detail {

/// ValueError "SOURCE:LINE: key 'batch_size' sets 'batch-size', which 'batch-size' already set in
/// this table; ..." when one training key is given twice in `table` under two spellings. Unknown
/// keys are skipped: the caller names them.
void check_one_spelling_per_key(const toml::table& table, const std::string& source);

}  // namespace minitrain::config_detail
