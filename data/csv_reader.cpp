// CSV tables with a header row (RFC 4180 quoting, LF or CRLF line ends). The whole file is read
// at once and scanned in place: no string per cell, numbers parsed straight from the buffer with
// std::from_chars, rows written straight into the dataset's tensors. A million rows of ten
// columns (~80 MB) parse in well under a second; the disk is the bound.
//
// Numbers are parsed as float64 and rounded to float32, as pandas.read_csv followed by
// torch.tensor(..., dtype=torch.float32) would. Missing values ("", "nan", "inf") are errors,
// not silent NaNs: a NaN in the data would only show up later as a non-finite loss.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/class_labels.h"
#include "data/readers.h"

namespace minitrain {

namespace {

struct Cell {
  const char* begin;
  const char* end;
  bool quoted;
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// The text of a cell for a message: quotes undone, long cells cut short.
std::string shown(const Cell& c) {
  std::string s(c.begin, c.end);
  if (c.quoted) {
    for (std::size_t i = 0; (i = s.find("\"\"", i)) != std::string::npos; ++i) s.erase(i, 1);
  }
  constexpr std::size_t kMaxShown = 40;
  if (s.size() > kMaxShown) s = s.substr(0, kMaxShown) + "...";
  return s;
}

// Splits the buffer into records of cells. Blank lines (only spaces, tabs or '\r') are skipped;
// spaces around a cell are not part of it; a quoted cell may hold commas, doubled quotes and
// line breaks.
class CsvScanner {
 public:
  CsvScanner(const std::string& path, const char* begin, const char* end)
      : path_(path), p_(begin), end_(end) {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;  // a UTF-8 BOM (Excel)
  }

  /// The next record's cells; false at the end of the input. `line` is the record's first line.
  bool next(std::vector<Cell>& cells, int64_t& line) {
    if (!skip_blank_lines()) return false;
    line = line_;
    cells.clear();
    for (;;) {
      while (p_ < end_ && is_blank(*p_)) ++p_;
      cells.push_back(p_ < end_ && *p_ == '"' ? quoted_cell(line) : plain_cell());
      if (p_ == end_) return true;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '\r' && (p_ + 1 == end_ || p_[1] == '\n')) ++p_;
      if (p_ == end_) return true;
      if (*p_ == '\n') {
        ++p_;
        ++line_;
        return true;
      }
      MT_THROW(IoError, path_, ":", line_, ": unexpected '", std::string(1, *p_),
               "' after the closing quote of cell ", cells.size(),
               "; a quoted cell must end at a comma or the end of the line");
    }
  }

 private:
  bool skip_blank_lines() {
    for (;;) {
      const char* q = p_;
      while (q < end_ && (is_blank(*q) || *q == '\r')) ++q;
      if (q == end_) {
        p_ = end_;
        return false;
      }
      if (*q != '\n') return true;
      p_ = q + 1;
      ++line_;
    }
  }

  Cell plain_cell() {
    const char* b = p_;
    while (p_ < end_ && *p_ != ',' && *p_ != '\n') ++p_;
    const char* e = p_;
    while (e > b && (is_blank(e[-1]) || e[-1] == '\r')) --e;
    return Cell{b, e, false};
  }

  Cell quoted_cell(int64_t record_line) {
    const char* b = ++p_;
    for (;;) {
      const char* q =
          static_cast<const char*>(std::memchr(p_, '"', static_cast<size_t>(end_ - p_)));
      MT_CHECK_AS(IoError, q != nullptr, path_, ":", record_line,
                  ": a quoted cell is never closed (missing '\"')");
      for (const char* c = p_; c < q; ++c) line_ += *c == '\n';
      if (q + 1 < end_ && q[1] == '"') {  // "" stands for one quote character
        p_ = q + 2;
        continue;
      }
      p_ = q + 1;
      while (p_ < end_ && is_blank(*p_)) ++p_;
      return Cell{b, q, true};
    }
  }

