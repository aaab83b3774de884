// Small string helpers and the --devices list (see core/strings.h).

#include "core/strings.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace minitrain {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  for (std::size_t at; (at = text.find(sep, begin)) != std::string::npos; begin = at + 1)
    items.push_back(text.substr(begin, at - begin));
  items.push_back(text.substr(begin));
  return items;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : sep) + items[i];
  return s;
}

std::string join(const std::vector<int64_t>& items, const std::string& sep) {
  std::vector<std::string> text;
  for (int64_t x : items) text.push_back(std::to_string(x));
  return join(text, sep);
}

std::string bytes_str(int64_t bytes) {
  constexpr int64_t kKiB = int64_t(1) << 10, kMiB = int64_t(1) << 20;
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

std::vector<std::string> device_list_entries(const std::string& list, const std::string& flag) {
  std::vector<std::string> entries = split(list, ',');
  for (const std::string& d : entries) {
    if (d.empty())
      MT_THROW(ValueError, flag, " '", list,
               "': an empty entry; give a list like cpu,cpu or cuda:0,cuda:1");
    if (d == "auto")
      MT_THROW(ValueError, flag, " '", list, "': name each device (cpu, cuda:N), not auto");
  }
  return entries;
}

std::vector<Device> parse_device_list(const std::string& list, const std::string& flag) {
  std::vector<Device> devices;
  for (const std::string& d : device_list_entries(list, flag)) devices.push_back(Device::parse(d));
  return devices;
}

const char* nonfinite_name(double v) noexcept {
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

double nonfinite_value(const std::string& name) noexcept {
  if (name == "inf") return std::numeric_limits<double>::infinity();
  if (name == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

std::string csv_field(const std::string& text) {
  const bool blank_end = !text.empty() && (text.front() == ' ' || text.front() == '\t' ||
                                           text.back() == ' ' || text.back() == '\t');
  if (!blank_end && text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string number_text(double v) {
  // The shortest text that reads back as v (std::to_chars: digits or exponent form, whichever is
  // shorter): "16777217", "0.003", "1e+10", "1e-320". A stream's 6 significant digits once echoed
  // --lr 16777217 as 1.67772e+07.
  char buf[64];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace minitrain
