// .npy reading and writing. A file is: magic "\x93NUMPY", a version (1.0/2.0/3.0), a little-endian
// header length (2 bytes in 1.0, 4 after), a Python dict literal describing the array, then the
// raw elements. The dict is parsed by a small literal parser (no eval), and every field checked.

#include "core/npy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace minitrain {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kAlign = 64;                // NumPy's ARRAY_ALIGN: data starts on 64 bytes
constexpr std::size_t kGrowthAxisMaxDigits = 21;  // NumPy's spare room to grow the first axis
constexpr std::size_t kMaxShownHeader = 200;      // header text quoted in error messages
// NumPy's headers nest at most a few levels (a structured descr's list of tuples); a bound keeps a
// hostile "[[[[..." from recursing until the stack overflows.
constexpr int kMaxHeaderNesting = 32;

bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

void byte_swap(void* data, std::size_t count, std::size_t item_size) {
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < count; ++i, p += item_size) std::reverse(p, p + item_size);
}

// ---- a Python literal, as far as .npy headers use them ----

struct PyValue {
  enum class Kind { Str, Int, Bool, None, Tuple, List };
  Kind kind = Kind::None;
  std::string str;
  int64_t integer = 0;
  bool boolean = false;
  std::vector<PyValue> items;
};

const char* kind_name(PyValue::Kind k) {
  switch (k) {
    case PyValue::Kind::Str:
      return "a string";
    case PyValue::Kind::Int:
      return "an integer";
    case PyValue::Kind::Bool:
      return "a bool";
    case PyValue::Kind::None:
      return "None";
    case PyValue::Kind::Tuple:
      return "a tuple";
    case PyValue::Kind::List:
      return "a list";
  }
  return "?";
}

std::string shown(const std::string& header) {
  std::string s = header.substr(0, kMaxShownHeader);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return header.size() > kMaxShownHeader ? s + "..." : s;
}

/// Parses `{'key': value, ...}` where values are str, int, bool, None, tuples and lists: what
/// NumPy's writer produces (and ast.literal_eval accepts for it). No escapes, no nested dicts.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  std::vector<std::pair<std::string, PyValue>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> entries;
    skip_space();
    expect('{', "the header to start with '{'");
    while (true) {
      skip_space();
      if (peek() == '}') break;
      if (peek() != '\'' && peek() != '"') fail("expected a quoted key or '}'");
      std::string key = parse_string();
      for (const auto& e : entries)
        if (e.first == key) fail(detail::concat("duplicate key '", key, "'"));
      skip_space();
      expect(':', "':' after a key");
      skip_space();
      entries.emplace_back(std::move(key), parse_value());
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail("expected ',' or '}' after a value");
      }
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    return entries;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) != nullptr) ++pos_;
  }
  void expect(char c, const char* what) {
    if (peek() != c) fail(detail::concat("expected ", what));
    ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    MT_THROW(IoError, "cannot read '", path_, "': malformed .npy header: ", what, " at offset ",
             pos_, " in \"", shown(text_), "\"");
  }

  PyValue parse_value(int depth = 0) {
    const char c = peek();
    if (c == '\'' || c == '"') {
      PyValue v;
      v.kind = PyValue::Kind::Str;
      v.str = parse_string();
      return v;
    }
    if (c == '(' || c == '[') return parse_sequence(depth + 1);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return parse_int();
    for (const char* word : {"True", "False", "None"}) {
      const std::size_t n = std::strlen(word);
      if (text_.compare(pos_, n, word) == 0) {
        pos_ += n;
        PyValue v;
        v.kind = word[0] == 'N' ? PyValue::Kind::None : PyValue::Kind::Bool;
        v.boolean = word[0] == 'T';
        return v;
      }
    }
    fail("expected a string, integer, True/False/None, tuple or list");
  }

  std::string parse_string() {
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail("escape sequences in strings are not supported");
      if (text_[pos_] == '\n') fail("unterminated string");
      ++pos_;
    }
    if (pos_ == text_.size()) fail("unterminated string");
    return text_.substr(start, pos_++ - start);
  }

  PyValue parse_int() {
    bool negative = false;
    if (peek() == '-' || peek() == '+') negative = text_[pos_++] == '-';
    if (!(peek() >= '0' && peek() <= '9')) fail("expected digits");
    uint64_t magnitude = 0;
    constexpr uint64_t kLimit = uint64_t(std::numeric_limits<int64_t>::max());
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t digit = uint64_t(text_[pos_++] - '0');
      if (magnitude > (kLimit - digit) / 10) fail("integer too large");
      magnitude = magnitude * 10 + digit;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') fail("expected an integer, not a float");
    PyValue v;
    v.kind = PyValue::Kind::Int;
    v.integer = negative ? -int64_t(magnitude) : int64_t(magnitude);
    return v;
  }

  // In Python "(3)" is the integer 3, and "(3,)" a one-element tuple: a tuple needs a comma
  // unless it is empty. Lists have no such rule.
  PyValue parse_sequence(int depth) {
    if (depth > kMaxHeaderNesting)
      fail(detail::concat("tuples and lists nested more than ", kMaxHeaderNesting, " deep"));
    const char open = text_[pos_++];
    const char close = open == '(' ? ')' : ']';
    std::vector<PyValue> items;
    bool saw_comma = false;
    while (true) {
      skip_space();
      if (peek() == close) break;
      items.push_back(parse_value(depth));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        saw_comma = true;
      } else if (peek() != close) {
        fail(detail::concat("expected ',' or '", close, "'"));
      }
    }
    ++pos_;
    if (open == '(' && items.size() == 1 && !saw_comma) return std::move(items[0]);
    PyValue v;
    v.kind = open == '(' ? PyValue::Kind::Tuple : PyValue::Kind::List;
    v.items = std::move(items);
    return v;
  }

  const std::string& text_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

