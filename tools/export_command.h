#pragma once
// `minitrain export --weights W.safetensors --format c|onnx --out DIR|FILE.onnx`: a trained model
// out of the framework. C: infer/export_c.h writes NAME.c and NAME.h. ONNX: the model is rebuilt
// here as predict rebuilds it and handed, as plain float32 tensors, to scripts/export_onnx.py,
// which builds the graph with the onnx package, checks it with onnx.checker and writes it.

#include <ostream>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class ExportCommand {
 public:
  explicit ExportCommand(CLI::App& parent);
  bool parsed() const;
  int run(std::ostream& out);  ///< throws minitrain errors

 private:
  void export_onnx(std::ostream& out);

  CLI::App* app_;
  std::string weights_, model_, activation_, format_, out_, name_ = "minitrain_model";
  bool probabilities_ = false;
};

}  // namespace minitrain::cli
