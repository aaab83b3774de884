// The minitrain command. Each subcommand lives in its own file; this one parses the command
// line, runs it, and turns any error into one clear line and a non-zero exit.

#include <CLI/CLI.hpp>

#include <iostream>

#include "core/error.h"
#include "core/thread_policy.h"
#include "core/version.h"
#include "kernels/gemm/openblas_core.h"
#if MINITRAIN_WITH_MPI
#include "parallel/comm/mpi_communicator.h"
#include "parallel/launch/mpi_bootstrap.h"
#endif
#include "tools/bench_command.h"
#include "tools/evaluate_command.h"
#include "tools/export_command.h"
#include "tools/info_command.h"
#include "tools/launch_command.h"
#include "tools/runs_command.h"
#include "tools/plot_command.h"
#include "tools/predict_command.h"
#include "tools/supervise_command.h"
#include "tools/train_command.h"

int main(int argc, char** argv) {
  // Before anything else: this may start the program again (Note [passive thread waiting]).
  minitrain::use_passive_thread_waiting(argv);
#if MINITRAIN_WITH_MPI
  minitrain::use_mpi_backend();  // --parallel ddp under mpirun (Note [MPI as an opt-in library])
#endif
  // OpenBLAS's kernels for this CPU, before any thread can be inside it (Note [OpenBLAS core]).
  minitrain::select_openblas_core();
  CLI::App app{"minitrain: a small C++/CUDA deep-learning framework"};
  app.require_subcommand(1);
  app.set_version_flag("--version", MINITRAIN_VERSION);

  CLI::App* info = app.add_subcommand("info", "devices, memory, CUDA/cuBLAS/cuDNN/NCCL versions");
  bool info_libraries = false;
  info->add_flag("--libraries", info_libraries,
                 "open cuBLAS, cuDNN and NCCL now, even without a GPU, and say which files were "
                 "found (exit 1 if one is missing)");
  minitrain::cli::TrainCommand train(app);
  minitrain::cli::PredictCommand predict(app);
  minitrain::cli::EvaluateCommand evaluate(app);
  minitrain::cli::ExportCommand export_model(app);
  minitrain::cli::LaunchCommand launch(app);
  minitrain::cli::SuperviseCommand supervise(app);
  minitrain::cli::RunsCommand pipelines(app);
  minitrain::cli::BenchCommand bench(app);
  minitrain::cli::PlotCommand plot(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports an unknown command as "A subcommand is required"; name it instead.
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::cerr << "minitrain: unknown command '" << argv[1]
                << "' (commands: info, train, predict, evaluate, export, launch, supervise, "
                   "pipelines, bench, plot); see minitrain --help\n";
      return 2;
    }
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line: what was wrong, and where to look.
    const std::string command =
        app.get_subcommands().empty() ? "" : " " + app.get_subcommands().front()->get_name();
    std::string what = e.what();
    if (train.parsed() || command == " train") {
      const std::string unknown = train.unknown_flag_message(argc, argv);
      if (!unknown.empty()) what = unknown;
    }
    std::cerr << "minitrain" << command << ": error: " << what << "; see minitrain" << command
              << " --help\n";
    return 2;
  }

  int code = 0;
  try {
    if (info->parsed())
      code = minitrain::cli::run_info(std::cout, info_libraries);
    else if (train.parsed())
      code = train.run(std::cout, std::cerr);
    else if (predict.parsed())
      code = predict.run(std::cout);
    else if (evaluate.parsed())
      code = evaluate.run(std::cout);
    else if (export_model.parsed())
      code = export_model.run(std::cout);
    else if (launch.parsed())
      code = launch.run(std::cout, std::cerr);
    else if (supervise.parsed())
      code = supervise.run(std::cout, std::cerr);
    else if (pipelines.parsed())
      code = pipelines.run(std::cout, std::cerr);
    else if (bench.parsed())
      code = bench.run(std::cout, std::cerr);
    else if (plot.parsed())
      code = plot.run();
  } catch (const minitrain::Error& e) {
    std::cerr << "minitrain: error: " << e.what() << "\n";
    code = 1;
  } catch (const std::exception& e) {
    std::cerr << "minitrain: internal error: " << e.what() << "\n";
    code = 2;
  }
  // A failed rank of an MPI job (mpirun ... minitrain train --parallel ddp) does not return
  // straight into MPI_Finalize, which waits for every peer: one that is stopped or dead, or still
  // inside the collective this rank gave up on, would keep it there for ever. It aborts the job
  // instead, unless every rank is leaving together (Note [MPI timeouts]). Nothing happens outside
  // an MPI job of two or more ranks.
#if MINITRAIN_WITH_MPI
  if (code != 0) minitrain::MpiRuntime::leave_job_after_failure(code);
#endif
  return code;
}
