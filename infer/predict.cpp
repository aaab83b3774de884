// `minitrain predict`: weights (the model rebuilt from their metadata, infer/trained_model.h) +
// X.npy or T.csv -> Y.npy or Y.csv.

#include "infer/predict.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/finite.h"
#include "core/npy.h"
#include "core/shape.h"
#include "core/strings.h"
#include "data/readers.h"
#include "kernels/cast.h"
#include "nn/gemm_backend.h"
#include "train/gemm_flag.h"
#include "train/run_files.h"
#include "infer/trained_model.h"

namespace minitrain {

namespace {

bool is_csv(const std::string& path, const char* flag) {
  if (ends_with(path, ".csv")) return true;
  MT_CHECK_AS(ValueError, ends_with(path, ".npy"), flag, " ", path,
              ": the extension says the format, and it is neither .npy nor .csv");
  return false;
}

// Input columns copied into the output before the predictions (--keep-columns).
struct KeptColumns {
  std::vector<std::string> names;
  std::vector<std::string> cells;  ///< row-major, rows x names.size(), as written in the input
};

// Y as CSV (RFC 4180: every text quoted where it needs it, see csv_field): the kept columns, then
// a class column (`classes` [N, 1] as the class names where the weights know them, else the
// indices) if given, then the values (`values` [N, cols], named by `value_names` where they fit,
// else y0, y1, ...), each with the 9 significant digits that give a float32 back.
void write_csv_table(const std::string& path, const KeptColumns& kept, const Tensor* classes,
                     const std::string& class_header, const std::vector<std::string>& class_names,
                     const Tensor* values, const std::vector<std::string>& value_names) {
  const int64_t k = static_cast<int64_t>(kept.names.size());
  const int64_t cols = values ? values->size(1) : 0;
  const int64_t rows = classes ? classes->size(0) : values->size(0);
  std::string text;
  std::string sep;
  for (const std::string& name : kept.names) text += std::exchange(sep, ",") + csv_field(name);
  if (classes) text += std::exchange(sep, ",") + csv_field(class_header);
  for (int64_t j = 0; j < cols; ++j)
    text += std::exchange(sep, ",") +
            (static_cast<int64_t>(value_names.size()) == cols
                 ? csv_field(value_names[static_cast<std::size_t>(j)])  // class names hold anything
                 : "y" + std::to_string(j));
  text += "\n";
  const float* v = values ? values->data<float>() : nullptr;
  const float* cls = classes ? classes->data<float>() : nullptr;
  char cell[32];
  for (int64_t i = 0; i < rows; ++i) {
    sep.clear();
    for (int64_t j = 0; j < k; ++j)
      text += std::exchange(sep, ",") + csv_field(kept.cells[static_cast<std::size_t>(i * k + j)]);
    if (cls) {
      const auto c = static_cast<std::size_t>(cls[i]);
      text += std::exchange(sep, ",") +
              (class_names.empty() ? std::to_string(c) : csv_field(class_names[c]));
    }
    for (int64_t j = 0; j < cols; ++j) {
      std::snprintf(cell, sizeof cell, "%s%.9g", std::exchange(sep, ",").c_str(),
                    double(v[i * cols + j]));
      text += cell;
    }
    text += "\n";
  }
  AtomicFile file(path);
  file.write(text);
  file.commit();
}

// A cross_entropy classifier's outputs, row by row on the host: softmax probabilities, or with
// !probabilities the class, argmax of the row (first of ties, as torch.argmax).
Tensor classify(const Tensor& logits, bool probabilities) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const float* z = logits.data<float>();
  const int64_t out_cols = probabilities ? c : 1;
  Tensor out = Tensor::empty({n, out_cols});
  float* o = out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * c;
    float* dst = o + i * out_cols;
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (row[j] > row[best]) best = j;
    if (!probabilities) {
      dst[0] = static_cast<float>(best);
      continue;
    }
    double sum = 0;  // exp(z - max): the largest term is 1, nothing overflows
    for (int64_t j = 0; j < c; ++j) sum += std::exp(double(row[j]) - double(row[best]));
    for (int64_t j = 0; j < c; ++j)
      dst[j] = static_cast<float>(std::exp(double(row[j]) - double(row[best])) / sum);
  }
  return out;
}