// ---- header fields ----

struct ArrayInfo {
  DType dtype = DType::Float32;  // of the tensor read (float64 for an integer file)
  bool swap_bytes = false;       // the file's byte order is not the host's
  std::vector<int64_t> dims;
  char int_kind = 0;     // 'i', 'u' or 'b' for an integer or bool file; 0 for floats
  std::size_t item = 0;  // bytes per item in the file
};

// "8" -> "64": an item size in bytes as bits, or "" when it is not a plausible size (at most
// three digits, so a hostile "f4611686018427387904" cannot overflow the multiplication).
std::string item_bits(const std::string& size) {
  if (size.empty() || size.size() > 3) return "";
  for (char c : size)
    if (c < '0' || c > '9') return "";
  return std::to_string(std::stoi(size) * 8);
}

// "<i8" -> "int64": the name users know from NumPy, for the error message; "" when unknown.
std::string numpy_type_name(char kind, const std::string& size) {
  const std::string bits = item_bits(size);
  if (bits.empty() && std::strchr("iufc", kind) != nullptr) return "";
  switch (kind) {
    case 'b':
      return "bool";
    case 'i':
      return "int" + bits;
    case 'u':
      return "uint" + bits;
    case 'f':
      return "float" + bits;
    case 'c':
      return "complex" + bits;
    case 'U':
    case 'S':
    case 'a':
      return "string";
    case 'O':
      return "object";
    case 'M':
    case 'm':
      return "datetime";
    default:
      return "";
  }
}

