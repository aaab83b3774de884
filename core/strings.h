#pragma once
// Small string helpers that several layers need (file suffixes, comma lists, "a, b, c" in
// messages), and the one reading of a --devices list, so no file keeps its own copy.

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace minitrain {

bool starts_with(const std::string& s, const std::string& prefix);
bool ends_with(const std::string& s, const std::string& suffix);

/// Splits on `sep`, keeping empty items so that callers can report them: "a,,b" -> {a, "", b},
/// "" -> {""}, "a," -> {a, ""}. No trimming: " a" stays " a".
std::vector<std::string> split(const std::string& text, char sep);

/// The items with `sep` between them: join({"a", "b"}, ", ") == "a, b".
std::string join(const std::vector<std::string>& items, const std::string& sep);
std::string join(const std::vector<int64_t>& items, const std::string& sep);

/// JSON has no inf or NaN, so minitrain's JSON writes a non-finite number as null with its name
/// beside it: "inf", "-inf" or "nan" (nonfinite_name), read back by nonfinite_value ("nan" for
/// anything else, as a null without a name was).
const char* nonfinite_name(double v) noexcept;
double nonfinite_value(const std::string& name) noexcept;

/// A byte count in the largest binary unit that holds it exactly, for reprs of settings:
/// 26214400 -> "25 MiB", 3072 -> "3 KiB", 1000 -> "1000 B". (core/bytes.h's format_bytes rounds
/// to two decimals instead, for measured amounts.)
std::string bytes_str(int64_t bytes);

/// One CSV cell as RFC 4180 writes it: as it is, or in double quotes (a quote doubled) when it
/// holds a comma, a quote, a line break or blanks at either end (which a reader trims):
/// csv_field("a,b") == "\"a,b\"", csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"". data/'s CSV
/// reader reads every such cell back as it was.
std::string csv_field(const std::string& text);

/// A number as written: the shortest text that reads back as `v`, in digits or exponent form,
/// whichever is shorter (0.25, 16777217, 1e+05, 1e-08).
std::string number_text(double v);

/// The entries of a device list such as "cpu,cpu" or "cuda:0,cuda:1", in order, unparsed.
/// ValueError naming `flag` and the list for an empty entry ("cpu,,cpu", "cpu,") or "auto"
/// (a list names its devices). Checks no device name: see parse_device_list.
std::vector<std::string> device_list_entries(const std::string& list,
                                             const std::string& flag = "--devices");
/// The same entries as devices: DeviceError (Device::parse's) for a name that is not a device.
/// Does not check that the devices exist (see check_available).
std::vector<Device> parse_device_list(const std::string& list,
                                      const std::string& flag = "--devices");

}  // namespace minitrain
