#pragma once
// `minitrain export --format c`: a trained model as one dependency-free C99 file and its header,
// the weights as `static const float` arrays, computing what `minitrain predict --gemm reference`
// computes bit for bit (the same float operations in the same order, the activations with the
// same libm calls as kernels/activation_math.h), and the head predict applies (a classifier's
// class and probabilities).

#include <string>
#include <vector>

#include "infer/trained_model.h"

namespace minitrain {

/// The two files of an exported model; `header` is included by `source` as "NAME.h".
struct CModelSource {
  std::string header;
  std::string source;
};

/// ValueError naming `name` unless it is a C identifier ([A-Za-z_][A-Za-z0-9_]*): every symbol
/// of the exported model is `NAME_...`.
void check_c_identifier(const std::string& name);

/// `text` as a C string literal, quotes included: ", \ and ? (trigraphs) escaped, newline and tab
/// by name, every other byte outside printable ASCII as a three-digit octal escape.
std::string c_string_literal(const std::string& text);

/// The C of a model rebuilt by load_trained_model (an MLP on the CPU, float32). ValueError where
/// the model is not what the C can express (a layer without a bias, a weight that is not float32).
CModelSource c_model_source(const TrainedModel& trained, const std::string& name);

struct ExportCConfig {
  std::string weights;            ///< as predict's --weights
  std::string model, activation;  ///< as predict's: for weights whose metadata does not say
  std::string out_dir;            ///< created when missing
  std::string name = "minitrain_model";
};

/// Writes out_dir/NAME.h and out_dir/NAME.c, each atomically (a temporary renamed over the
/// target), after every check: nothing is written when the name, the weights or the directory
/// is wrong, and an output that is the weights file itself is refused. Returns the two paths.
std::vector<std::string> export_c(const ExportCConfig& config);

}  // namespace minitrain
