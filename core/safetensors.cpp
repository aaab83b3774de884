// safetensors reading and writing. Reading validates as the reference implementation does (and a
// little more: duplicate keys, unknown entry fields): the header is parsed and every entry
// checked, then the entries must tile the data buffer exactly, with no overlap and no hole.

#include "core/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/half.h"

// The format is little-endian and tensors are read straight into memory.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "minitrain's safetensors support assumes a little-endian host"
#endif

namespace minitrain {
namespace {

// A std::map-backed document: lookups and inserts are logarithmic. (ordered_json keeps the
// file's key order but inserts by linear search, which made a 200,000-tensor header take over a
// minute.) The top level's key order, which orders empty tensors, is recorded while parsing.
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;  // the writer's: metadata first, then tensors in order

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr std::size_t kDataAlign = 8;              // data starts 8-byte aligned, as torch writes
constexpr const char* kMetadataKey = "__metadata__";
// A header nests three levels (header, entry, shape list); the bound stops a hostile
// "[[[[..." before anything recursive (dump, destruction) walks a 100,000-deep value.
constexpr int kMaxJsonNesting = 16;
constexpr std::size_t kMaxShownJson = 200;  // JSON quoted in an error message

// ---- element types in files ----

// How a file's dtype becomes a tensor: F32/F64 as they are; F16/BF16 widened to float32 (exact).
struct FileType {
  std::string name;
  std::size_t item_size = 0;
  DType dtype = DType::Float32;
  bool widen = false;
};

FileType file_type(const std::string& name, const std::string& path, const std::string& tensor) {
  if (name == "F16" || name == "BF16") return {name, 2, DType::Float32, true};
  if (name == "F32" || name == "F64") {
    const DType d = dtype_from_safetensors(name);
    return {name, dtype_size(d), d, false};
  }
  MT_THROW(IoError, "cannot read '", path, "': tensor '", tensor, "' has dtype '", name,
           "', which minitrain does not read (it reads F32, F64, F16 and BF16; convert with "
           "tensor.float() before saving)");
}

// ---- header parsing ----

struct Entry {
  std::string name;
  FileType type;
  std::vector<int64_t> dims;
  uint64_t begin = 0, end = 0;
};

std::string json_text(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > kMaxShownJson ? s.substr(0, kMaxShownJson) + "..." : s;
}

/// Builds the header's document while rejecting duplicate keys (nlohmann would silently keep one
/// of them) and nesting deeper than any header has, and records the top level's keys in file
/// order. A SAX handler rather than nlohmann's parser callback: the callback parser rescans the
/// parent object at every object's end, which made a 200,000-tensor header take minutes.
class HeaderSax : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  HeaderSax(Json& root, const std::string& path)
      : Base(root, /*allow_exceptions=*/true), path_(path) {}

  // sax_parse calls these through the static type, so hiding the base's methods is enough.
  bool start_object(std::size_t n) {
    enter();
    open_objects_.emplace_back();
    return Base::start_object(n);
  }
  bool end_object() {
    open_objects_.pop_back();
    --depth_;
    return Base::end_object();
  }
  bool start_array(std::size_t n) {
    enter();
    return Base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }
  bool key(std::string& k) {
    if (!open_objects_.back().insert(k).second)
      MT_THROW(IoError, "cannot read '", path_, "': the header has the key ", json_text(Json(k)),
               " twice");
    if (open_objects_.size() == 1) top_level_keys.push_back(k);
    return Base::key(k);
  }

  std::vector<std::string> top_level_keys;

 private:
  void enter() {
    if (++depth_ > kMaxJsonNesting)
      MT_THROW(IoError, "cannot read '", path_, "': the header nests objects and lists more than ",
               kMaxJsonNesting, " deep; not a safetensors file?");
  }