// A bce_with_logits model's class per output: 1 where the logit is > 0 (its probability, the
// model's target_values, above 1/2), else 0.
Tensor binary_classes(const Tensor& logits) {
  Tensor out = Tensor::empty(logits.shape());
  const float* z = logits.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < logits.numel(); ++i) o[i] = z[i] > 0 ? 1.0f : 0.0f;
  return out;
}

}  // namespace

Tensor predict(Module& model, const Tensor& x, Device device, int64_t batch_size) {
  MT_CHECK_AS(ShapeError, x.ndim() == 2, "predict: input must be 2-D [rows, features], got ",
              x.shape());
  MT_CHECK_AS(ValueError, batch_size >= 1, "predict: batch_size must be >= 1, got ", batch_size);
  const bool was_training = model.is_training();
  model.eval();
  Tensor input = x.dtype() == DType::Float32 ? x : cast(x, DType::Float32);
  std::vector<Tensor> parts;
  int64_t out_dim = 0;
  for (int64_t row = 0; row < input.size(0); row += batch_size) {
    const int64_t n = std::min(batch_size, input.size(0) - row);
    Tensor y = model.forward(input.narrow(row, n).to(device)).to(Device::cpu());
    out_dim = y.size(1);
    parts.push_back(y);
  }
  model.train(was_training);
  if (parts.size() == 1) return parts.front();
  Tensor out = Tensor::empty(Shape{input.size(0), out_dim}, DType::Float32, Device::cpu());
  int64_t row = 0;
  for (const Tensor& p : parts) {
    out.narrow(row, p.size(0)).copy_(p);
    row += p.size(0);
  }
  return out;
}

