#include "tools/gemm_counters_command.h"

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <random>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/stream.h"
#include "core/strings.h"
#include "core/tensor.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_rungs.h"
#include "kernels/gemm/gemm_registry.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/counters.h"
#include "cuda_emu/kernel_registers.h"
#include "cuda_emu/occupancy.h"
#endif

namespace minitrain::cli {
namespace {

struct Shape3 {
  int64_t m = 0, n = 0, k = 0;
};

Shape3 parse_shape(const std::string& text) {
  const std::vector<std::string> parts = split(text, ',');
  Shape3 s;
  bool ok = parts.size() == 3;
  int64_t* dims[] = {&s.m, &s.n, &s.k};
  for (std::size_t i = 0; ok && i < 3; ++i) {
    try {
      std::size_t used = 0;
      *dims[i] = std::stoll(parts[i], &used);
      ok = used == parts[i].size() && *dims[i] >= 1 && *dims[i] <= 4096;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  MT_CHECK_AS(ValueError, ok, "minitrain bench gemm --shape: '", text,
              "' is not M,N,K with each a whole number from 1 to 4096 (e.g. 256,256,256)");
  return s;
}

#if MINITRAIN_CUDA_EMULATED
// Small integers: every rung, the tensor-core ones included, gives the exact product, so a rung
// that is wrong shows as WRONG rather than as rounding.
Tensor small_ints(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-3, 3);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (float& x : v) x = float(d(gen));
  return Tensor::from_vector(v, Shape{rows, cols});
}
#endif

}  // namespace

int run_gemm_counters(const GemmCountersRequest& request, std::ostream& out, std::ostream& err) {
  const Shape3 s = parse_shape(request.shape);
#if !MINITRAIN_CUDA_EMULATED
  (void)out;
  (void)err;
  (void)s;
  MT_THROW(DeviceError,
           "minitrain bench gemm --counters: the counters are the emulated GPU's, and this build "
           "has none (build the emu preset: cmake --preset emu); on a real GPU Nsight Compute "
           "(ncu) measures them");
#else
  const mtemu::DeviceProfile* profile = nullptr;
  try {
    profile = &mtemu::device_profile(request.device_profile);
  } catch (const std::invalid_argument& e) {
    MT_THROW(ValueError, "minitrain bench gemm --device-profile: ", e.what());
  }
  MT_CHECK_AS(DeviceError, cuda_device_count() > 0,
              "minitrain bench gemm --counters: no emulated GPU: ", cuda_unavailable_reason());
  const Device dev = Device::cuda(0);
  const Tensor a_cpu = small_ints(s.m, s.k, 1), b_cpu = small_ints(s.k, s.n, 2);
  Tensor want = Tensor::zeros({s.m, s.n});
  gemm(want, a_cpu, false, b_cpu, false);
  const std::vector<float> want_v = want.to_vector<float>();
  const Tensor a = a_cpu.to(dev), b = b_cpu.to(dev);
  const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
  // L1/shared bandwidth: 32 banks x 4 bytes (one wavefront) per SM per clock, at the boost clock;
  // L2: the profile's bytes per clock at the boost clock (published for A100 only: see
  // docs/emulator_counters.md).
  const double l1_bytes_per_s = profile->l1_bytes_per_s();
  const double l2_bytes_per_s = profile->l2_bytes_per_s();

  out << "GEMM " << s.m << " x " << s.n << " x " << s.k
      << " (float32, C = A B) on an emulated GPU, per ladder rung:\n"
      << "  counters: exact, Nsight Compute's definitions (docs/emulator_counters.md)\n"
      << "  occupancy: theoretical, " << profile->name << " profile, registers from "
      << mtemu::kernel_registers_source()
      << (std::string(profile->key) == "h100" || std::string(profile->key) == "h200"
              ? ""
              : " (another architecture's build: its counts may differ)")
      << "\n"
      << "  time, GFLOP/s, % of roof, bound: MODELLED (roofline: " << profile->fp32_flops / 1e12
      << " TFLOP/s FP32, " << profile->dram_bytes_per_s / 1e12
      << " TB/s DRAM over the distinct bytes, 3 us per launch), not measured\n"
      << "  levels: MODELLED hierarchical roofline, the longest of compute, DRAM, L2 ("
      << l2_bytes_per_s / 1e12 << " TB/s" << (profile->l2_published ? "" : ", assumed")
      << ") and L1 (" << l1_bytes_per_s / 1e12 << " TB/s) plus 3 us per launch\n\n";
  auto col = [&](int w, const std::string& text) { out << std::left << std::setw(w) << text; };
  col(17, "rung");
  col(9, "ld s/req");
  col(9, "st s/req");
  col(11, "bank conf");
  col(7, "lanes");
  col(6, "regs");
  col(22, "occupancy (limiter)");
  col(8, "FLOP/B");
  col(14, "modelled us");
  col(18, "modelled GFLOP/s");
  col(11, "% of roof");
  col(9, "bound");
  col(10, "L2 FLOP/B");
  col(11, "levels us");
  col(13, "levels bound");
  out << "result\n";
  int wrong = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (const char* rung : gemm_ladder::kRungNames) {
    Tensor c = Tensor::zeros({s.m, s.n}, DType::Float32, dev);
    mtemu::counters_take();
    mtemu::counters_collect(true);
    gemm_with(rung, c, a, false, b, false);
    synchronize(dev);
    mtemu::counters_collect(false);
    const std::vector<mtemu::LaunchCounters> launches = mtemu::counters_take();
    const bool exact = c.to(Device::cpu()).to_vector<float>() == want_v;
    wrong += exact ? 0 : 1;
    uint64_t ld_req = 0, ld_sec = 0, st_req = 0, st_sec = 0, conflicts = 0, lanes = 0, reqs = 0;
    uint64_t bytes = 0, moved = 0, wavefronts = 0;
    double time_s = 0, l2_bytes = 0;
    bool l2_reuse_fits = true;
    for (const mtemu::LaunchCounters& l : launches) {
      ld_req += l.global_load_requests;
      ld_sec += l.global_load_sectors;
      st_req += l.global_store_requests;
      st_sec += l.global_store_sectors;
      conflicts += l.shared_bank_conflicts;
      lanes += l.lanes;
      reqs += l.memory_requests();
      bytes += l.distinct_bytes_touched;
      moved += l.bytes_moved;
      wavefronts += l.shared_load_wavefronts + l.shared_store_wavefronts;
    }
    // Occupancy is a launch's, not a rung's: where a rung launches several kernels, the row gives
    // the one with the most memory requests (mtemu::dominant_launch) and names it; a line under
    // the row gives each launch's.
    auto occupancy_of = [&](const mtemu::LaunchCounters& l) {
      const mtemu::KernelRegisters* r = mtemu::kernel_registers(l.file, l.kernel);
      const int threads = int(l.block[0] * l.block[1] * l.block[2]);
      const mtemu::Occupancy o =
          mtemu::theoretical_occupancy(*profile, threads, r ? r->registers_max : -1,
                                       (r ? r->static_smem_max : 0) + l.dynamic_smem);
      std::ostringstream text;
      text << std::fixed << std::setprecision(1) << o.occupancy_pct << "% (" << o.limiter
           << (r ? "" : ", upper bound") << ")";
      return std::make_pair(o, text.str());
    };
    std::string regs = "?", occupancy = "?", limiter, occupancy_kernel;
    int regs_n = -1;
    double occupancy_pct = 0;
    std::string per_launch;
    nlohmann::json launch_rows = nlohmann::json::array();
    const int dominant = mtemu::dominant_launch(launches);
    for (std::size_t i = 0; i < launches.size(); ++i) {
      const mtemu::LaunchCounters& l = launches[i];
      const mtemu::KernelRegisters* r = mtemu::kernel_registers(l.file, l.kernel);
      const auto [o, text] = occupancy_of(l);
      launch_rows.push_back({{"kernel", l.kernel},
                             {"memory_requests", l.memory_requests()},
                             {"registers", r ? nlohmann::json(r->registers_max) : nlohmann::json()},
                             {"occupancy_pct", o.occupancy_pct},
                             {"occupancy_limiter", o.limiter}});
      const mtemu::L2Traffic l2 = mtemu::l2_traffic(*profile, l, o);
      l2_bytes += l2.bytes;
      l2_reuse_fits = l2_reuse_fits && l2.reuse_fits_l1;
      per_launch += std::string(per_launch.empty() ? "" : "; ") + l.kernel + " " + text +
                    (int(i) == dominant ? " [row]" : "");
      if (int(i) != dominant) continue;
      regs = r ? std::to_string(r->registers_max) : "unknown";
      regs_n = r ? r->registers_max : -1;
      occupancy_pct = o.occupancy_pct;
      limiter = o.limiter;
      occupancy = text;
      occupancy_kernel = l.kernel;
    }
    const mtemu::RooflineModel m = mtemu::roofline_model(
        *profile, flops, double(bytes), mtemu::kModelLaunchOverheadS * double(launches.size()));
    time_s = m.time_s;
    // The hierarchical roofline's L1 level (Nsight Compute's l1tex bytes), MODELLED: what the
    // requests move through L1 and shared memory (global sectors x 32 plus shared wavefronts x
    // 128) at one 128-byte wavefront per SM per clock; the launch takes the longest of compute,
    // DRAM and L1. Coalescing and tiling change these bytes, so the rungs separate here.
    const double l1_bytes = double(moved) + 128.0 * double(wavefronts);
    const double l1_s = l1_bytes / l1_bytes_per_s;
    const double hier_busy = std::max({m.compute_s, m.memory_s, l1_s});
    const double hier_time_s = hier_busy + m.overhead_s;
    const char* hier_bound = m.overhead_s > hier_busy   ? "overhead"
                             : hier_busy == m.compute_s ? "compute"
                             : hier_busy == m.memory_s  ? "dram"
                                                        : "l1";
    // Every level at once: the modelled time is the longest of compute, DRAM, L2 and L1.
    const mtemu::RooflineLevels levels =
        mtemu::roofline_levels(*profile, flops, double(bytes), l2_bytes, l1_bytes, m.overhead_s);
    auto ratio = [](uint64_t a, uint64_t b) {
      std::ostringstream o;
      o << std::fixed << std::setprecision(2) << (b ? double(a) / double(b) : 0.0);
      return o.str();
    };
    auto fixed = [](double v, int p) {
      std::ostringstream o;
      o << std::fixed << std::setprecision(p) << v;
      return o.str();
    };
    col(17, rung);
    col(9, ratio(ld_sec, ld_req));
    col(9, ratio(st_sec, st_req));
    col(11, std::to_string(conflicts));
    col(7, fixed(reqs ? double(lanes) / double(reqs) : 0.0, 1));
    col(6, regs);
    col(22, occupancy);
    col(8, fixed(m.intensity, 1));
    col(14, fixed(time_s * 1e6, 2));
    col(18, fixed(m.gflops, 0));
    col(11, fixed(m.pct_of_roof, 1));
    col(9, m.bound);
    col(10, fixed(l2_bytes > 0 ? flops / l2_bytes : 0.0, 1));
    col(11, fixed(levels.time_s * 1e6, 2));
    col(13, levels.bound);
    out << (exact ? "exact" : "WRONG") << "\n";
    if (launches.size() > 1)
      out << "  " << launches.size() << " launches; occupancy per launch ([row]: the one with the "
          << "most memory requests, the row's): " << per_launch << "\n";
    rows.push_back(
        {{"rung", rung},
         {"exact", exact},
         {"launches", launches.size()},
         {"global_load_sectors_per_request", ld_req ? double(ld_sec) / double(ld_req) : 0.0},
         {"global_store_sectors_per_request", st_req ? double(st_sec) / double(st_req) : 0.0},
         {"shared_bank_conflicts", conflicts},
         {"registers", regs_n >= 0 ? nlohmann::json(regs_n) : nlohmann::json()},
         {"occupancy_pct", occupancy_pct},
         {"occupancy_limiter", limiter},
         {"occupancy_kernel", occupancy_kernel},
         {"launch_occupancy", launch_rows},
         {"flops", flops},
         {"distinct_bytes", bytes},
         {"bytes_moved", moved},
         {"intensity", m.intensity},
         {"modelled_time_s", m.time_s},
         {"modelled_gflops", m.gflops},
         {"pct_of_roof", m.pct_of_roof},
         {"bound", m.bound},
         {"l1_bytes", l1_bytes},
         {"l1_intensity", l1_bytes > 0 ? flops / l1_bytes : 0.0},
         {"modelled_l1_time_s", hier_time_s},
         {"modelled_l1_gflops", hier_time_s > 0 ? flops / hier_time_s / 1e9 : 0.0},
         {"l1_bound", hier_bound},
         {"l2_bytes", l2_bytes},
         {"l2_intensity", l2_bytes > 0 ? flops / l2_bytes : 0.0},
         {"l2_reuse_fits_l1", l2_reuse_fits},
         {"modelled_levels_time_s", levels.time_s},
         {"modelled_levels_gflops", levels.gflops},
         {"levels_bound", levels.bound}});
    if (!exact)
      err << "minitrain bench gemm --counters: rung '" << rung
          << "' does not give the CPU's exact product on small integers\n";
  }
  out << "\nld/st s/req: global sectors per request (4 is a coalesced warp of floats, 32 the "
         "worst); bank conf: shared-memory wavefronts beyond one per request; lanes: active lanes "
         "per memory request.\nThe DRAM roofline charges every rung the same distinct bytes, so "
         "their modelled times agree where the ops agree; the levels columns also charge the L2 "
         "bytes (each block's distinct load sectors, or all of them where its reuse does not fit "
         "L1, plus every store) and the L1 bytes (global sectors and shared wavefronts), which "
         "tell the rungs apart (what the model leaves out: docs/emulator_counters.md).\n";
  if (!request.json.empty()) {
    const nlohmann::json doc = {
        {"shape", {s.m, s.n, s.k}},
        {"profile",
         {{"key", profile->key},
          {"name", profile->name},
          {"fp32_flops", profile->fp32_flops},
          {"dram_bytes_per_s", profile->dram_bytes_per_s},
          {"l1_bytes_per_s", l1_bytes_per_s},
          {"l2_bytes_per_s", l2_bytes_per_s},
          {"l2_bandwidth_published", profile->l2_published}}},
        {"registers_from", mtemu::kernel_registers_source()},
        {"note", "counters exact; occupancy theoretical; times modelled, not measured"},
        {"rungs", rows}};
    write_file_atomically(request.json, doc.dump(1) + "\n");
    out << "wrote " << request.json << " (minitrain plot --roofline " << request.json << ")\n";
  }
  return wrong == 0 ? 0 : 1;
#endif
}

}  // namespace minitrain::cli
