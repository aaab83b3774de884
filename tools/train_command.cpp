// `minitrain train`: flag parsing only; the work is train/run_training.cpp.

#include "tools/train_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "parallel/launch/process_env.h"
#include "train/config.h"
#include "train/progress.h"
#include "train/restart_resume.h"
#include "train/run_training.h"
#include "train/stop_signals.h"

namespace minitrain::cli {
namespace {

const char* value_name(ConfigValueKind kind) {
  switch (kind) {
    case ConfigValueKind::Int:
      return "INT";
    case ConfigValueKind::Float:
      return "NUM";
    case ConfigValueKind::FloatPair:
      return "B1,B2";
    case ConfigValueKind::StringList:
      return "NAME,...";
    default:
      return "TEXT";
  }
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "done: steps 1-800 of 800 in 3.21 s (2e+04 samples/s); loss 0.512 -> 0.0312 (16.4x lower;
// step 1 -> epoch 8 mean), accuracy 0.95": the end is the last epoch's mean, not the last step's
// loss (often a small last batch's).
std::string done_line(const TrainSummary& s, int64_t total_steps) {
  char line[320];
  std::snprintf(line, sizeof line,
                "%s: steps %lld-%lld of %lld in %.2f s (%.0f samples/s); loss %.6g -> %.6g (",
                s.stopped_early ? "stopped" : "done", static_cast<long long>(s.first_step),
                static_cast<long long>(s.last_step), static_cast<long long>(total_steps), s.seconds,
                s.seconds > 0 ? s.samples / s.seconds : 0.0, s.first_loss, s.epoch_loss);
  std::string text = line;
  if (s.epoch_loss > 0 && s.epoch_loss < s.first_loss) {
    std::snprintf(line, sizeof line, "%.1fx lower; ", s.first_loss / s.epoch_loss);
    text += line;
  }
  text +=
      "step " + std::to_string(s.first_step) + " -> epoch " + std::to_string(s.epoch) + " mean)";
  if (std::isfinite(s.epoch_accuracy)) text += ", accuracy " + number(s.epoch_accuracy);
  return text;
}

// "held out (1000 rows): val_loss 0.0401, val_accuracy 0.94 after step 800; best val_loss 0.0398
// at step 700 (best.safetensors)".
std::string held_out_line(const TrainSummary& s, const TrainReport& r) {
  const auto metrics = [](const ValMetrics& v) {
    std::string t = "val_loss " + number(v.loss);
    if (std::isfinite(v.accuracy)) t += ", val_accuracy " + number(v.accuracy);
    if (std::isfinite(v.topk_accuracy))
      t += ", val_top" + std::to_string(v.topk) + "_accuracy " + number(v.topk_accuracy);
    return t;
  };
  std::string t = "held out (" + std::to_string(s.last_val->rows) +
                  " rows): " + metrics(*s.last_val) + " after step " + std::to_string(s.last_step);
  if (s.best_val) {
    t += "; best " + metrics(*s.best_val) + " at step " + std::to_string(s.best_step);
    if (!r.saved_best.empty()) t += " (" + r.saved_best + ")";
  }
  return t;
}

}  // namespace

TrainCommand::TrainCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("train",
                               "train a model; with no flags, an MLP on the built-in synthetic "
                               "regression on the best device");
  app_->add_option("--config", config_path_,
                   "TOML file of training keys (the long flags); flags override it")
      ->option_text("FILE");
  for (const ConfigKey& key : config_keys()) {
    const std::string flag = std::string("--") + key.name;
    if (key.kind == ConfigValueKind::Bool) {
      flags_[key.name] = false;
      app_->add_flag(flag, flags_[key.name], key.help);
    } else {
      values_[key.name];
      app_->add_option(flag, values_[key.name], key.help)->type_name(value_name(key.kind));
    }
  }
  app_->add_flag("--no-shuffle", no_shuffle_, "batches are consecutive rows in file order");
  const TrainConfig d;
  app_->footer("Defaults: --model " + d.model + " --activation " + d.activation + " --data " +
               d.data + ":" + std::to_string(kDefaultSyntheticRows) + " --optimizer " +
               d.optimizer + " --lr " + number(d.lr) + " --batch-size " +
               std::to_string(d.batch_size) + " --epochs " + std::to_string(kDefaultEpochs) +
               " --device " + d.device +
               ".\nA --config file holds the same keys (lr = 0.01, batch-size = 32, "
               "target-columns = [\"y\"]); flags given here override it.");
}

std::string TrainCommand::unknown_flag_message(int argc, char** argv) const {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") continue;
    arg = arg.substr(0, arg.find('='));
    const std::string name = arg.substr(2);
    // A config file's keys read '_' as '-', the command line does not: say which flag is meant.
    if (name.find('_') != std::string::npos && find_config_key(name)) {
      std::string dashed = name;
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      return "unknown option " + arg + " (did you mean --" + dashed + "?)";
    }
    if (arg == "--help" || arg == "--config" || arg == "--no-shuffle" || find_config_key(name))
      continue;
    const std::string hint = closest_config_key(arg.substr(2));
    return "unknown option " + arg +
           (hint.empty() ? std::string() : " (did you mean --" + hint + "?)");
  }
  return "";
}