  const std::string& path_;
  const char* p_;
  const char* end_;
  int64_t line_ = 1;
};

// Why a cell is not a usable number, or nullptr when `out` holds its value as written (float64).
const char* parse_double(const Cell& cell, double& out) {
  const char* b = cell.begin;
  const char* e = cell.end;
  if (cell.quoted) {  // spaces inside the quotes are as harmless as outside
    while (b < e && is_blank(*b)) ++b;
    while (e > b && is_blank(e[-1])) --e;
  }
  if (b == e) return "empty cell";
  if (*b == '+' && e - b > 1 && (b[1] != '-' && b[1] != '+')) ++b;  // from_chars takes no '+'
  double v = 0;
  const auto [ptr, ec] = std::from_chars(b, e, v);
  if (ec == std::errc::invalid_argument || ptr != e) return "is not a number";
  if (ec == std::errc::result_out_of_range) {
    // Overflow or underflow: strtod tells them apart (an underflow rounds to 0 or a subnormal).
    v = std::strtod(std::string(b, e).c_str(), nullptr);
    if (std::isinf(v)) return "is too large for float32";
  }
  if (!std::isfinite(v)) return "is not a finite number";
  if (std::fabs(v) > std::numeric_limits<float>::max()) return "is too large for float32";
  out = v;
  return nullptr;
}

// The same, rounded to float32.
const char* parse_number(const Cell& cell, float& out) {
  double v = 0;
  const char* why = parse_double(cell, v);
  if (why == nullptr) out = static_cast<float>(v);
  return why;
}

std::string header_list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && s.size() < 200; ++i)
    s += (i ? ", " : "") + ("'" + excerpt(names[i], 40) + "'");
  if (s.size() >= 200) s += ", ... (" + std::to_string(names.size()) + " columns)";
  return s;
}

// What to do with a named target column that the header lacks: an error (training data), or
// skip it (prediction: the targets are dropped, so only the features are read at all).
enum class MissingTarget { error, skip };

// The table split into features X and targets Y (one column per target found).
// A cell's text as the user wrote it: quotes removed, "" read as ".
std::string cell_text(const Cell& c) {
  std::string t(c.begin, c.end);
  if (c.quoted)
    for (std::size_t i = 0; (i = t.find("\"\"", i)) != std::string::npos; ++i) t.erase(i, 1);
  return t;
}

// pandas.read_csv's default na_values other than "" (an empty label is refused where it is read).
bool is_missing_marker(const std::string& text) {
  static const char* const kMarkers[] = {
      "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
      "<NA>", "N/A",      "NA",  "NULL",    "NaN",      "None", "n/a",  "nan",    "null"};
  for (const char* m : kMarkers)
    if (text == m) return true;
  return false;
}

// The label column's cells as class indices (see load_csv_dataset's CsvClassLabels). Labels are
// held as float32 (Note [class indices as floats] in nn/loss.h), so a numeric label is checked as
// written, before any rounding: 1.00000001 and 2.9999999 would otherwise become classes 1 and 3,
// and 16777217 class 16777216.
void map_class_labels(const std::string& path, const std::string& column,
                      const std::vector<std::string>& cells, const std::vector<int64_t>& lines,
                      CsvClassLabels& labels, float* y) {
  const auto n = static_cast<int64_t>(cells.size());
  const auto at = [&](int64_t i) {
    return path + ":" + std::to_string(lines[static_cast<std::size_t>(i)]) + ": column '" +
           excerpt(column, 40) + "': label '" + excerpt(cells[static_cast<std::size_t>(i)], 40) +
           "'";
  };
  if (labels.names.empty()) {
    int64_t first_text = -1;
    std::vector<double> values(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n && first_text < 0; ++i) {
      const std::string& text = cells[static_cast<std::size_t>(i)];
      const Cell c{text.data(), text.data() + text.size(), false};
      if (parse_double(c, values[static_cast<std::size_t>(i)]) != nullptr) first_text = i;
    }
    if (first_text < 0) {  // class numbers; the caller checks them against the classes
      for (int64_t i = 0; i < n; ++i) {
        const double v = values[static_cast<std::size_t>(i)];
        MT_CHECK_AS(IoError, v == std::floor(v), at(i),
                    " is not an integer; a numeric class label must be a whole number as written "
                    "(0, 1, 2, ...), or give every label as text");
        MT_CHECK_AS(IoError, std::fabs(v) <= kMaxExactClassLabel, at(i), " is beyond ",
                    int64_t{kMaxExactClassLabel},
                    " (2^24), the largest class index that float32 labels hold exactly");
        y[i] = static_cast<float>(v);
      }
      return;
    }
    // A missing value among the labels would otherwise become a class of its own and turn a
    // column of class numbers into text classes (sorted "10" before "2").
    for (int64_t i = first_text; i < n; ++i)
      MT_CHECK_AS(IoError, !is_missing_marker(cells[static_cast<std::size_t>(i)]), at(i),
                  " is a missing value (as pandas.read_csv reads it), not a class; drop the row, "
                  "or give it a class");
    MT_CHECK_AS(IoError, !labels.held_out, at(first_text),
                " is not a number, but the training labels are class numbers (no class names were "
                "stored with them), so held-out labels must be class numbers too");
    labels.names = cells;
    std::sort(labels.names.begin(), labels.names.end());
    labels.names.erase(std::unique(labels.names.begin(), labels.names.end()), labels.names.end());
  }
  std::unordered_map<std::string, int64_t> index;
  for (std::size_t k = 0; k < labels.names.size(); ++k)
    index.emplace(labels.names[k], static_cast<int64_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    const std::string& cell = cells[static_cast<std::size_t>(i)];
    const auto it = index.find(cell);
    MT_CHECK_AS(IoError, it != index.end(), at(i), " is not one of the ", labels.names.size(),
                " classes of the training data (", header_list(labels.names), ")");
    y[i] = static_cast<float>(it->second);
  }
}

