// `minitrain predict`: weights (the model rebuilt from their metadata, train/trained_model.h) +
// X.npy or T.csv -> Y.npy or Y.csv.

#include "train/predict.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

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
#include "train/trained_model.h"

namespace minitrain {

namespace {

bool is_csv(const std::string& path, const char* flag) {
  if (ends_with(path, ".csv")) return true;
  MT_CHECK_AS(ValueError, ends_with(path, ".npy"), flag, " ", path,
              ": the extension says the format, and it is neither .npy nor .csv");
  return false;
}

// Y as CSV (RFC 4180: names quoted where they need it, see csv_field): a header (the training's
// target column names where they fit, else y0, y1, ...), then one row per prediction, each value
// with the 9 significant digits that give a float32 back.
void write_csv(const std::string& path, const Tensor& y, const std::vector<std::string>& names) {
  const int64_t cols = y.size(1);
  std::string text;
  for (int64_t j = 0; j < cols; ++j) {
    text += j ? "," : "";
    text += static_cast<int64_t>(names.size()) == cols
                ? csv_field(names[static_cast<std::size_t>(j)])  // class names hold anything
                : "y" + std::to_string(j);
  }
  text += "\n";
  const float* v = y.data<float>();
  char cell[32];
  for (int64_t i = 0; i < y.size(0); ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      std::snprintf(cell, sizeof cell, "%s%.9g", j ? "," : "", double(v[i * cols + j]));
      text += cell;
    }
    text += "\n";
  }
  AtomicFile file(path);
  file.write(text);
  file.commit();
}

// A classifier's outputs, row by row on the host: softmax probabilities (cross_entropy) or
// sigmoids (bce_with_logits); with !probabilities the class instead, argmax of the row (first of
// ties, as torch.argmax) or, per column for bce, 1 where the logit is > 0.
Tensor classify(const Tensor& logits, bool bce, bool probabilities) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const float* z = logits.data<float>();
  const int64_t out_cols = probabilities || bce ? c : 1;
  Tensor out = Tensor::empty({n, out_cols});
  float* o = out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * c;
    float* dst = o + i * out_cols;
    if (bce) {
      for (int64_t j = 0; j < c; ++j)
        dst[j] = probabilities ? static_cast<float>(1.0 / (1.0 + std::exp(-double(row[j]))))
                               : (row[j] > 0 ? 1.0f : 0.0f);
      continue;
    }
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

// A class column as CSV: its names where the weights know them, else the indices.
void write_class_csv(const std::string& path, const Tensor& classes, const std::string& header,
                     const std::vector<std::string>& names) {
  std::string text = csv_field(header) + "\n";
  const float* v = classes.data<float>();
  for (int64_t i = 0; i < classes.size(0); ++i) {
    const auto k = static_cast<std::size_t>(v[i]);
    text += (names.empty() ? std::to_string(k) : csv_field(names[k])) + "\n";
  }
  AtomicFile file(path);
  file.write(text);
  file.commit();
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
  const Tensor x =
      csv_in ? load_csv_features(c.input, targets, features.names.empty() ? nullptr : &features)
             : read_npy(c.input);
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

  const bool bce = trained.loss == "bce_with_logits";
  MT_CHECK_AS(ValueError, !c.probabilities || trained.classifier() || bce,
              "--probabilities is for classifiers, but ", c.weights, " was trained with --loss ",
              trained.loss, " (a regression: its outputs are values)");

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
    if (csv_out)
      write_csv(c.output, y, targets);
    else
      write_npy(c.output, y);
    return x.size(0);
  }
  const Tensor out = classify(y, bce, c.probabilities);
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
    write_csv(c.output, out, bce ? targets : trained.classes);
  } else {
    write_class_csv(c.output, out, targets.empty() ? "class" : targets.front(), trained.classes);
  }
  return x.size(0);
}

}  // namespace minitrain
