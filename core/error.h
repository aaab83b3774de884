#pragma once
// Typed exceptions and the check macros. The library throws; only binaries catch, print what()
// on one line and exit non-zero. A message names the values involved and, where it can, says
// what to do: "linear: input has 7 features but weight expects 8 (input [32, 7], weight [16, 8])".

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace minitrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ShapeError : public Error {  ///< shapes that do not fit together
 public:
  using Error::Error;
};
class DTypeError : public Error {  ///< element types that do not fit together
 public:
  using Error::Error;
};
class DeviceError : public Error {  ///< wrong or missing device, CUDA/cuBLAS/cuDNN failures
 public:
  using Error::Error;
};
class OutOfMemory : public Error {  ///< an allocation beyond the device, or beyond the set cap
 public:
  using Error::Error;
};
class IoError : public Error {  ///< missing, unreadable or malformed files
 public:
  using Error::Error;
};
class CommError : public Error {  ///< collectives: a peer that fails or never comes
 public:
  using Error::Error;
};
class ValueError : public Error {  ///< an argument outside its allowed range
 public:
  using Error::Error;
};

/// Text from a file or the command line as an error message quotes it: at most `max` bytes, cut
/// at a UTF-8 character boundary and marked with "...", so an 80 KB line cannot flood the
/// terminal.
inline std::string excerpt(std::string_view text, std::size_t max = 80) {
  if (text.size() <= max) return std::string(text);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;  // continuation byte
  return std::string(text.substr(0, cut)) + "...";
}

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace minitrain

/// Throws ErrorType with the arguments streamed into one message.
#define MT_THROW(ErrorType, ...) throw ErrorType(::minitrain::detail::concat(__VA_ARGS__))

/// MT_CHECK(cond, msg...) throws minitrain::Error; MT_CHECK_AS(ShapeError, cond, msg...) a typed
/// one.
#define MT_CHECK(cond, ...)                                 \
  do {                                                      \
    if (!(cond)) MT_THROW(::minitrain::Error, __VA_ARGS__); \
  } while (0)
#define MT_CHECK_AS(ErrorType, cond, ...)          \
  do {                                             \
    if (!(cond)) MT_THROW(ErrorType, __VA_ARGS__); \
  } while (0)
