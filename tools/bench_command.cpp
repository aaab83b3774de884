// `minitrain bench`: finds the bench programs, runs each as a child process with its console
// output passed through, and keeps its JSON. Each area's JSON is first written under a temporary
// name and renamed into place only when the program succeeded, so a failed or interrupted run
// never replaces the results of an earlier one.

#include "tools/bench_command.h"

#include <poll.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>

#include "core/device.h"
#include "core/error.h"
#include "core/strings.h"
#include "kernels/gemm/gemm_registry.h"
#include "parallel/launch/subprocess.h"
#include "tools/op_bench_command.h"

#ifndef MINITRAIN_BUILD_BENCH_DIR
#define MINITRAIN_BUILD_BENCH_DIR ""
#endif
#ifndef MINITRAIN_SOURCE_DIR
#define MINITRAIN_SOURCE_DIR ""
#endif

namespace fs = std::filesystem;

namespace minitrain::cli {
namespace {

// --quick: Google Benchmark's minimum time per benchmark, in seconds (its default is 0.5). A plain
// number, as benchmark 1.7 reads it (1.8 also takes "0.01s").
constexpr const char* kQuickMinTime = "0.01";

std::string area_names() {
  std::vector<std::string> names;
  for (const BenchArea& a : bench_areas()) names.push_back(a.name);
  return join(names, ", ");
}

const BenchArea* find_area(const std::string& name) {
  for (const BenchArea& a : bench_areas())
    if (a.name == name) return &a;
  return nullptr;
}

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// Single-quotes a word for a POSIX shell when it needs it, so a printed command can be pasted.
std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string("-_./=:,+@%").find(c) != std::string::npos;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string join_command(const std::vector<std::string>& argv) {
  std::vector<std::string> quoted;
  for (const std::string& a : argv) quoted.push_back(shell_quote(a));
  return join(quoted, " ");
}

// Runs argv with stdout and stderr passed line by line to `out` (so that the caller's stream, a
// terminal or a log, gets them in order). The child stays in our process group: Ctrl-C stops both.
ExitStatus run_passing_output(const std::vector<std::string>& argv, std::ostream& out) {
  SubprocessOptions options;
  options.argv = argv;
  options.new_process_group = false;
  Subprocess child = Subprocess::start(options);
  while (child.output_fd() >= 0) {
    pollfd p{child.output_fd(), POLLIN, 0};
    ::poll(&p, 1, /*timeout_ms=*/200);
    for (const std::string& line : child.read_lines()) out << line << "\n";
    out.flush();
  }
  return child.wait();
}

// What one run left in its JSON: how many results, and the first error a benchmark reported.
struct JsonSummary {
  int64_t results = 0;
  int64_t errors = 0;
  std::string first_error;
};

JsonSummary summarize_json(const std::string& path) {
  std::ifstream in(path);
  MT_CHECK_AS(IoError, in.good(), "minitrain bench: cannot read the benchmark's JSON '", path, "'");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    MT_THROW(IoError, "minitrain bench: '", path, "' is not valid JSON (", e.what(), ")");
  }
  JsonSummary s;
  for (const auto& b : j.value("benchmarks", nlohmann::json::array())) {
    ++s.results;
    if (b.value("error_occurred", false)) {
      if (s.errors++ == 0)
        s.first_error = b.value("name", "?") + ": " + b.value("error_message", "?");
    }
  }
  return s;
}

}  // namespace