void parse_descr(const PyValue& v, const std::string& path, NpyIntegers integers, ArrayInfo& info) {
  MT_CHECK_AS(
      IoError, v.kind != PyValue::Kind::List, "cannot read '", path,
      "': it holds a structured array (descr is a list of fields); minitrain reads plain "
      "float32/float64 arrays: save one field, e.g. np.save(f, x['name'].astype(np.float32))");
  MT_CHECK_AS(IoError, v.kind == PyValue::Kind::Str, "cannot read '", path,
              "': 'descr' must be a string such as '<f4', not ", kind_name(v.kind));
  const std::string& d = v.str;
  // '<' little, '>' big, '=' and '|' native (NumPy accepts both for floats); no prefix is native.
  std::size_t i = 0;
  char order = '=';
  if (!d.empty() && std::strchr("<>=|", d[0]) != nullptr) order = d[i++];
  const char kind = i < d.size() ? d[i] : '\0';
  const std::string size = i + 1 <= d.size() ? d.substr(i + 1) : "";
  const bool file_little =
      order == '<' || ((order == '=' || order == '|') && host_is_little_endian());
  if (kind == 'f' && (size == "4" || size == "8")) {
    info.dtype = size == "4" ? DType::Float32 : DType::Float64;
    info.item = size == "4" ? 4 : 8;
    info.swap_bytes = file_little != host_is_little_endian();
    return;
  }
  const bool int_size = size == "1" || size == "2" || size == "4" || size == "8";
  if (integers == NpyIntegers::AsFloat64 &&
      (((kind == 'i' || kind == 'u') && int_size) || (kind == 'b' && size == "1"))) {
    info.dtype = DType::Float64;
    info.int_kind = kind;
    info.item = static_cast<std::size_t>(size[0] - '0');
    info.swap_bytes = info.item > 1 && file_little != host_is_little_endian();
    return;
  }
  const std::string name = numpy_type_name(kind, size);
  MT_CHECK_AS(IoError, name.empty(), "cannot read '", path, "': it holds ", name, " data (descr '",
              shown(d),
              "'); minitrain reads float32/float64 .npy; convert with x.astype(np.float32)");
  MT_THROW(IoError, "cannot read '", path, "': unsupported descr '", shown(d),
           "' (minitrain reads '<f4' and '<f8', or big-endian '>f4'/'>f8')");
}

ArrayInfo parse_header(const std::string& text, const std::string& path, NpyIntegers integers) {
  const auto entries = HeaderParser(text, path).parse_dict();
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [key, value] : entries) {
    if (key == "descr")
      descr = &value;
    else if (key == "fortran_order")
      fortran = &value;
    else if (key == "shape")
      shape = &value;
    else
      MT_THROW(IoError, "cannot read '", path, "': unexpected key '", key,
               "' in the .npy header (it has exactly 'descr', 'fortran_order' and 'shape')");
  }
  for (const auto& [name, field] : {std::pair<const char*, const PyValue*>{"descr", descr},
                                    {"fortran_order", fortran},
                                    {"shape", shape}})
    MT_CHECK_AS(IoError, field != nullptr, "cannot read '", path, "': the .npy header has no '",
                name, "' key (\"", shown(text), "\")");

  ArrayInfo info;
  parse_descr(*descr, path, integers, info);

  MT_CHECK_AS(IoError, shape->kind == PyValue::Kind::Tuple, "cannot read '", path,
              "': 'shape' must be a tuple of integers, not ", kind_name(shape->kind));
  for (std::size_t i = 0; i < shape->items.size(); ++i) {
    const PyValue& e = shape->items[i];
    MT_CHECK_AS(IoError, e.kind == PyValue::Kind::Int, "cannot read '", path, "': shape entry ", i,
                " is ", kind_name(e.kind), ", not an integer");
    MT_CHECK_AS(IoError, e.integer >= 0, "cannot read '", path, "': shape entry ", i, " is ",
                e.integer, " (negative)");
    info.dims.push_back(e.integer);
  }

  MT_CHECK_AS(IoError, fortran->kind == PyValue::Kind::Bool, "cannot read '", path,
              "': 'fortran_order' must be True or False, not ", kind_name(fortran->kind));
  // With fewer than two dimensions Fortran and C order are the same bytes.
  MT_CHECK_AS(IoError, !fortran->boolean || info.dims.size() < 2, "cannot read '", path,
              "': the array is stored in Fortran (column-major) order; minitrain reads C order: "
              "save np.ascontiguousarray(x) instead");
  return info;
}

// The data's byte count; a shape whose size does not fit in 64 bits names itself. The file's own
// length bounds a valid count, so an overflow can only come from a corrupt or hostile header.
uint64_t checked_byte_count(const ArrayInfo& info, const std::string& path) {
  int64_t n = static_cast<int64_t>(info.item);
  for (int64_t d : info.dims)
    if (__builtin_mul_overflow(n, d, &n))
      MT_THROW(IoError, "cannot read '", path, "': shape ", shown(dims_str(info.dims)),
               " is too large to address (its byte count does not fit in 64 bits)");
  return static_cast<uint64_t>(n);
}

// ---- writing ----