  const std::string& path_;
  int depth_ = 0;
  std::vector<std::set<std::string>> open_objects_;
};

/// The header as a document (see HeaderSax); `top_level_keys` receives its keys in file order.
Json parse_json(const std::string& text, const std::string& path,
                std::vector<std::string>& top_level_keys) {
  Json root;
  HeaderSax sax(root, path);
  try {
    Json::sax_parse(text, &sax);
  } catch (const Json::exception& e) {
    // nlohmann quotes the offending token whole: a 100 KB number would flood the message.
    MT_THROW(IoError, "cannot read '", path, "': the header is not valid JSON (",
             excerpt(e.what(), 200), ")");
  }
  top_level_keys = std::move(sax.top_level_keys);
  return root;
}

uint64_t unsigned_field(const Json& j, const std::string& path, const std::string& tensor,
                        const char* field, std::size_t index) {
  if (j.is_number_integer() && !j.is_number_unsigned())
    MT_THROW(IoError, "cannot read '", path, "': tensor '", tensor, "' has ", field, "[", index,
             "] = ", json_text(j), " (negative)");
  MT_CHECK_AS(IoError, j.is_number_unsigned(), "cannot read '", path, "': tensor '", tensor,
              "' has ", field, "[", index, "] = ", json_text(j), " (not a non-negative integer)");
  return j.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const Json& j, const std::string& path) {
  MT_CHECK_AS(IoError, j.is_object(), "cannot read '", path, "': tensor '", name,
              "' is described by ", json_text(j),
              " instead of {\"dtype\", \"shape\", \"data_offsets\"}");
  for (const auto& item : j.items())
    MT_CHECK_AS(IoError,
                item.key() == "dtype" || item.key() == "shape" || item.key() == "data_offsets",
                "cannot read '", path, "': tensor '", name, "' has an unknown field \"", item.key(),
                "\" (expected dtype, shape and data_offsets)");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    MT_CHECK_AS(IoError, j.contains(field), "cannot read '", path, "': tensor '", name,
                "' has no \"", field, "\"");

  Entry e;
  e.name = name;
  const Json& dtype = j["dtype"];
  MT_CHECK_AS(IoError, dtype.is_string(), "cannot read '", path, "': tensor '", name,
              "' has dtype ", json_text(dtype), ", not a string such as \"F32\"");
  e.type = file_type(dtype.get<std::string>(), path, name);

  const Json& shape = j["shape"];
  MT_CHECK_AS(IoError, shape.is_array(), "cannot read '", path, "': tensor '", name, "' has shape ",
              json_text(shape), ", not a list of integers");
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const uint64_t d = unsigned_field(shape[i], path, name, "shape", i);
    MT_CHECK_AS(IoError, d <= uint64_t(std::numeric_limits<int64_t>::max()), "cannot read '", path,
                "': tensor '", name, "' has shape[", i, "] = ", d, " (too large)");
    e.dims.push_back(int64_t(d));
  }

  const Json& offsets = j["data_offsets"];
  MT_CHECK_AS(IoError, offsets.is_array() && offsets.size() == 2, "cannot read '", path,
              "': tensor '", name, "' has data_offsets ", json_text(offsets),
              ", not a list [begin, end]");
  e.begin = unsigned_field(offsets[0], path, name, "data_offsets", 0);
  e.end = unsigned_field(offsets[1], path, name, "data_offsets", 1);
  MT_CHECK_AS(IoError, e.begin <= e.end, "cannot read '", path, "': tensor '", name,
              "' has data_offsets [", e.begin, ", ", e.end, "] with begin > end");
  return e;
}

void check_entry_size(const Entry& e, uint64_t buffer_bytes, const std::string& path) {
  MT_CHECK_AS(IoError, e.end <= buffer_bytes, "cannot read '", path, "': tensor '", e.name,
              "' has data_offsets [", e.begin, ", ", e.end, "] beyond the data buffer (",
              buffer_bytes, " bytes); truncated?");
  int64_t want = static_cast<int64_t>(e.type.item_size);
  for (int64_t d : e.dims)
    MT_CHECK_AS(IoError, !__builtin_mul_overflow(want, d, &want), "cannot read '", path,
                "': tensor '", e.name, "' has shape ", dims_str(e.dims),
                ", too large to address (its byte count "
                "does not fit in 64 bits)");
  MT_CHECK_AS(IoError, e.end - e.begin == uint64_t(want), "cannot read '", path, "': tensor '",
              e.name, "' has data_offsets [", e.begin, ", ", e.end, "] (", e.end - e.begin,
              " bytes) but shape ", dims_str(e.dims), " of ", e.type.name, " needs ", want,
              " bytes");
}

// The spec requires the entries to cover the buffer exactly: sorted by offset, each begins where
// the previous ends and the last ends at the end of the file.
void check_tiling(const std::vector<Entry>& sorted, uint64_t buffer_bytes,
                  const std::string& path) {
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : sorted) {
    MT_CHECK_AS(IoError, e.begin >= covered, "cannot read '", path, "': tensors '", previous->name,
                "' [", previous->begin, ", ", previous->end, "] and '", e.name, "' [", e.begin,
                ", ", e.end, "] overlap");
    MT_CHECK_AS(IoError, e.begin == covered, "cannot read '", path, "': data bytes [", covered,
                ", ", e.begin, ") belong to no tensor (a hole before tensor '", e.name, "')");
    covered = e.end;
    previous = &e;
  }
  MT_CHECK_AS(IoError, covered == buffer_bytes, "cannot read '", path, "': data bytes [", covered,
              ", ", buffer_bytes, ") at the end of the file belong to no tensor");
}

Tensor read_entry(InputFile& file, const Entry& e) {
  Tensor t = Tensor::empty(Shape(e.dims), e.type.dtype, Device::cpu());
  const std::size_t bytes = static_cast<std::size_t>(e.end - e.begin);
  if (bytes == 0) return t;
  if (!e.type.widen) {
    file.read(t.raw_data(), bytes);
    return t;
  }
  std::vector<uint16_t> raw(static_cast<std::size_t>(t.numel()));
  file.read(raw.data(), bytes);
  float* out = t.data<float>();
  const bool bf16 = e.type.name == "BF16";
  for (std::size_t i = 0; i < raw.size(); ++i)
    out[i] = bf16 ? to_float(BFloat16{raw[i]}) : to_float(Half{raw[i]});
  return t;
}

}  // namespace

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  std::string names;
  for (std::size_t i = 0; i < tensors.size() && i < 10; ++i)
    names += (i ? ", " : "") + tensors[i].first;
  if (tensors.size() > 10) names += ", ...";
  MT_THROW(ValueError, "no tensor named '", name, "' (the file has ", tensors.size(), ": ", names,
           ")");
}

