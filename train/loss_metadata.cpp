// A weights file's 'loss_settings' metadata: LossOptions' settings by flag, through
// MT_LOSS_SETTINGS (nn/loss.h), so a new setting is written and read without a line here.

#include "train/loss_metadata.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace minitrain {

std::string loss_settings_metadata(const LossOptions& o) {
  const std::vector<LossSetting> given = given_loss_settings(o);
  if (given.empty()) return "";
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  const auto is_given = [&](LossSetting s) {
    return std::find(given.begin(), given.end(), s) != given.end();
  };
#define MT_WRITE_LOSS_SETTING(Setting, member, flag) \
  if (is_given(LossSetting::Setting)) j[flag] = o.member;
  MT_LOSS_SETTINGS(MT_WRITE_LOSS_SETTING)
#undef MT_WRITE_LOSS_SETTING
  return j.dump();
}

void read_loss_settings_metadata(const std::string& text, const std::string& path, LossOptions& o) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  MT_CHECK_AS(IoError, j.is_object(), path, ": metadata 'loss_settings' is '", excerpt(text, 80),
              "', not a JSON object of loss settings ({\"huber-delta\": 0.5}); train --save "
              "writes one");
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    try {
#define MT_READ_LOSS_SETTING(Setting, member, flag)        \
  if (key == flag) {                                       \
    known = true;                                          \
    o.member = value.get<decltype(LossOptions::member)>(); \
  }
      MT_LOSS_SETTINGS(MT_READ_LOSS_SETTING)
#undef MT_READ_LOSS_SETTING
    } catch (const nlohmann::json::exception&) {
      MT_THROW(IoError, path, ": metadata 'loss_settings' gives '", key, "' the value ",
               excerpt(value.dump(), 80), ", which is not a value of that setting");
    }
    MT_CHECK_AS(IoError, known, path, ": metadata 'loss_settings' names '", key,
                "', which is no loss setting of this build");
  }
}

}  // namespace minitrain
