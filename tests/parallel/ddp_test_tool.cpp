// A helper of the `minitrain train --parallel ddp` tests (cli_ddp_test.cmake), run as a program:
//   ddp_test_tool compare GOT.safetensors WANT.safetensors ATOL RTOL
//       exit 0 when both files name the same tensors in the same order, none all zero, and every
//       value satisfies |got - want| <= atol + rtol * |want|; else exit 1 naming the worst value.
//   ddp_test_tool nearer GOT.safetensors WANT.safetensors OTHER.safetensors RATIO
//       exit 0 when GOT differs from WANT, by at most RATIO times the largest |WANT - OTHER|.
//   ddp_test_tool weights PATH.npy N
//       writes N float32 sample weights (row i: i % 4, so every fourth row has weight 0).
//   ddp_test_tool metadata CHECKPOINT.safetensors KEY
//       prints the value of KEY in the file's metadata (exit 1 when it is missing).
//   ddp_test_tool table PATH.csv N IN OUT
//       writes a CSV of N rows: IN feature columns a, b, ... and OUT targets t1, t2, ..., a fixed
//       smooth function of the features (a regression an MLP learns).
//   ddp_test_tool close A B RTOL
//       exit 0 when |A - B| <= RTOL * |B| (and both are numbers), else exit 1 saying both.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "core/npy.h"
#include "core/safetensors.h"
#include "core/tensor.h"