// NumPy's repr of a shape tuple: "()", "(3,)", "(2, 3)".
std::string shape_repr(const Shape& s) {
  std::string out = "(";
  for (int64_t i = 0; i < s.ndim(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.ndim() == 1 ? ",)" : ")");
}

// The bytes NumPy 1.24's np.save writes before the data, byte for byte.
// `descr` without its byte order ("f4", "i8"): the host's order is written.
std::string npy_preamble(const char* descr, const Shape& shape) {
  const char order = host_is_little_endian() ? '<' : '>';
  std::string dict =
      detail::concat("{'descr': '", order, descr,
                     "', 'fortran_order': False, 'shape': ", shape_repr(shape), ", }");
  if (shape.ndim() > 0)
    dict += std::string(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
  // Version 1.0 stores the header length in 2 bytes; use 2.0 (4 bytes) only when that overflows.
  for (int major : {1, 2}) {
    const std::size_t length_bytes = major == 1 ? 2 : 4;
    const std::size_t hlen = dict.size() + 1;  // + '\n'
    const std::size_t pad = kAlign - (kMagicLen + 2 + length_bytes + hlen) % kAlign;
    const uint64_t total = hlen + pad;
    if (major == 1 && total > 0xFFFF) continue;
    std::string out(kMagic, kMagicLen);
    out += char(major);
    out += char(0);
    for (std::size_t b = 0; b < length_bytes; ++b) out += char((total >> (8 * b)) & 0xFF);
    return out + dict + std::string(pad, ' ') + '\n';
  }
  MT_THROW(IoError, "cannot write .npy: header too large for shape ", shape.str());
}

}  // namespace

namespace {

// An integer file's items (already in host byte order) as float64, exactly: refused past 2^53.
template <typename I>
void integers_to_double(const unsigned char* bytes, int64_t n, double* out,
                        const std::string& path) {
  for (int64_t i = 0; i < n; ++i) {
    I v;
    std::memcpy(&v, bytes + i * static_cast<int64_t>(sizeof(I)), sizeof(I));
    const double d = static_cast<double>(v);
    MT_CHECK_AS(IoError, std::fabs(d) <= 9007199254740992.0, "cannot read '", path, "': item ", i,
                " (", static_cast<long long>(v), ") is too large to hold exactly as a number");
    out[i] = d;
  }
}

void convert_integers(const ArrayInfo& info, const std::vector<unsigned char>& bytes, int64_t n,
                      double* out, const std::string& path) {
  const bool is_signed = info.int_kind == 'i';
  switch (info.item) {
    case 1:
      return is_signed ? integers_to_double<int8_t>(bytes.data(), n, out, path)
                       : integers_to_double<uint8_t>(bytes.data(), n, out, path);
    case 2:
      return is_signed ? integers_to_double<int16_t>(bytes.data(), n, out, path)
                       : integers_to_double<uint16_t>(bytes.data(), n, out, path);
    case 4:
      return is_signed ? integers_to_double<int32_t>(bytes.data(), n, out, path)
                       : integers_to_double<uint32_t>(bytes.data(), n, out, path);
    default:
      return is_signed ? integers_to_double<int64_t>(bytes.data(), n, out, path)
                       : integers_to_double<uint64_t>(bytes.data(), n, out, path);
  }
}

// The header of an open .npy, checked field by field; the file is left at its first data byte.
ArrayInfo read_layout(InputFile& file, const std::string& path, NpyIntegers integers,
                      uint64_t& data_start) {
  constexpr std::size_t kFixed = kMagicLen + 2;
  MT_CHECK_AS(IoError, file.size() >= kFixed + 2, "cannot read '", path, "': not a .npy file (",
              file.size(), " bytes, shorter than the smallest .npy header)");
  unsigned char prefix[kFixed];
  file.read(prefix, kFixed);
  MT_CHECK_AS(IoError, std::memcmp(prefix, kMagic, kMagicLen) == 0, "cannot read '", path,
              "': not a .npy file (it does not start with \"\\x93NUMPY\"; was it written with "
              "np.save?)");
  const int major = prefix[6], minor = prefix[7];
  MT_CHECK_AS(IoError, minor == 0 && major >= 1 && major <= 3, "cannot read '", path,
              "': unsupported .npy format version ", major, ".", minor,
              " (minitrain reads 1.0, 2.0 and 3.0)");

  const std::size_t length_bytes = major == 1 ? 2 : 4;
  MT_CHECK_AS(IoError, file.size() >= kFixed + length_bytes, "cannot read '", path,
              "': the file ends inside the header length field");
  unsigned char len_le[4] = {0, 0, 0, 0};
  file.read(len_le, length_bytes);
  uint64_t header_len = 0;
  for (std::size_t b = 0; b < length_bytes; ++b) header_len |= uint64_t(len_le[b]) << (8 * b);
  data_start = kFixed + length_bytes + header_len;
  MT_CHECK_AS(IoError, data_start <= file.size(), "cannot read '", path, "': header length ",
              header_len, " runs past the end of the file (", file.size(), " bytes); truncated?");

  std::string header(static_cast<std::size_t>(header_len), '\0');
  file.read(header.data(), header.size());
  const ArrayInfo info = parse_header(header, path, integers);

  const uint64_t want = checked_byte_count(info, path);
  const uint64_t have = file.size() - data_start;
  const Shape shape(info.dims);
  MT_CHECK_AS(IoError, have >= want, "cannot read '", path, "': truncated: shape ", shape.str(),
              " of ", dtype_name(info.dtype), " needs ", want, " data bytes but the file has ",
              have);
  MT_CHECK_AS(IoError, have == want, "cannot read '", path, "': ", have - want,
              " trailing bytes after the data (shape ", shape.str(), " of ", dtype_name(info.dtype),
              " needs ", want, " bytes, the file has ", have, ")");
  return info;
}

}  // namespace

NpyLayout read_npy_layout(const std::string& path) {
  InputFile file(path);
  uint64_t data_start = 0;
  const ArrayInfo info = read_layout(file, path, NpyIntegers::Refuse, data_start);
  NpyLayout l;
  l.dtype = info.dtype;
  l.shape = Shape(info.dims);
  l.data_offset = data_start;
  l.swap_bytes = info.swap_bytes;
  return l;
}

Tensor read_npy(const std::string& path, Device device, NpyIntegers integers) {
  check_available(device);  // fail before reading a large file, not after
  InputFile file(path);
  uint64_t data_start = 0;
  const ArrayInfo info = read_layout(file, path, integers, data_start);
  const uint64_t want = checked_byte_count(info, path);
  const Shape shape(info.dims);

  Tensor t = Tensor::empty(shape, info.dtype, Device::cpu());
  if (info.int_kind != 0) {
    std::vector<unsigned char> bytes(static_cast<std::size_t>(want));
    if (want > 0) file.read(bytes.data(), bytes.size());
    if (info.swap_bytes) byte_swap(bytes.data(), static_cast<std::size_t>(t.numel()), info.item);
    convert_integers(info, bytes, t.numel(), t.data<double>(), path);
  } else if (want > 0) {
    file.read(t.raw_data(), static_cast<std::size_t>(want));
    if (info.swap_bytes)
      byte_swap(t.raw_data(), static_cast<std::size_t>(t.numel()), dtype_size(info.dtype));
  }
  return t.to(device);
}

void write_npy(const std::string& path, const Tensor& t) {
  MT_CHECK_AS(ValueError, t.defined(), "write_npy('", path, "'): the tensor is undefined");
  const Tensor host = t.to(Device::cpu());
  MT_CHECK_AS(DTypeError, host.dtype() != DType::BFloat16,
              "save_npy: NumPy has no bfloat16 type; cast the tensor to float32 first");
  const char* descr = host.dtype() == DType::Float32   ? "f4"
                      : host.dtype() == DType::Float16 ? "f2"
                                                       : "f8";
  AtomicFile file(path);
  file.write(npy_preamble(descr, host.shape()));
  if (host.nbytes() > 0) file.write(host.raw_data(), host.nbytes());
  file.commit();
}

void write_npy_int64(const std::string& path, const std::vector<int64_t>& values,
                     const Shape& shape) {
  MT_CHECK_AS(ShapeError, static_cast<int64_t>(values.size()) == shape.numel(), "write_npy_int64('",
              path, "'): ", values.size(), " values for shape ", shape.str());
  AtomicFile file(path);
  file.write(npy_preamble("i8", shape));
  if (!values.empty()) file.write(values.data(), values.size() * sizeof(int64_t));
  file.commit();
}

}  // namespace minitrain
