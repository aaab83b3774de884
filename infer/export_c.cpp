// `minitrain export --format c` (infer/export_c.h): the model predict rebuilds, written out as C.
//
// Note [exported C equals predict --gemm reference]: the reference GEMM keeps one float
// accumulator per output and adds x[q] * w[j, q] for q = 0, 1, ... in order, stores 1.0f * acc,
// then bias_add adds b[j] in float, then the activation runs in float through kernels/
// activation_math.h (erff, tanhf, expf). The C below does exactly those operations in that order,
// so with the same libm the outputs are the same bits. Two things would break it, and neither
// happens by default: contracting a * b + c into one fused multiply-add (x86-64 compilers emit
// FMA only with -mfma / -march=..., and `-std=c99` turns contraction off in GCC), and reordering
// the sum (only -ffast-math / -fassociative-math allows that). The default predict uses OpenBLAS,
// which blocks and vectorises the sum: its outputs differ from these by float rounding.

#include "infer/export_c.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <map>
#include <sstream>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/strings.h"
#include "core/version.h"
#include "kernels/activation.h"
#include "nn/state_dict.h"

namespace minitrain {
namespace {

namespace fs = std::filesystem;

// A float as a C99 literal that the compiler turns back into the same bits: the hexadecimal
// form (%a) is exact, no decimal rounding involved; non-finite values by <math.h>'s macros.
std::string float_literal(float v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  char text[48];
  std::snprintf(text, sizeof text, "%af", double(v));
  return text;
}

// The activation as kernels/activation_math.h computes it on a float: the same operations, the
// same order, the same constants rounded to float as T(constant) rounds them there.
std::string activation_c(Activation a) {
  switch (a) {
    case Activation::ReLU:
      return "  return x < 0.0f ? 0.0f : x;\n";
    case Activation::GELU:
      return "  return x * 0.5f * (1.0f + erff(x * (float)0.70710678118654752440));\n";
    case Activation::GELUTanh:
      return "  const float x_cube = x * x * x;\n"
             "  const float inner = (float)0.79788456080286535588 * (x + (float)0.044715 * "
             "x_cube);\n"
             "  return 0.5f * x * (1.0f + tanhf(inner));\n";
    case Activation::Tanh:
      return "  return tanhf(x);\n";
    case Activation::Sigmoid:
      return "  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));\n"
             "  {\n"
             "    const float e = expf(x);\n"
             "    return e / (1.0f + e);\n"
             "  }\n";
  }
  MT_THROW(ValueError, "export: unknown activation");
}

const Tensor& parameter(const std::map<std::string, Tensor>& params, const std::string& key,
                        const Shape& shape, const std::string& spec) {
  const auto it = params.find(key);
  MT_CHECK_AS(
      ValueError, it != params.end(), "export: the model ", spec, " has no '", key,
      "' (a Linear layer without a bias?); the C export needs every layer's weight and bias");
  MT_CHECK_AS(DTypeError, it->second.dtype() == DType::Float32, "export: '", key, "' is ",
              it->second.dtype(), "; the C export writes float32 weights only");
  MT_CHECK_AS(ShapeError, it->second.shape() == shape, "export: '", key, "' is ",
              it->second.shape(), " but the model ", spec, " needs ", shape);
  return it->second;
}

// `static const float NAME[n] = {...};`, eight values a line.
std::string float_array(const std::string& symbol, const Tensor& t, const std::string& what) {
  const Tensor host = t.to(Device::cpu());  // a parameter: contiguous
  const float* v = host.data<float>();
  const int64_t n = host.numel();
  std::string text =
      "/* " + what + " */\nstatic const float " + symbol + "[" + std::to_string(n) + "] = {";
  for (int64_t i = 0; i < n; ++i) {
    text += i % 8 == 0 ? "\n    " : " ";
    text += float_literal(v[i]);
    text += i + 1 < n ? "," : "";
  }
  return text + "\n};\n\n";
}

std::string names_array(const std::string& symbol, const std::string& count,
                        const std::vector<std::string>& names) {
  std::string text = "static const char *const " + symbol + "[" + count + "] = {";
  for (std::size_t i = 0; i < names.size(); ++i)
    text += std::string(i ? "," : "") + "\n    " + c_string_literal(names[i]);
  return text + "\n};\n";
}

std::string shape_text(const Shape& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

void check_c_identifier(const std::string& name) {
  const auto identifier_char = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
  };
  const bool ok = !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
                  std::all_of(name.begin(), name.end(), identifier_char);
  if (ok) return;
  // The nearest identifier: every other byte as _, and m_ before a leading digit.
  std::string fixed = name.empty() || (name[0] >= '0' && name[0] <= '9') ? "m_" + name : name;
  for (char& ch : fixed)
    if (!identifier_char(ch)) ch = '_';
  MT_THROW(ValueError, "--name '", name,
           "' is not a C identifier (letters, digits and _, not starting with a digit): the "
           "exported symbols are NAME_forward, NAME_INPUTS, ...; e.g. --name ",
           fixed);
}

std::string c_string_literal(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '?':
        out += "\\?";
        break;  // "??/" and friends are trigraphs in C99
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte >= 0x20 && byte < 0x7f) {
          out += ch;
        } else {  // three digits always, so that a following digit is not read into the escape
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\%03o", byte);
          out += esc;
        }
    }
  }
  return out + "\"";
}