TensorDataset read_csv_table(const std::string& path,
                             const std::vector<std::string>& wanted_targets, MissingTarget missing,
                             CsvClassLabels* labels = nullptr,
                             CsvFeatureColumns* features = nullptr) {
  const std::string text = read_file_bytes(path);
  CsvScanner scanner(path, text.data(), text.data() + text.size());

  // ---- header ----
  std::vector<Cell> cells;
  int64_t line = 0;
  MT_CHECK_AS(IoError, scanner.next(cells, line), path,
              ": the file is empty; a CSV file needs a header row of column names and data rows");
  const int64_t header_line = line;
  std::vector<std::string> names;
  std::unordered_map<std::string, int64_t> column_of;
  for (const Cell& c : cells) {
    std::string name(c.begin, c.end);
    if (c.quoted) {
      for (std::size_t i = 0; (i = name.find("\"\"", i)) != std::string::npos; ++i)
        name.erase(i, 1);
    }
    const int64_t col = static_cast<int64_t>(names.size());
    const auto [it, inserted] = column_of.emplace(name, col);
    MT_CHECK_AS(IoError, inserted, path, ":", header_line, ": column name '", excerpt(name, 40),
                "' appears twice in the header (columns ", it->second + 1, " and ", col + 1,
                "); column names must be unique");
    names.push_back(std::move(name));
  }
  const int64_t ncols = static_cast<int64_t>(names.size());

  // ---- which column goes where: role[c] >= 0 is a feature index, < 0 is -(target index) - 1 ----
  std::vector<int64_t> role(static_cast<std::size_t>(ncols), 0);
  std::vector<bool> is_target(static_cast<std::size_t>(ncols), false);
  std::vector<std::string> target_columns;
  for (const std::string& wanted : wanted_targets) {
    const auto it = column_of.find(wanted);
    if (it == column_of.end() && missing == MissingTarget::skip) continue;
    MT_CHECK_AS(IoError, it != column_of.end(), path, ": no column '", excerpt(wanted, 40),
                "' for the targets; the header (line ", header_line, ") has ", header_list(names));
    MT_CHECK_AS(IoError, !is_target[static_cast<std::size_t>(it->second)], path,
                ": target column '", wanted, "' is named twice in the target columns");
    is_target[static_cast<std::size_t>(it->second)] = true;
    role[static_cast<std::size_t>(it->second)] = -static_cast<int64_t>(target_columns.size()) - 1;
    target_columns.push_back(wanted);
  }
  // ---- --ignore-columns and --keep-columns: neither feature nor target; kept ones echoed ----
  std::vector<bool> is_ignored(static_cast<std::size_t>(ncols), false);
  std::vector<bool> is_kept(static_cast<std::size_t>(ncols), false);
  std::vector<int64_t> kept_column;  // header index of each kept column, in the order given
  if (features != nullptr) {
    const auto mark = [&](const std::vector<std::string>& list, const char* flag,
                          std::vector<bool>& flags) {
      for (const std::string& name : list) {
        const auto it = column_of.find(name);
        MT_CHECK_AS(IoError, it != column_of.end(), path, ": ", flag, " names column '",
                    excerpt(name, 40), "', which the header (line ", header_line,
                    ") lacks; it has ", header_list(names));
        const auto c = static_cast<std::size_t>(it->second);
        MT_CHECK_AS(IoError, !flags[c], path, ": ", flag, " names column '", excerpt(name, 40),
                    "' twice");
        flags[c] = true;
      }
    };
    mark(features->ignored, "--ignore-columns", is_ignored);
    mark(features->kept, "--keep-columns", is_kept);
    for (const std::string& name : features->ignored) {
      const auto c = static_cast<std::size_t>(column_of.at(name));
      MT_CHECK_AS(IoError, !is_kept[c], path, ": column '", excerpt(name, 40),
                  "' is named by both --ignore-columns and --keep-columns; --keep-columns alone "
                  "passes it through without making it a feature");
      MT_CHECK_AS(IoError, !is_target[c], path, ": column '", excerpt(name, 40),
                  "' is named by --ignore-columns but is a target (", header_list(target_columns),
                  "); a column is a feature, a target or ignored, one of the three");
      MT_CHECK_AS(
          IoError,
          std::find(features->names.begin(), features->names.end(), name) == features->names.end(),
          path, ": column '", excerpt(name, 40),
          "' is named by --ignore-columns but the model takes it as a feature (",
          header_list(features->names), ")");
    }
    // The training's ignored columns, where this table has them and no flag says otherwise.
    for (const std::string& name : features->model_ignored) {
      const auto it = column_of.find(name);
      if (it == column_of.end()) continue;
      const auto c = static_cast<std::size_t>(it->second);
      if (is_kept[c] || is_target[c] ||
          std::find(features->names.begin(), features->names.end(), name) != features->names.end())
        continue;
      is_ignored[c] = true;
    }
    for (const std::string& name : features->kept) kept_column.push_back(column_of.at(name));
    features->kept_cells.clear();
  }
  const auto passed_over = [&](int64_t c) {  // neither feature nor target, unless named one
    return is_ignored[static_cast<std::size_t>(c)] || is_kept[static_cast<std::size_t>(c)];
  };
  const int64_t out_dim = static_cast<int64_t>(target_columns.size());
  MT_CHECK_AS(ValueError, labels == nullptr || out_dim == 1, path, ": a classifier's targets are ",
              "one label column, but ", out_dim, " target columns were named");
  const int64_t label_column = labels == nullptr ? -1 : column_of.at(target_columns.front());
  std::vector<std::string> label_cells;  // the label column's text, mapped once all is read
  std::vector<int64_t> label_lines;
  int64_t in_dim = 0;
  for (int64_t c = 0; c < ncols; ++c)
    in_dim += !is_target[static_cast<std::size_t>(c)] && !passed_over(c);
  MT_CHECK_AS(IoError, in_dim > 0 || (features != nullptr && !features->names.empty()), path,
              ": every column (", header_list(names),
              ") is a target, ignored or kept, which leaves no features");
  if (features != nullptr && !features->names.empty()) {
    // By name: a table whose columns come in another order is read as the model was trained
    // (by position it once gave 'virginica' for setosa rows, with exit 0).
    const std::vector<std::string>& want = features->names;
    std::vector<std::string> missing_names;
    std::vector<bool> is_feature(static_cast<std::size_t>(ncols), false);
    for (std::size_t k = 0; k < want.size(); ++k) {
      const auto it = column_of.find(want[k]);
      if (it == column_of.end()) {
        missing_names.push_back(want[k]);
        continue;
      }
      MT_CHECK_AS(IoError, !is_target[static_cast<std::size_t>(it->second)], path, ": column '",
                  excerpt(want[k], 40),
                  "' is named a target, but the model takes it as a feature (", header_list(want),
                  ")");
      is_feature[static_cast<std::size_t>(it->second)] = true;
      role[static_cast<std::size_t>(it->second)] = static_cast<int64_t>(k);
    }
    MT_CHECK_AS(IoError, missing_names.empty(), path, ": no column ", header_list(missing_names),
                " in the header (line ", header_line, ": ", header_list(names),
                "); the model was trained on the feature columns ", header_list(want),
                " (read by name, in any order)");
    std::vector<std::string> unknown;
    for (int64_t c = 0; c < ncols; ++c)
      if (!is_feature[static_cast<std::size_t>(c)] && !is_target[static_cast<std::size_t>(c)] &&
          !passed_over(c))
        unknown.push_back(names[static_cast<std::size_t>(c)]);
    // The advice names only the flags of the command that runs (evaluate has no --keep-columns).
    MT_CHECK_AS(IoError, unknown.empty(), path, ": column ", header_list(unknown),
                " is neither one of the model's feature columns (", header_list(want),
                ") nor a target; remove it from the table, or name it with --ignore-columns",
                features->keep_flag ? " (or --keep-columns to pass it through to the output)" : "");
    // A kept column the model takes as a feature is read as one too; other kept ones are not.
    for (int64_t c = 0; c < ncols; ++c)
      if (is_feature[static_cast<std::size_t>(c)]) is_kept[static_cast<std::size_t>(c)] = false;
    in_dim = static_cast<int64_t>(want.size());
  } else {
    for (int64_t c = 0, f = 0; c < ncols; ++c)
      if (!is_target[static_cast<std::size_t>(c)] && !passed_over(c))
        role[static_cast<std::size_t>(c)] = f++;
    if (features != nullptr)
      for (int64_t c = 0; c < ncols; ++c)
        if (!is_target[static_cast<std::size_t>(c)] && !passed_over(c))
          features->names.push_back(names[static_cast<std::size_t>(c)]);
  }

  // ---- rows, written straight into X and Y ----
  // Two upper bounds on the number of rows, both linear in the file: its line count, and its
  // length over the width (every row but the last holds ncols - 1 commas and a line end). The
  // second keeps a file of one row and a million blank lines from sizing a million rows.
  const int64_t newlines = static_cast<int64_t>(std::count(text.begin(), text.end(), '\n'));
  const int64_t by_width = static_cast<int64_t>(text.size()) / ncols + 1;
  const int64_t capacity = std::max<int64_t>(std::min(newlines, by_width), 1);
  Tensor x = Tensor::empty({capacity, in_dim});
  Tensor y = Tensor::empty({capacity, out_dim});
  float* xs = x.data<float>();
  float* ys = y.data<float>();
  int64_t rows = 0;
  while (scanner.next(cells, line)) {
    const int64_t found = static_cast<int64_t>(cells.size());
    MT_CHECK_AS(IoError, found == ncols, path, ":", line, ": expected ", ncols,
                " cells (as in the header) but found ", found);
    float* xr = xs + rows * in_dim;
    float* yr = ys + rows * out_dim;
    for (const int64_t c : kept_column)
      features->kept_cells.push_back(cell_text(cells[static_cast<std::size_t>(c)]));
    for (int64_t c = 0; c < ncols; ++c) {
      const auto k = static_cast<std::size_t>(c);
      if (is_ignored[k] || (is_kept[k] && !is_target[k])) continue;  // not read as a number
      const Cell& cell = cells[static_cast<std::size_t>(c)];
      if (c == label_column) {
        label_cells.push_back(cell_text(cell));
        label_lines.push_back(line);
        MT_CHECK_AS(IoError, !label_cells.back().empty(), path, ":", line, ": column '",
                    excerpt(names[static_cast<std::size_t>(c)], 40), "' (", c + 1,
                    "): empty label");
        continue;
      }
      const int64_t r = role[static_cast<std::size_t>(c)];
      // Features only (prediction): a target column is not read, so a text label is no error.
      if (r < 0 && missing == MissingTarget::skip) continue;
      float v = 0;
      if (const char* why = parse_number(cell, v)) {
        const std::string what =
            std::strcmp(why, "empty cell") == 0 ? std::string(why) : "'" + shown(cell) + "' " + why;
        // A text label in a regression's target column: the user most likely meant classes.
        const bool text_target = r < 0 && std::strcmp(why, "is not a number") == 0;
        MT_THROW(IoError, path, ":", line, ": column '",
                 excerpt(names[static_cast<std::size_t>(c)], 40), "' (", c + 1, "): ", what,
                 text_target ? "; a target column of text class labels needs a classifier: "
                               "train with --loss cross_entropy (one output per class)"
                             : "");
      }
      if (r >= 0) {
        xr[r] = v;
      } else {
        yr[-r - 1] = v;
      }
    }
    ++rows;
  }
  MT_CHECK_AS(IoError, rows > 0, path, ": the header (line ", header_line,
              ") is followed by no data rows");
  if (labels != nullptr)
    map_class_labels(path, target_columns.front(), label_cells, label_lines, *labels, ys);
  if (rows < capacity) {
    x = x.narrow(0, rows);
    y = y.narrow(0, rows);
  }
  return TensorDataset(std::move(x), std::move(y));
}

}  // namespace

TensorDataset load_csv_dataset(const std::string& path,
                               const std::vector<std::string>& target_columns,
                               CsvClassLabels* class_labels, CsvFeatureColumns* feature_columns) {
  MT_CHECK_AS(ValueError, !target_columns.empty(), "load_csv_dataset('", path,
              "'): no target columns given; name the columns to predict (--target-columns a,b)");
  return read_csv_table(path, target_columns, MissingTarget::error, class_labels, feature_columns);
}

Tensor load_csv_features(const std::string& path, const std::vector<std::string>& drop_columns,
                         CsvFeatureColumns* feature_columns) {
  return read_csv_table(path, drop_columns, MissingTarget::skip, nullptr, feature_columns)
      .features();
}

}  // namespace minitrain
