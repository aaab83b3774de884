#pragma once
// Internal to train/: prefixes the message of a library error with the flag whose value caused
// it ("--init: ..."), keeping its type, so the one line a user sees says which input to fix.

#include <string>
#include <utility>

#include "core/error.h"

namespace minitrain {

template <typename F>
void with_flag_context(const std::string& flag, F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const ShapeError& e) {
    throw ShapeError(flag + ": " + e.what());
  } catch (const ValueError& e) {
    throw ValueError(flag + ": " + e.what());
  } catch (const DTypeError& e) {
    throw DTypeError(flag + ": " + e.what());
  }
  // IoError already names the file; others (DeviceError, OutOfMemory) are not about the flag.
}

}  // namespace minitrain