namespace {

using minitrain::SafetensorsFile;
using minitrain::Tensor;

std::vector<double> values(const Tensor& t) {
  if (t.dtype() == minitrain::DType::Float64) return t.to_vector<double>();
  const std::vector<float> f = t.to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

int compare(const std::string& got_path, const std::string& want_path, double atol, double rtol) {
  const SafetensorsFile got = minitrain::read_safetensors(got_path),
                        want = minitrain::read_safetensors(want_path);
  if (got.tensors.size() != want.tensors.size()) {
    std::printf("%s has %zu tensors, %s has %zu\n", got_path.c_str(), got.tensors.size(),
                want_path.c_str(), want.tensors.size());
    return 1;
  }
  int bad = 0;
  for (std::size_t i = 0; i < got.tensors.size(); ++i) {
    const std::string& name = got.tensors[i].first;
    if (name != want.tensors[i].first) {
      std::printf("tensor %zu: '%s' vs '%s'\n", i, name.c_str(), want.tensors[i].first.c_str());
      return 1;
    }
    const std::vector<double> g = values(got.tensors[i].second), w = values(want.tensors[i].second);
    if (g.size() != w.size()) {
      std::printf("%s: %zu vs %zu values\n", name.c_str(), g.size(), w.size());
      return 1;
    }
    double largest = 0, worst = -1;
    std::size_t at = 0;
    for (std::size_t k = 0; k < g.size(); ++k) {
      largest = std::fmax(largest, std::fabs(g[k]));
      const double excess = std::fabs(g[k] - w[k]) - (atol + rtol * std::fabs(w[k]));
      if (!(excess <= worst) || std::isnan(g[k])) {
        worst = std::isnan(g[k]) ? INFINITY : excess;
        at = k;
      }
    }
    const bool ok = largest > 0 && worst <= 0;
    std::printf("%s %s: %zu values, max |got| %.6g, worst [%zu] got %.9g want %.9g\n",
                ok ? "ok " : "BAD", name.c_str(), g.size(), largest, at, g[at], w[at]);
    bad += ok ? 0 : 1;
  }
  return bad == 0 ? 0 : 1;
}

// The largest |a - b| over two weights files of the same tensors; -1 when they do not match.
double max_difference(const std::string& a_path, const std::string& b_path) {
  const SafetensorsFile a = minitrain::read_safetensors(a_path),
                        b = minitrain::read_safetensors(b_path);
  if (a.tensors.size() != b.tensors.size()) return -1;
  double worst = 0;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const std::vector<double> x = values(a.tensors[i].second), y = values(b.tensors[i].second);
    if (x.size() != y.size() || a.tensors[i].first != b.tensors[i].first) return -1;
    for (std::size_t k = 0; k < x.size(); ++k) worst = std::fmax(worst, std::fabs(x[k] - y[k]));
  }
  return worst;
}

// GOT differs from WANT (not the same run), by at most RATIO times what WANT differs from OTHER:
// e.g. a 16-bit ddp run is nearer the 16-bit one-device run than that is to float32.
int nearer(const std::string& got, const std::string& want, const std::string& other,
           double ratio) {
  const double d = max_difference(got, want), ref = max_difference(want, other);
  const bool ok = d > 0 && ref > 0 && d <= ratio * ref;
  std::printf("%s |got - want| %.6g, |want - other| %.6g (ratio %.3g, at most %g)\n",
              ok ? "ok " : "BAD", d, ref, ref > 0 ? d / ref : 0.0, ratio);
  return ok ? 0 : 1;
}

int write_weights(const std::string& path, long long n) {
  std::vector<float> w(static_cast<std::size_t>(n));
  for (long long i = 0; i < n; ++i) w[static_cast<std::size_t>(i)] = static_cast<float>(i % 4);
  minitrain::write_npy(path, Tensor::from_vector(w, {n}));
  return 0;
}

int metadata(const std::string& path, const std::string& key) {
  const SafetensorsFile f = minitrain::read_safetensors(path);
  const auto it = f.metadata.find(key);
  if (it == f.metadata.end()) {
    std::printf("%s: no metadata '%s'\n", path.c_str(), key.c_str());
    return 1;
  }
  std::printf("%s\n", it->second.c_str());
  return 0;
}

int write_table(const std::string& path, long long n, int in, int out) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::printf("cannot write %s\n", path.c_str());
    return 1;
  }
  for (int j = 0; j < in; ++j) std::fprintf(f, "%c,", static_cast<char>('a' + j));
  for (int k = 0; k < out; ++k) std::fprintf(f, "t%d%s", k + 1, k + 1 < out ? "," : "\n");
  std::vector<double> x(static_cast<std::size_t>(in));
  for (long long i = 0; i < n; ++i) {
    for (int j = 0; j < in; ++j) {
      x[static_cast<std::size_t>(j)] = std::sin(0.37 * static_cast<double>(i) + 1.3 * j);
      std::fprintf(f, "%.6f,", x[static_cast<std::size_t>(j)]);
    }
    for (int k = 0; k < out; ++k) {
      double t = 0;
      for (int j = 0; j < in; ++j) t += std::sin((j + k + 1) * x[static_cast<std::size_t>(j)]);
      std::fprintf(f, "%.6f%s", t / 2, k + 1 < out ? "," : "\n");
    }
  }
  return std::fclose(f) == 0 ? 0 : 1;
}

int close(const char* a_text, const char* b_text, double rtol) {
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double a = std::strtod(a_text, &end_a), b = std::strtod(b_text, &end_b);
  const bool ok = *end_a == '\0' && *end_b == '\0' && std::fabs(a - b) <= rtol * std::fabs(b);
  std::printf("%s %s vs %s (rtol %g)\n", ok ? "ok " : "BAD", a_text, b_text, rtol);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string what = argc > 1 ? argv[1] : "";
    if (what == "compare" && argc == 6)
      return compare(argv[2], argv[3], std::atof(argv[4]), std::atof(argv[5]));
    if (what == "weights" && argc == 4) return write_weights(argv[2], std::atoll(argv[3]));
    if (what == "metadata" && argc == 4) return metadata(argv[2], argv[3]);
    if (what == "table" && argc == 6)
      return write_table(argv[2], std::atoll(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
    if (what == "close" && argc == 5) return close(argv[2], argv[3], std::atof(argv[4]));
    if (what == "nearer" && argc == 6) return nearer(argv[2], argv[3], argv[4], std::atof(argv[5]));
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  std::printf(
      "usage: %s compare GOT WANT ATOL RTOL | nearer GOT WANT OTHER RATIO | weights PATH N | "
      "metadata FILE KEY | "
      "table PATH N IN OUT | close A B RTOL\n",
      argv[0]);
  return 2;
}