CModelSource c_model_source(const TrainedModel& trained, const std::string& name) {
  check_c_identifier(name);
  const std::vector<int64_t>& sizes = trained.sizes;
  const std::string spec = "mlp:" + join(sizes, ",");
  const Activation act = parse_activation(trained.activation);
  const std::size_t layers = sizes.size() - 1;
  const bool classifier = trained.classifier();
  const bool bce = trained.loss.name == "bce_with_logits";
  std::map<std::string, Tensor> params;
  for (auto& [key, t] : state_dict(*trained.model)) params.emplace(key, t);

  const std::string n = name;
  const std::string what =
      spec + " (" + activation_name(act) + ")" +
      (classifier ? ", a cross_entropy classifier over " + std::to_string(sizes.back()) + " classes"
       : bce      ? ", bce_with_logits: one logit per label"
                  : ", a regression (" + trained.loss.name + ")");

  // ---- the header ----
  std::string h;
  h += "/* " + n + ".h: " + what + ".\n   Exported by minitrain " + MINITRAIN_VERSION +
       " (minitrain export --format c); the code is " + n + ".c, C99 and libm only. */\n";
  h += "#ifndef " + n + "_H_INCLUDED\n#define " + n + "_H_INCLUDED\n\n";
  h += "#define " + n + "_INPUTS " + std::to_string(sizes.front()) + "\n";
  h += "#define " + n + "_OUTPUTS " + std::to_string(sizes.back()) + "\n\n";
  h += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h += "/* y[rows, " + n + "_OUTPUTS] = the model's outputs for x[rows, " + n +
       "_INPUTS], both row-major" + (classifier || bce ? " (a classifier's logits)" : "") +
       ";\n   the same bits as `minitrain predict --gemm reference` on the same rows" +
       (trained.output_map() == TrainedModel::OutputMap::Exp
            ? ", where predict\n   then writes exp(y): the model's outputs are the log of what the "
              "loss " +
                  trained.loss.name + " compares\n   with the targets."
            : ".") +
       (trained.scaler.empty() ? ""
                               : "\n   x holds raw features: they are standardised inside, by "
                                 "the training rows' mean and\n   standard deviation (train "
                                 "--standardize), as predict does.") +
       " */\n";
  h += "void " + n + "_forward(const float *x, float *y, long rows);\n";
  if (classifier) {
    h += "\n/* The class of one row: the index of its largest logit, the first of ties (as predict "
         "and torch.argmax). */\n";
    h += "long " + n + "_predict_class(const float *x_row);\n";
    h += "/* p[" + n +
         "_OUTPUTS] = the softmax of one row's logits (predict --probabilities): computed in "
         "double, rounded to float. */\n";
    h += "void " + n + "_probabilities(const float *x_row, float *p);\n";
  } else if (bce) {
    h += "\n/* labels[" + n +
         "_OUTPUTS] = 1 where one row's logit is > 0, else 0 (predict's labels). */\n";
    h += "void " + n + "_predict_labels(const float *x_row, long *labels);\n";
    h += "/* p[" + n +
         "_OUTPUTS] = the sigmoid of each logit (predict --probabilities), in double, rounded to "
         "float. */\n";
    h += "void " + n + "_probabilities(const float *x_row, float *p);\n";
  }
  h += "\n#ifdef __cplusplus\n}\n#endif\n";
  if (classifier && !trained.classes.empty()) {
    h += "\n/* The class names in index order (metadata 'classes'): " + n + "_class_names[" + n +
         "_predict_class(x)]. */\n";
    h += names_array(n + "_class_names", n + "_OUTPUTS", trained.classes);
  } else if (!classifier && static_cast<int64_t>(trained.target_columns.size()) == sizes.back()) {
    h += "\n/* The outputs' names (the training table's target columns). */\n";
    h += names_array(n + "_output_names", n + "_OUTPUTS", trained.target_columns);
  }
  if (!trained.feature_columns.empty()) {
    h += "\n/* The inputs' names in the order x takes them: the training table's feature columns "
         "(metadata\n   'feature_columns'; predict reads a table by these names, the C by "
         "position). */\n";
    h += names_array(n + "_input_names", n + "_INPUTS", trained.feature_columns);
  }
  h += "\n#endif /* " + n + "_H_INCLUDED */\n";

  // ---- the source ----
  std::string c;
  c += "/* " + n + ".c: " + what + ".\n   Exported by minitrain " + MINITRAIN_VERSION +
       ". Dependency-free C99: cc -std=c99 -O2 -c " + n +
       ".c, link with -lm.\n"
       "   It computes what `minitrain predict --gemm reference` computes, in the same order with "
       "the\n   same float operations, so the outputs are the same bits (built without -ffast-math "
       "and\n   without FMA contraction, which -std=c99 and plain x86-64 flags already ensure). "
       "*/\n";
  c += "#include \"" + n + ".h\"\n\n#include <math.h>\n\n";
  const bool scaled = !trained.scaler.empty();
  if (scaled) {
    const auto inputs = Shape{sizes.front()};
    c += float_array(n + "_mean", Tensor::from_vector(trained.scaler.mean, inputs),
                     "the training rows' mean per input (metadata 'standardize_mean')");
    c += float_array(n + "_scale", Tensor::from_vector(trained.scaler.scale, inputs),
                     "their standard deviation, 1 for a constant column (metadata "
                     "'standardize_scale')");
  }
  int64_t widest_hidden = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    const int64_t in = sizes[l], out = sizes[l + 1];
    const std::string key = std::to_string(2 * l);
    const Tensor& w = parameter(params, key + ".weight", Shape{out, in}, spec);
    const Tensor& b = parameter(params, key + ".bias", Shape{out}, spec);
    c += float_array(n + "_w" + std::to_string(l), w,
                     key + ".weight " + shape_text(w.shape()) + ", row j = output j's weights");
    c += float_array(n + "_b" + std::to_string(l), b, key + ".bias " + shape_text(b.shape()));
    if (l + 1 < layers) widest_hidden = std::max(widest_hidden, out);
  }
  MT_CHECK_AS(ValueError, params.size() == 2 * layers, "export: the model has ", params.size(),
              " parameters, but ", spec, " is ", layers,
              " Linear layers of a weight and a bias each");

  c += "/* y[j] = sum_q x[q] w[j, q] + b[j]: one float accumulator per output, summed over q in "
       "order\n   (minitrain's reference GEMM), then the bias added (bias_add). */\n";
  c += "static void " + n +
       "_linear(const float *w, const float *b, const float *x, float *y, long in, long out) {\n"
       "  long j, q;\n"
       "  for (j = 0; j < out; ++j) {\n"
       "    float acc = 0.0f;\n"
       "    for (q = 0; q < in; ++q) acc += x[q] * w[j * in + q];\n"
       "    y[j] = acc + b[j];\n"
       "  }\n"
       "}\n\n";
  if (layers > 1) {
    c += std::string("/* ") + activation_name(act) +
         ", in float, as kernels/activation_math.h computes it. */\n";
    c += "static float " + n + "_activation(float x) {\n" + activation_c(act) + "}\n\n";
    c += "static void " + n +
         "_activate(float *v, long n) {\n  long i;\n  for (i = 0; i < n; ++i) v[i] = " + n +
         "_activation(v[i]);\n}\n\n";
  }
  c += "void " + n + "_forward(const float *x, float *y, long rows) {\n";
  if (layers > 1)
    c += "  float h0[" + std::to_string(widest_hidden) + "]" +
         (layers > 2 ? ", h1[" + std::to_string(widest_hidden) + "]" : std::string()) + ";\n";
  if (scaled) c += "  float s[" + n + "_INPUTS];\n  long q;\n";
  c += "  long r;\n  for (r = 0; r < rows; ++r) {\n";
  if (scaled)
    c += "    const float *in = s;\n    for (q = 0; q < " + n +
         "_INPUTS; ++q)\n      s[q] = (x[r * " + n + "_INPUTS + q] - " + n + "_mean[q]) / " + n +
         "_scale[q];  /* standardize */\n";
  else
    c += "    const float *in = x + r * " + n + "_INPUTS;\n";
  c += "    float *out = y + r * " + n + "_OUTPUTS;\n";
  for (std::size_t l = 0; l < layers; ++l) {
    const std::string src = l == 0 ? "in" : "h" + std::to_string((l - 1) % 2);
    const std::string dst = l + 1 == layers ? "out" : "h" + std::to_string(l % 2);
    const std::string k = std::to_string(l);
    c += "    " + n + "_linear(" + n + "_w" + k + ", " + n + "_b" + k + ", " + src + ", " + dst +
         ", " + std::to_string(sizes[l]) + ", " + std::to_string(sizes[l + 1]) + ");\n";
    if (l + 1 < layers)
      c += "    " + n + "_activate(" + dst + ", " + std::to_string(sizes[l + 1]) + ");\n";
  }
  c += "  }\n}\n";
  if (classifier) {
    c += "\nlong " + n +
         "_predict_class(const float *x_row) {\n"
         "  float z[" +
         n +
         "_OUTPUTS];\n"
         "  long j, best = 0;\n"
         "  " +
         n +
         "_forward(x_row, z, 1);\n"
         "  for (j = 1; j < " +
         n +
         "_OUTPUTS; ++j)\n"
         "    if (z[j] > z[best]) best = j;\n"
         "  return best;\n}\n";
    c += "\n/* exp(z - max): the largest term is 1, nothing overflows (predict's softmax). */\n"
         "void " +
         n +
         "_probabilities(const float *x_row, float *p) {\n"
         "  float z[" +
         n +
         "_OUTPUTS];\n"
         "  double sum = 0.0;\n"
         "  long j, best = 0;\n"
         "  " +
         n +
         "_forward(x_row, z, 1);\n"
         "  for (j = 1; j < " +
         n +
         "_OUTPUTS; ++j)\n"
         "    if (z[j] > z[best]) best = j;\n"
         "  for (j = 0; j < " +
         n +
         "_OUTPUTS; ++j) sum += exp((double)z[j] - (double)z[best]);\n"
         "  for (j = 0; j < " +
         n +
         "_OUTPUTS; ++j)\n"
         "    p[j] = (float)(exp((double)z[j] - (double)z[best]) / sum);\n}\n";
  } else if (bce) {
    c += "\nvoid " + n +
         "_predict_labels(const float *x_row, long *labels) {\n"
         "  float z[" +
         n +
         "_OUTPUTS];\n"
         "  long j;\n"
         "  " +
         n +
         "_forward(x_row, z, 1);\n"
         "  for (j = 0; j < " +
         n + "_OUTPUTS; ++j) labels[j] = z[j] > 0.0f ? 1 : 0;\n}\n";
    c += "\nvoid " + n +
         "_probabilities(const float *x_row, float *p) {\n"
         "  float z[" +
         n +
         "_OUTPUTS];\n"
         "  long j;\n"
         "  " +
         n +
         "_forward(x_row, z, 1);\n"
         "  for (j = 0; j < " +
         n + "_OUTPUTS; ++j) p[j] = (float)(1.0 / (1.0 + exp(-(double)z[j])));\n}\n";
  }
  return {h, c};
}