SafetensorsFile read_safetensors(const std::string& path, Device device) {
  check_available(device);  // fail before reading a large file, not after
  InputFile file(path);
  MT_CHECK_AS(IoError, file.size() >= 8, "cannot read '", path, "': not a safetensors file (",
              file.size(), " bytes; it starts with an 8-byte header length)");
  unsigned char len_le[8];
  file.read(len_le, 8);
  uint64_t header_len = 0;
  for (int b = 0; b < 8; ++b) header_len |= uint64_t(len_le[b]) << (8 * b);
  MT_CHECK_AS(IoError, header_len <= kMaxHeaderBytes, "cannot read '", path, "': header length ",
              header_len, " is over the 100 MB limit; not a safetensors file?");
  MT_CHECK_AS(IoError, header_len <= file.size() - 8, "cannot read '", path, "': header length ",
              header_len, " runs past the end of the file (", file.size(), " bytes); truncated?");
  std::string text(static_cast<std::size_t>(header_len), '\0');
  file.read(text.data(), text.size());
  MT_CHECK_AS(IoError, !text.empty() && text[0] == '{', "cannot read '", path,
              "': the header does not start with '{'; not a safetensors file?");
  std::vector<std::string> keys;
  const Json header = parse_json(text, path, keys);
  MT_CHECK_AS(IoError, header.is_object(), "cannot read '", path,
              "': the header is not a JSON object");

  SafetensorsFile out;
  std::vector<Entry> entries;
  entries.reserve(keys.size());
  const uint64_t buffer_bytes = file.size() - 8 - header_len;
  for (const std::string& key : keys) {
    const Json& value = header.at(key);
    if (key != kMetadataKey) {
      entries.push_back(parse_entry(key, value, path));
      check_entry_size(entries.back(), buffer_bytes, path);
      continue;
    }
    MT_CHECK_AS(IoError, value.is_object(), "cannot read '", path, "': \"__metadata__\" is ",
                json_text(value), ", not an object of strings");
    for (const auto& m : value.items()) {
      MT_CHECK_AS(IoError, m.value().is_string(), "cannot read '", path, "': __metadata__[\"",
                  m.key(), "\"] is ", json_text(m.value()), ", not a string");
      out.metadata[m.key()] = m.value().get<std::string>();
    }
  }
  // Stable: empty tensors sharing an offset keep their header order.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_tiling(entries, buffer_bytes, path);

  for (const Entry& e : entries) out.tensors.emplace_back(e.name, read_entry(file, e).to(device));
  return out;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Everything is checked before the file is opened.
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    MT_CHECK_AS(ValueError, !name.empty(), "write_safetensors('", path,
                "'): a tensor has an empty name");
    MT_CHECK_AS(ValueError, name != kMetadataKey, "write_safetensors('", path,
                "'): \"__metadata__\" is reserved and cannot name a tensor");
    MT_CHECK_AS(ValueError, seen.insert(name).second, "write_safetensors('", path,
                "'): two tensors are named '", name, "'");
    MT_CHECK_AS(ValueError, t.defined(), "write_safetensors('", path, "'): tensor '", name,
                "' is undefined");
  }
  const auto format = metadata.find("format");
  MT_CHECK_AS(ValueError, format == metadata.end() || format->second == "pt", "write_safetensors('",
              path, "'): metadata \"format\" is \"", format->second,
              "\", but minitrain files are \"pt\" (loadable by PyTorch); leave it out");

  OrderedJson header = OrderedJson::object();
  OrderedJson& meta = header[kMetadataKey] = OrderedJson::object();
  meta["format"] = "pt";  // first, as safetensors.torch.save_file writes it
  for (const auto& [k, v] : metadata) meta[k] = v;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", safetensors_dtype(t.dtype())},
                    {"shape", t.shape().dims()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const OrderedJson::exception& e) {
    MT_THROW(ValueError, "write_safetensors('", path,
             "'): tensor names and metadata must be valid UTF-8 (", e.what(), ")");
  }
  // Pad with spaces (the spec allows trailing whitespace) so the data starts 8-byte aligned.
  text.append((kDataAlign - (8 + text.size()) % kDataAlign) % kDataAlign, ' ');

  unsigned char len_le[8];
  for (int b = 0; b < 8; ++b)
    len_le[b] = static_cast<unsigned char>((uint64_t(text.size()) >> (8 * b)) & 0xFF);
  AtomicFile file(path);
  file.write(len_le, 8);
  file.write(text);
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.to(Device::cpu());  // one at a time: peak host memory is one tensor
    if (host.nbytes() > 0) file.write(host.raw_data(), host.nbytes());
  }
  file.commit();
}

}  // namespace minitrain
