#pragma once
// A ValueError about one named option of a library object, so that a command line can name the
// flag that set it.

#include <string>
#include <utility>

#include "core/error.h"

namespace minitrain {

/// "adam: lr must be finite and >= 0, got -1" is who "adam", option "lr", detail "must be finite
/// and >= 0, got -1". The library's constructor is the one place that checks an option's range;
/// the command line (train/settings.h) finds the flag that set option() and names it instead:
/// "--lr must be finite and >= 0, got -1".
class OptionError : public ValueError {
 public:
  OptionError(const std::string& who, std::string option, std::string detail)
      : ValueError(who + ": " + option + " " + detail),
        option_(std::move(option)),
        detail_(std::move(detail)) {}
  const std::string& option() const noexcept { return option_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string option_, detail_;
};

}  // namespace minitrain