const std::vector<BenchArea>& bench_areas() {
  static const std::vector<BenchArea> areas = {
      {"gemm", "minitrain_gemm_bench",
       "every GEMM backend (ladder, cuBLAS; OpenBLAS, Eigen), squares and MLP shapes: GFLOP/s, % "
       "of ref"},
      {"gemm-cpu", "minitrain_gemm_cpu_bench",
       "minitrain's CPU GEMM against OpenBLAS and Eigen: GFLOP/s"},
      {"linear", "minitrain_linear_bench",
       "Linear forward against the bare GEMM + bias-add calls it makes: % of bare"},
      {"memory", "minitrain_memory_bench",
       "memory-bound kernels 4 KiB..1 GiB: GB/s, % of device-to-device copy"},
      {"optimizer", "minitrain_optimizer_bench",
       "SGD/Adam/AdamW, fused vs one launch per tensor: params/s"},
      {"train-step", "minitrain_train_step_bench",
       "one MLP training step, widths 64..1024, CPU and GPU: samples/s"},
      {"allreduce", "minitrain_allreduce_bench",
       "all-reduce on the threads backend, ring vs native: algbw, busbw"},
      {"ddp", "minitrain_ddp_bench",
       "DistributedDataParallel step, 2 thread ranks, overlap on/off, bucket sizes: samples/s, "
       "x one rank, overlap vs none"},
      {"pipeline", "minitrain_pipeline_bench",
       "GPipe pipeline step by stages and micro-batches: bubble fraction"},
      {"data-parallel", "minitrain_data_parallel_bench",
       "data-parallel step and its scaling with CPU replicas"},
      {"data-loader", "minitrain_data_loader_bench",
       "DataLoader workers 0/1/2/4 on a 5 ms-per-batch data set: samples/s, x 0 workers"},
      {"thread-policy", "minitrain_thread_policy_bench",
       "the large-layer step under each OpenMP wait policy, idle and loaded: x passive"},
      {"precision", "minitrain_precision_bench",
       "one Adam step per precision fp32/bf16/fp16: samples/s, allocator peak, bytes kept"},
  };
  return areas;
}

BenchDir find_bench_dir() {
  BenchDir d;
  if (const char* env = std::getenv("MINITRAIN_BENCH_DIR"); env != nullptr && *env != '\0') {
    std::error_code ec;
    MT_CHECK_AS(ValueError, fs::is_directory(env, ec), "MINITRAIN_BENCH_DIR is '", env,
                "', which is not a directory; point it at the bench/ folder of a build tree "
                "(e.g. build/release/bench) or unset it");
    d.path = env;
    d.source = "MINITRAIN_BENCH_DIR";
    return d;
  }
  // <build>/tools/minitrain -> <build>/bench: the programs built with this very binary.
  const std::vector<std::pair<std::string, std::string>> candidates = {
      {(fs::path(self_executable()).parent_path().parent_path() / "bench").string(),
       "beside this minitrain binary"},
      {MINITRAIN_BUILD_BENCH_DIR, "the build tree minitrain was compiled in"},
  };
  for (const auto& [path, source] : candidates) {
    if (path.empty()) continue;
    d.looked += (d.looked.empty() ? "" : ", ") + path;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      d.path = path;
      d.source = source;
      return d;
    }
  }
  return d;
}

BenchCommand::BenchCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "bench", "run the kernel and training benchmarks (Google Benchmark), keep their JSON");
  app_->add_option("areas", areas_,
                   "areas to run (default: every one that is built): " + area_names() +
                       "; or `op [NAME [VARIANT...]]`: list the registered ops, or verify and "
                       "time one op's variants (docs/op_bench.md)");
  app_->add_flag("--list", list_, "list the areas, their programs and whether they are built");
  app_->add_option("--out", out_dir_, "directory for <area>.json (default bench-results)");
  app_->add_option("--filter", filter_,
                   "only benchmarks whose name matches this regex (--benchmark_filter)");
  app_->add_flag("--quick", quick_,
                 std::string("a short run: --benchmark_min_time=") + kQuickMinTime);
  app_->add_option("--size", op_.sizes, "bench op: elements of the main operand (several: each)");
  app_->add_option("--device", op_.device, "bench op: cpu, cuda, cuda:N or auto (default auto)");
  app_->add_option("--runs", op_.runs, "bench op: timed calls per variant and size (default 20)");
  app_->add_flag("--counters", counters_,
                 "bench gemm on emulated GPUs: each ladder rung's exact memory counters, "
                 "occupancy and modelled time (docs/emulator_counters.md)");
  app_->add_option("--device-profile", counters_request_.device_profile,
                   "bench gemm --counters: h100 (default), h200, a100, l4, rtx4090 or t4");
  app_->add_option("--shape", counters_request_.shape,
                   "bench gemm --counters: M,N,K (default 256,256,256)");
  app_->add_option(
      "--json", counters_request_.json,
      "bench gemm --counters: also write the table as JSON (minitrain plot --roofline)");
}