std::vector<std::string> export_c(const ExportCConfig& config) {
  MT_CHECK_AS(ValueError, !config.weights.empty(), "export needs --weights W.safetensors");
  MT_CHECK_AS(ValueError, !config.out_dir.empty(), "export --format c needs --out DIR");
  check_c_identifier(config.name);
  const fs::path dir(config.out_dir);
  const std::string header_path = (dir / (config.name + ".h")).string();
  const std::string source_path = (dir / (config.name + ".c")).string();
  std::error_code ec;
  for (const std::string& p : {header_path, source_path})
    MT_CHECK_AS(ValueError, !fs::equivalent(p, config.weights, ec), "--out ", config.out_dir, ": ",
                p, " is the --weights file ", config.weights,
                "; exporting would overwrite it: choose another --out or --name");
  MT_CHECK_AS(IoError, !fs::exists(dir, ec) || fs::is_directory(dir, ec), "--out ", config.out_dir,
              " exists and is not a directory");

  const TrainedModel trained =
      load_trained_model(config.weights, config.model, config.activation, Device::cpu());
  const CModelSource code = c_model_source(trained, config.name);

  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    MT_CHECK_AS(IoError, !ec, "--out ", config.out_dir,
                ": cannot create the directory: ", ec.message());
  }
  // Both temporaries are written in full before either is renamed into place: a failure while
  // writing (a full disk) leaves neither; the header goes first, so a .c never lacks its .h.
  AtomicFile header(header_path);
  AtomicFile source(source_path);
  header.write(code.header);
  source.write(code.source);
  header.commit();
  source.commit();
  return {header_path, source_path};
}

}  // namespace minitrain