int64_t run_predict(const PredictConfig& c, std::ostream& warnings) {
  MT_CHECK_AS(ValueError, !c.weights.empty(), "predict needs --weights W.safetensors");
  MT_CHECK_AS(ValueError, !c.input.empty(), "predict needs --input X.npy or T.csv");
  MT_CHECK_AS(ValueError, !c.output.empty(), "predict needs --output Y.npy or Y.csv");
  check_run_files({{"--weights", c.weights, false},
                   {"--input", c.input, false},
                   {"--output", c.output, true}});  // `--output data.csv` replaced the table
  const bool csv_in = is_csv(c.input, "--input");
  const bool csv_out = is_csv(c.output, "--output");
  const Device device = Device::parse(c.device);
  check_available(device);
  check_gemm_flag(c.gemm, device);

  // ---- the model, as the weights describe it ----
  const TrainedModel trained = load_trained_model(c.weights, c.model, c.activation, device);
  Module& model = *trained.model;
  set_gemm_backend(model, c.gemm);
  const std::vector<int64_t>& sizes = trained.sizes;
  const std::string& model_spec = trained.spec;

  // ---- the input: X.npy, or a table's feature columns ----
  const std::vector<std::string> targets =
      c.target_columns.empty() ? trained.target_columns : c.target_columns;
  // A table is read by the feature columns' names where the weights know them (a table whose
  // columns come in another order gives the same classes), else by position, as .npy.
  CsvFeatureColumns features{trained.feature_columns};
  features.ignored = c.ignore_columns;
  features.kept = c.keep_columns;
  features.keep_flag = true;  // advice may name --keep-columns
  // The training's ignored columns, unless --ignore-columns says which (the flag wins); a column
  // named by --keep-columns is kept.
  if (c.ignore_columns.empty()) features.model_ignored = trained.ignore_columns;
  MT_CHECK_AS(ValueError, csv_in || (c.ignore_columns.empty() && c.keep_columns.empty()),
              "--ignore-columns and --keep-columns name columns of a CSV --input, but --input is ",
              c.input);
  MT_CHECK_AS(ValueError, csv_out || c.keep_columns.empty(),
              "--keep-columns copies columns into a CSV output, but --output is ", c.output,
              "; write Y.csv");
  const Tensor x = csv_in ? load_csv_features(c.input, targets, &features) : read_npy(c.input);
  const KeptColumns kept{c.keep_columns, std::move(features.kept_cells)};
  if (x.ndim() != 2 || x.size(1) != sizes.front())
    MT_THROW(ShapeError, "--input ", c.input, " has shape ", x.shape(), " but the model ",
             model_spec, " expects [rows, ", sizes.front(), "]",
             x.ndim() == 1 ? " (a 1-D array: reshape it to [rows, features])"
             : csv_in      ? " (every column but the targets is a feature; name the targets "
                             "with --target-columns)"
                           : "");
  const std::filesystem::path dir = std::filesystem::path(c.output).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    MT_THROW(IoError, "--output ", c.output, ": directory '", dir.string(), "' does not exist");

  const bool bce = trained.loss.name == "bce_with_logits";
  MT_CHECK_AS(ValueError, !c.probabilities || trained.classifier() || bce,
              "--probabilities is for classifiers, but ", c.weights, " was trained with --loss ",
              trained.loss.name, " (a regression: its outputs are values)");

  MT_CHECK_AS(ValueError, !c.class_and_probabilities || (trained.classifier() && csv_out),
              "--class-and-probabilities writes a cross_entropy classifier's class and "
              "probabilities into one CSV, but ",
              !csv_out ? "--output " + c.output + " is not .csv"
                       : c.weights + " was trained with --loss " + trained.loss.name);
  MT_CHECK_AS(ValueError, !c.class_and_probabilities || !c.probabilities,
              "--class-and-probabilities already writes the probabilities; drop --probabilities");

  const Tensor y = predict(model, trained.model_input(x), device, c.batch_size);
  const Tensor host = y.to(Device::cpu());  // float32, as the model computes
  if (const int64_t first = first_non_finite(host); first >= 0) {
    const float* v = host.data<float>();
    int64_t count = 0;
    for (int64_t i = 0; i < host.numel(); ++i) count += !std::isfinite(v[i]);
    warnings << "minitrain: warning: --weights " << c.weights << ": " << count << " of the "
             << host.numel() << " outputs are not finite, the first "
             << non_finite_name(host, first) << " at row " << first / y.size(1) << ", output "
             << first % y.size(1) << " (0-based) of --input " << c.input
             << "; they are written as they are"
             << (trained.classifier() || bce ? " (the classes of those rows mean nothing)" : "")
             << " (the weights are finite but too large for these inputs: check the weights and "
                "the input's scale)\n";
  }
  if (!trained.classifier() && !bce) {
    // What the loss compares with the targets: a poisson_nll model's rate, not its log.
    const Tensor values = trained.target_values(y);
    if (csv_out)
      write_csv_table(c.output, kept, nullptr, "", {}, &values, targets);
    else
      write_npy(c.output, values);
    return x.size(0);
  }
  const std::string class_header = targets.empty() ? "class" : targets.front();
  if (c.class_and_probabilities) {
    const Tensor classes = classify(y, false);
    const Tensor probabilities = classify(y, true);
    write_csv_table(c.output, kept, &classes, class_header, trained.classes, &probabilities,
                    trained.classes);
    return x.size(0);
  }
  // bce's probabilities are what its loss compares with the targets: the model's one mapping.
  const Tensor out = !bce              ? classify(y, c.probabilities)
                     : c.probabilities ? trained.target_values(y)
                                       : binary_classes(y);
  if (!csv_out && !c.probabilities) {
    // Classes as int64, as torch.argmax gives them (and bce's 0/1 per output alike); float32
    // would hold a class index exactly only up to 2^24.
    std::vector<int64_t> classes(static_cast<std::size_t>(out.numel()));
    const float* v = out.data<float>();
    for (std::size_t i = 0; i < classes.size(); ++i) classes[i] = static_cast<int64_t>(v[i]);
    write_npy_int64(c.output, classes, out.shape());
  } else if (!csv_out) {
    write_npy(c.output, out);
  } else if (c.probabilities || bce) {
    // One column per class (or per output of bce), named by the classes where known.
    write_csv_table(c.output, kept, nullptr, "", {}, &out, bce ? targets : trained.classes);
  } else {
    write_csv_table(c.output, kept, &out, class_header, trained.classes, nullptr, {});
  }
  return x.size(0);
}

}  // namespace minitrain