bool BenchCommand::parsed() const { return app_->parsed(); }

int BenchCommand::list(std::ostream& out, const BenchDir& dir) const {
  if (dir.path.empty())
    out << "bench programs: none found (looked in " << dir.looked
        << "); build with -DMINITRAIN_BUILD_BENCHMARKS=ON or "
        << "set MINITRAIN_BENCH_DIR\n";
  else
    out << "bench programs: " << dir.path << " (" << dir.source << ")\n";
  out << "areas:\n";
  for (const BenchArea& a : bench_areas()) {
    const bool built = !dir.path.empty() && is_executable_file(dir.path + "/" + a.program);
    out << "  " << std::left << std::setw(14) << a.name << std::setw(11)
        << (built ? "built" : "not built") << a.what << "\n";
  }
  // What the gemm area measures (and what `minitrain train --gemm NAME` takes), with its technique.
  for (const auto& [type, label] :
       {std::pair{DeviceType::CPU, "cpu"}, std::pair{DeviceType::CUDA, "cuda"}}) {
    const std::vector<std::string> names = gemm_backend_names(type);
    out << "GEMM backends (" << label << "):";
    if (names.empty())
      out << " none" << (type == DeviceType::CUDA && !cuda_compiled() ? " (CPU-only build)" : "");
    out << "\n";
    const Device device = type == DeviceType::CPU ? Device::cpu() : Device::cuda(0);
    const std::string fallback = names.empty() ? "" : default_gemm_backend(device);
    for (const std::string& name : names)
      out << "  " << std::left << std::setw(16) << name << (name == fallback ? "(default) " : "")
          << gemm_backend(name).technique << "\n";
  }
  return 0;
}