bool TrainCommand::parsed() const { return app_->parsed(); }

int TrainCommand::run(std::ostream& out, std::ostream& progress) {
  TrainConfig config;
  if (!config_path_.empty()) apply_toml_config_file(config, config_path_);

  const auto given = [&](const std::string& key) { return app_->count("--" + key) > 0; };
  // The run length on the command line replaces the file's, of either kind.
  if (given("epochs") && !given("steps")) config.steps.reset();
  if (given("steps") && !given("epochs")) config.epochs.reset();
  for (const auto& [key, text] : values_)
    if (given(key)) set_config_value(config, key, text);
  for (const auto& [key, on] : flags_)
    if (given(key)) set_config_value(config, key, on ? "true" : "false");
  if (no_shuffle_) {
    if (given("shuffle")) MT_THROW(ValueError, "--shuffle and --no-shuffle both given; give one");
    config.shuffle = false;
  }

  // --parallel ddp: every rank runs this command. Rank 0 alone reports; an error says whose it is,
  // since the launcher interleaves the ranks' output.
  int rank = 0, world = 1;
  if (config.parallel == "ddp") {
    const ProcessEnv env = detect_process_env();
    rank = env.rank;
    world = env.world_size;
  }
  // A restart of a failed job (minitrain launch --max-restarts, minitrain supervise) resumes from
  // the job's last checkpoint by itself.
  const RestartResume restart = resume_after_restart(config, restart_count_from_environment());
  if (rank == 0 && !restart.note.empty()) out << restart.note << "\n" << std::flush;
  if (rank == 0 && !restart.warning.empty()) std::cerr << "warning: " << restart.warning << "\n";
  TrainReport r;
  StopOnSignals
      stop_on_signals;  // Ctrl-C / SIGTERM: finish the step, checkpoint, save, exit 130 / 143
  try {
    r = run_training(config, out, progress, &StopOnSignals::requested());
  } catch (const Error& e) {
    if (world <= 1) throw;
    // One write: std::cerr is unbuffered, and the ranks share mpirun's stderr, so a line written
    // piece by piece came out interleaved with the other rank's ("rank 1rank 0: ...").
    std::cerr << detail::concat("rank ", rank, ": minitrain: error: ", e.what(), "\n")
              << std::flush;
    return 1;
  }
  const TrainSummary& s = r.summary;
  // As a shell reports a process killed by the signal: 128 + its number (130 for SIGINT). A ddp
  // rank stopped because another rank was signalled reports SIGTERM's, the launcher's signal.
  const int exit_code = s.stopped_early ? 128 + (s.stop_signal != 0 ? s.stop_signal : SIGTERM) : 0;
  if (r.rank != 0) return exit_code;
  if (s.last_step >= s.first_step)
    out << done_line(s, r.total_steps) << "\n";
  else if (s.early_stopped)  // resuming a run that early stopping ended trains nothing
    out << "done: the checkpoint at step " << s.last_step << " of " << r.total_steps
        << " is of a run that early stopping ended; nothing to train\n";
  else
    out << "done: the checkpoint is already at step " << r.total_steps << "; nothing to train\n";
  if (s.last_val) out << held_out_line(s, r) << "\n";
  if (std::isfinite(s.loss_scale))
    out << "loss scale: " << number(s.loss_scale) << " after the last step; " << s.skipped_steps
        << " step(s) skipped for inf/NaN gradients (each halved the scale)\n";
  if (s.early_stopped) {
    // The best can lie before a resume (the count of evaluations without a lower val_loss goes
    // on across it): say where it was, not only where this process stopped.
    out << "early stop: no lower val_loss in " << config.early_stop
        << " evaluation(s) in a row; stopped after step " << s.last_step << " of " << r.total_steps;
    if (s.best_val) {
      out << "; the best, val_loss " << number(s.best_val->loss) << ", was at step " << s.best_step;
      if (r.resumed_from_step >= 0 && s.best_step <= r.resumed_from_step)
        out << " (before the resume from step " << r.resumed_from_step << ")";
    }
    out << "\n";
  }
  if (!s.last_checkpoint.empty()) out << "checkpoint: " << s.last_checkpoint << "\n";
  if (!r.saved.empty()) out << "weights: " << r.saved << "\n";
  if (!config.log.empty())
    out << "metrics: " << config.log
        << (r.world_size > 1 ? " (rank 0; rank r: .rank<r> before the extension)" : "") << "\n";
  if (s.stopped_early) {
    out << "interrupted by "
        << (s.stop_signal != 0 ? stop_signal_name(s.stop_signal) : "a signal to another rank")
        << " after step " << s.last_step << " of " << r.total_steps << "; ";
    if (!s.last_checkpoint.empty())
      out << "to continue, run the same command with --resume\n";
    else
      out << "no --checkpoint-dir was given, so there is nothing to resume from (give one to make "
             "an "
             "interrupted run resumable)\n";
  }
  return exit_code;
}

}  // namespace minitrain::cli
