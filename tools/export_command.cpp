// `minitrain export`: flag parsing, and the ONNX route (the C route is infer/export_c.cpp).

#include "tools/export_command.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/strings.h"
#include "nn/state_dict.h"
#include "tools/python_script.h"
#include "tools/trained_model_options.h"
#include "infer/export_c.h"
#include "infer/trained_model.h"

namespace minitrain::cli {
namespace {

namespace fs = std::filesystem;

// The opset of the graph export_onnx.py writes: 17 has every operator an MLP needs (Gemm, Relu,
// Tanh, Sigmoid, Erf for GELU's erf form, Softmax over one axis, ArgMax) and onnxruntime reads it
// from 1.13 on; GELU is written out as x * 0.5 * (1 + Erf(x / sqrt(2))) rather than opset 20's
// Gelu node, which runtimes before 1.16 lack.
constexpr int kOnnxOpset = 17;

// Removes a file when it goes out of scope (the weights handed to the script).
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

}  // namespace

ExportCommand::ExportCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "export",
      "write a trained model out of the framework: dependency-free C99 (NAME.c, NAME.h) or an "
      "ONNX graph; the model and activation come from the weights' metadata, as for predict");
  add_trained_model_options(*app_, weights_, model_, activation_);
  app_->add_option("--format", format_, "c | onnx")
      ->required()
      ->check(CLI::IsMember({"c", "onnx"}));
  app_->add_option("--out", out_,
                   "c: the directory for NAME.c and NAME.h (created when missing); onnx: FILE.onnx")
      ->required();
  app_->add_option("--name", name_,
                   "c: the files' and symbols' prefix, a C identifier (default minitrain_model)");
  app_->add_flag("--probabilities", probabilities_,
                 "onnx, classifiers: output each class's probability (Softmax; Sigmoid for "
                 "bce_with_logits) instead of the logits");
}

bool ExportCommand::parsed() const { return app_->parsed(); }

int ExportCommand::run(std::ostream& out) {
  if (format_ == "onnx") {
    export_onnx(out);
    return 0;
  }
  MT_CHECK_AS(ValueError, !probabilities_,
              "--probabilities is for --format onnx; the C export has NAME_probabilities()");
  ExportCConfig c;
  c.weights = weights_;
  c.model = model_;
  c.activation = activation_;
  c.out_dir = out_;
  c.name = name_;
  const std::vector<std::string> written = export_c(c);
  out << "exported " << weights_ << " -> " << join(written, ", ") << "\n";
  return 0;
}

void ExportCommand::export_onnx(std::ostream& out) {
  MT_CHECK_AS(ValueError, app_->count("--name") == 0,
              "--name is for --format c; an ONNX file is named by --out FILE.onnx");
  MT_CHECK_AS(ValueError, ends_with(out_, ".onnx"), "--out ", out_,
              ": --format onnx writes FILE.onnx (the extension says the format)");
  std::error_code ec;
  MT_CHECK_AS(ValueError, !fs::equivalent(out_, weights_, ec), "--out ", out_,
              " is the --weights file; exporting would overwrite it: choose another --out");
  check_can_write(out_);  // IoError naming the directory before anything is computed

  const TrainedModel trained = load_trained_model(weights_, model_, activation_, Device::cpu());
  const bool bce = trained.loss.name == "bce_with_logits";
  MT_CHECK_AS(ValueError, !probabilities_ || trained.classifier() || bce,
              "--probabilities is for classifiers, but ", weights_, " was trained with --loss ",
              trained.loss.name, " (a regression: its outputs are values)");

  const std::string python = find_python("onnx");
  MT_CHECK_AS(Error, !python.empty(),
              "export --format onnx: no Python 3 with the onnx package found (tried "
              "$MINITRAIN_PYTHON, python3 and /usr/bin/python3); pip install onnx "
              "(scripts/setup.sh installs it)");
  const std::string script = find_script("MINITRAIN_EXPORT_ONNX_SCRIPT", "export_onnx.py");
  MT_CHECK_AS(Error, !script.empty(),
              "export_onnx.py is neither in share/minitrain beside this command nor in ",
              MINITRAIN_SOURCE_DIR, "/scripts; set MINITRAIN_EXPORT_ONNX_SCRIPT to its path");

  // The model's own float32 tensors (bf16 files and checkpoints already converted), beside the
  // output so that they are on a disk known to be writable; removed whatever happens.
  const fs::path target(out_);
  RemoveOnExit tensors{(target.parent_path() / ("." + target.filename().string() + ".weights." +
                                                std::to_string(::getpid()) + ".safetensors"))
                           .string()};
  save_weights(tensors.path, *trained.model, {});

  const std::string head = !probabilities_ ? "logits" : bce ? "sigmoid" : "softmax";
  std::vector<std::string> args{python,         script,
                                "--weights",    tensors.path,
                                "--sizes",      join(trained.sizes, ","),
                                "--activation", trained.activation,
                                "--head",       head,
                                "--opset",      std::to_string(kOnnxOpset),
                                "--out",        out_};
  if (trained.classifier()) args.push_back("--argmax");
  if (bce) args.push_back("--labels");
  if (!trained.classes.empty())
    args.insert(args.end(), {"--classes", nlohmann::json(trained.classes).dump()});
  // The graph takes raw features: --standardize's statistics become its first two nodes.
  if (!trained.scaler.empty())
    args.insert(args.end(), {"--mean", nlohmann::json(trained.scaler.mean).dump(), "--scale",
                             nlohmann::json(trained.scaler.scale).dump()});
  if (!trained.feature_columns.empty())
    args.insert(args.end(),
                {"--inputs", nlohmann::json(trained.feature_columns)
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  const int rc = run_and_wait(args);
  MT_CHECK_AS(Error, rc == 0, "export --format onnx: ", python_failure(python, script, rc), "; ",
              out_, " is left as it was");
  out << "exported " << weights_ << " -> " << out_ << " (ONNX opset " << kOnnxOpset << ")\n";
}

}  // namespace minitrain::cli