int BenchCommand::run(std::ostream& out, std::ostream& err) {
  const bool profile_or_shape =
      app_->count("--device-profile") + app_->count("--shape") + app_->count("--json") > 0;
  if (counters_ || profile_or_shape) {
    MT_CHECK_AS(
        ValueError, counters_ && areas_ == std::vector<std::string>{"gemm"},
        "minitrain bench: --counters, --device-profile, --shape and --json go with `minitrain "
        "bench gemm --counters` only (got areas '",
        join(areas_, " "), "'", counters_ ? "" : " without --counters", ")");
    return run_gemm_counters(counters_request_, out, err);
  }
  if (!areas_.empty() && areas_.front() == "op") {
    op_.words.assign(areas_.begin() + 1, areas_.end());
    return run_op_bench(op_, out, err);
  }
  // Unknown areas first: a typo should cost nothing.
  std::vector<const BenchArea*> chosen;
  for (const std::string& name : areas_) {
    const BenchArea* a = find_area(name);
    if (a == nullptr) {
      err << "minitrain bench: unknown area '" << name << "' (areas: " << area_names()
          << "); see minitrain bench --list\n";
      return 2;
    }
    if (std::find(chosen.begin(), chosen.end(), a) == chosen.end()) chosen.push_back(a);
  }
  const BenchDir dir = find_bench_dir();
  if (list_) return list(out, dir);

  const bool all = chosen.empty();
  if (all)
    for (const BenchArea& a : bench_areas()) chosen.push_back(&a);
  std::vector<const BenchArea*> runnable;
  for (const BenchArea* a : chosen) {
    const std::string program = dir.path + "/" + a->program;
    if (!dir.path.empty() && is_executable_file(program)) {
      runnable.push_back(a);
      continue;
    }
    const std::string why =
        dir.path.empty() ? "no bench directory (looked in " + dir.looked + ")" : "no " + program;
    if (!all) {
      // Asked for by name: stop before spending minutes on the others.
      err << "minitrain bench: area '" << a->name << "' is not built: " << why
          << "; build it (ninja " << a->program
          << ") or set MINITRAIN_BENCH_DIR to the bench/ folder that has it\n";
      return 1;
    }
    out << "skipping " << a->name << ": not built (" << why << ")\n";
  }
  if (runnable.empty()) {
    err << "minitrain bench: no bench program is built; build the bench targets "
           "(-DMINITRAIN_BUILD_BENCHMARKS=ON) "
        << "or set MINITRAIN_BENCH_DIR\n";
    return 1;
  }

  std::error_code ec;
  fs::create_directories(out_dir_, ec);
  MT_CHECK_AS(IoError, !ec && fs::is_directory(out_dir_),
              "minitrain bench: cannot create the output directory '", out_dir_,
              "': ", ec ? ec.message() : "a file of that name exists",
              "; choose another with --out");

  std::vector<std::string> written;
  int failed = 0;
  for (const BenchArea* a : runnable) {
    const std::string final_path = (fs::path(out_dir_) / (a->name + ".json")).string();
    const std::string temp_path =
        (fs::path(out_dir_) / ("." + a->name + ".json.partial." + std::to_string(::getpid())))
            .string();
    std::vector<std::string> argv = {dir.path + "/" + a->program, "--benchmark_format=console",
                                     "--benchmark_out=" + temp_path, "--benchmark_out_format=json"};
    if (!filter_.empty()) argv.push_back("--benchmark_filter=" + filter_);
    if (quick_) argv.push_back(std::string("--benchmark_min_time=") + kQuickMinTime);
    out << "== " << a->name << ": " << join_command(argv) << "\n";
    out.flush();

    const ExitStatus status = run_passing_output(argv, out);
    if (!status.ok()) {
      fs::remove(temp_path, ec);
      err << "minitrain bench: " << a->program << " failed (" << status.str() << "); " << final_path
          << " left as it was\n";
      ++failed;
      continue;
    }
    // Google Benchmark leaves the file empty when the filter matches nothing.
    const bool empty = !fs::exists(temp_path, ec) || fs::file_size(temp_path, ec) == 0;
    JsonSummary s;
    try {
      if (!empty) s = summarize_json(temp_path);
    } catch (const IoError& e) {
      fs::remove(temp_path, ec);
      err << e.what() << "; " << final_path << " left as it was\n";
      ++failed;
      continue;
    }
    if (s.results == 0) {
      fs::remove(temp_path, ec);
      out << "   " << a->name << ": no benchmark matched"
          << (filter_.empty() ? "" : " --filter '" + filter_ + "'") << "; nothing written\n";
      continue;
    }
    fs::rename(temp_path, final_path, ec);
    MT_CHECK_AS(IoError, !ec, "minitrain bench: cannot rename '", temp_path, "' to '", final_path,
                "': ", ec.message());
    written.push_back(final_path);
    out << "   " << a->name << ": " << s.results << " result(s) -> " << final_path << "\n";
    if (s.errors > 0) {
      err << "minitrain bench: " << a->program << ": " << s.errors
          << " benchmark(s) reported an error, the first " << s.first_error << "\n";
      ++failed;
    }
  }

  if (!written.empty()) {
    const std::string script = std::string(MINITRAIN_SOURCE_DIR) + "/scripts/plot_bench.py";
    std::error_code exists_ec;
    const bool have_script =
        !std::string(MINITRAIN_SOURCE_DIR).empty() && fs::exists(script, exists_ec);
    out << "results: ";
    for (size_t i = 0; i < written.size(); ++i) out << (i ? " " : "") << written[i];
    out << "\ndraw them (markdown tables, PNG and SVG charts): python3 "
        << shell_quote(have_script ? script : "scripts/plot_bench.py") << " "
        << shell_quote(out_dir_) << "/*.json --out " << shell_quote(out_dir_) << "\n";
  } else if (failed == 0) {
    err << "minitrain bench: no results"
        << (filter_.empty() ? "" : ": no benchmark matched --filter '" + filter_ + "'") << "\n";
    return 1;
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace minitrain::cli
