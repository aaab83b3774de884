// runs.toml for `minitrain pipelines`: defaults, per-run keys, paths, and which problems reject
// the whole file (with file:line) versus fail only their run.

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "tests/support/test_util.h"
#include "train/config.h"
#include "train/runs_config.h"

namespace minitrain {
namespace {

using testing::error_message;

RunsFile parse(const std::string& text) {
  return parse_runs_config(text, "runs.toml", "/data/dir");
}

TEST(RunsConfig, PriorityComesFromTheRunOrTheDefaultsAndIsChecked) {
  const RunsFile f = parse(R"(
[defaults]
priority = -3

[[run]]
name = "urgent"
priority = 7

[[run]]
name = "background"
)");
  ASSERT_EQ(f.runs.size(), 2u);
  EXPECT_EQ(f.runs[0].priority, 7);
  EXPECT_EQ(f.runs[1].priority, -3);
  // A bad value fails that run (the others still run), naming the line.
  EXPECT_NE(parse("[[run]]\nname = \"a\"\npriority = 30\n")
                .runs[0]
                .error.find("runs.toml:3: priority must be an integer in [-19, 19]"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              parse("[sweep]\npriority = [1, 2]\n");
            }).find("[sweep] cannot vary 'priority'"),
            std::string::npos);
}

TEST(RunsConfig, RunKeysOverrideDefaultsAndPathsResolveAgainstTheFile) {
  const RunsFile f = parse(R"(
[defaults]
data = "train.csv"
target-columns = ["y"]
lr = 0.5
steps = 7

[[run]]
name = "a"
device = "cpu"

[[run]]
name = "b.2"
lr = 0.25
data = "/abs/other.csv"
log = "logs/b.jsonl"
memory-cap = "4GiB"
)");
  ASSERT_EQ(f.runs.size(), 2u);
  const RunsFileEntry& a = f.runs[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.line, 8);  // the raw string starts with a newline
  EXPECT_EQ(a.config.device, "cpu");
  EXPECT_EQ(a.config.data, "/data/dir/train.csv");
  EXPECT_EQ(a.config.target_columns, std::vector<std::string>{"y"});
  EXPECT_DOUBLE_EQ(a.config.lr, 0.5);
  EXPECT_EQ(a.config.steps, 7);
  const RunsFileEntry& b = f.runs[1];
  EXPECT_EQ(b.name, "b.2");
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.config.device, "auto");  // the built-in default, untouched by [defaults]
  EXPECT_DOUBLE_EQ(b.config.lr, 0.25);
  EXPECT_EQ(b.config.data, "/abs/other.csv");
  EXPECT_EQ(b.config.log, "logs/b.jsonl");  // an output: placed in the run's directory, below
  EXPECT_EQ(b.config.memory_cap, "4GiB");
  EXPECT_EQ(b.config.steps, 7);
}

// Outputs belong to runs: a relative save, checkpoint-dir or log lands in OUT/NAME/, "{name}"
// anywhere in a path is the run's name, and two runs that would write one file are refused.
TEST(RunsConfig, OutputsLandInEachRunsDirectoryAndNameExpands) {
  RunsFile f = parse(R"(
[defaults]
save = "w.safetensors"
checkpoint-dir = "/ckpt/{name}"
data = "tables/{name}.csv"
target-columns = ["y"]

[[run]]
name = "a"
log = "logs/m.jsonl"

[[run]]
name = "b"
save = "/models/{name}-final.safetensors"
)");
  place_run_outputs(f, "/out");
  const TrainConfig& a = f.runs[0].config;
  const TrainConfig& b = f.runs[1].config;
  EXPECT_EQ(a.save, "/out/a/w.safetensors");  // one [defaults] line, a file per run
  EXPECT_EQ(a.log, "/out/a/logs/m.jsonl");
  EXPECT_EQ(b.log, "/out/b/metrics.jsonl");  // unset: the run's metrics.jsonl
  EXPECT_EQ(a.checkpoint_dir, "/ckpt/a");
  EXPECT_EQ(b.checkpoint_dir, "/ckpt/b");
  EXPECT_EQ(b.save, "/models/b-final.safetensors");
  EXPECT_EQ(a.data, "/data/dir/tables/a.csv");  // inputs: beside runs.toml, {name} expanded too
}

TEST(RunsConfig, TwoRunsWritingOneFileAreRefusedNamingBoth) {
  RunsFile f = parse(R"(
[defaults]
save = "/models/w.safetensors"

[[run]]
name = "a"

[[run]]
name = "broken"
lr = "fast"

[[run]]
name = "c"
)");
  const std::string msg = error_message([&] { place_run_outputs(f, "/out"); });
  EXPECT_NE(msg.find("run 'c' (save) and run 'a' (save) would both write /models/w.safetensors"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("put {name} in it"), std::string::npos) << msg;
  // A relative path that leaves the run's directory can clash too; a run with an error never
  // starts, so its paths clash with nothing.
  RunsFile g = parse(R"(
[[run]]
name = "a"
log = "../b/metrics.jsonl"

[[run]]
name = "b"

[[run]]
name = "c"
lr = "fast"
log = "../a/../b/metrics.jsonl"
)");
  const std::string msg2 = error_message([&] { place_run_outputs(g, "/out"); });
  EXPECT_NE(msg2.find("run 'b' (log) and run 'a' (log) would both write /out/b/metrics.jsonl"),
            std::string::npos)
      << msg2;
}

// Issue 30: save-best was no output key: a relative one landed beside runs.toml, {name} stayed as
// written and an absolute one was shared by every run. It is placed, expanded and checked as save.
TEST(RunsConfig, SaveBestIsAnOutputLikeSave) {
  RunsFile f = parse(R"(
[defaults]
save-best = "best.safetensors"
val-split = 0.25

[[run]]
name = "a"

[[run]]
name = "b"
save_best = "/models/{name}-best.safetensors"
)");
  place_run_outputs(f, "/out");
  EXPECT_EQ(f.runs[0].config.save_best, "/out/a/best.safetensors");
  EXPECT_EQ(f.runs[1].config.save_best, "/models/b-best.safetensors");
  RunsFile g = parse(R"(
[defaults]
save-best = "/models/best.safetensors"
val-split = 0.25

[[run]]
name = "a"

[[run]]
name = "b"
)");
  const std::string msg = error_message([&] { place_run_outputs(g, "/out"); });
  EXPECT_NE(
      msg.find(
          "run 'b' (save-best) and run 'a' (save-best) would both write /models/best.safetensors"),
      std::string::npos)
      << msg;
}

// Issue 30 (medium): val-data, val-targets, class-weights and pos-weight are inputs like data:
// beside runs.toml when relative, absolute afterwards, "{name}" expanded; "auto" stays a word.
TEST(RunsConfig, EveryInputKeyIsPlacedLikeData) {
  const RunsFile f = parse(R"(
[defaults]
val-data = "tables/{name}-val.npy"
val-targets = "tables/{name}-val-y.npy"
pos-weight = "w/{name}.npy"

[[run]]
name = "a"
class-weights = "auto"

[[run]]
name = "b"
class-weights = "cw.npy"
)");
  const TrainConfig& a = f.runs[0].config;
  const TrainConfig& b = f.runs[1].config;
  EXPECT_EQ(a.val_data, "/data/dir/tables/a-val.npy");
  EXPECT_EQ(a.val_targets, "/data/dir/tables/a-val-y.npy");
  EXPECT_EQ(a.pos_weight, "/data/dir/w/a.npy");
  EXPECT_EQ(a.class_weights, "auto");
  EXPECT_EQ(b.class_weights, "/data/dir/cw.npy");
}

// [sweep]: every combination of the listed values, crossed with each [[run]] (or alone), named
// after the values.
TEST(RunsConfig, ASweepMakesOneRunPerCombinationNamedAfterItsValues) {
  const RunsFile f = parse(R"(
[defaults]
steps = 5

[sweep]
optimizer = ["sgd", "adam"]
lr = [1e-3, 0.25]

[[run]]
name = "small"
model = "mlp:4,8,1"

[[run]]
name = "big"
model = "mlp:4,64,1"
)");
  std::vector<std::string> names;
  for (const RunsFileEntry& r : f.runs) names.push_back(r.name);
  // Keys in name order (toml++ keeps a table sorted): lr varies slowest.
  EXPECT_EQ(names, (std::vector<std::string>{
                       "small-lr-0.001-optimizer-sgd", "small-lr-0.001-optimizer-adam",
                       "small-lr-0.25-optimizer-sgd", "small-lr-0.25-optimizer-adam",
                       "big-lr-0.001-optimizer-sgd", "big-lr-0.001-optimizer-adam",
                       "big-lr-0.25-optimizer-sgd", "big-lr-0.25-optimizer-adam"}));
  const RunsFileEntry& r = f.runs[6];
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.config.model, "mlp:4,64,1");
  EXPECT_EQ(r.config.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(r.config.lr, 0.25);
  EXPECT_EQ(r.config.steps, 5);

  // The grid alone, without [[run]] tables.
  const RunsFile g = parse("[sweep]\nbatch-size = [16, 64]\n");
  ASSERT_EQ(g.runs.size(), 2u);
  EXPECT_EQ(g.runs[0].name, "batch-size-16");
  EXPECT_EQ(g.runs[1].config.batch_size, 64);
}

TEST(RunsConfig, SweepMistakesAreNamed) {
  // A run that sets a swept key: its runs fail, naming the key; the file is still read.
  const RunsFile f = parse("[sweep]\nlr = [0.1, 0.2]\n[[run]]\nname = \"a\"\nlr = 0.5\n");
  ASSERT_EQ(f.runs.size(), 2u);
  EXPECT_NE(f.runs[0].error.find("the run sets 'lr', which [sweep] varies"), std::string::npos)
      << f.runs[0].error;
  // A bad value fails the runs that use it, naming it.
  const RunsFile g = parse("[sweep]\nlr = [0.1, \"fast\"]\n");
  ASSERT_EQ(g.runs.size(), 2u);
  EXPECT_EQ(g.runs[0].error, "");
  EXPECT_NE(g.runs[1].error.find("run 'lr-fast'"), std::string::npos) << g.runs[1].error;
  // Not a list, an empty list, or 'name': the file is refused.
  EXPECT_NE(error_message([] {
              parse("[sweep]\nlr = 0.1\n");
            }).find("runs.toml:2: [sweep] lr must be a non-empty list of values"),
            std::string::npos);
  EXPECT_NE(error_message([] { parse("[sweep]\nlr = []\n"); }).find("non-empty list"),
            std::string::npos);
  EXPECT_NE(
      error_message([] { parse("[sweep]\nname = [\"a\"]\n"); }).find("[sweep] cannot vary 'name'"),
      std::string::npos);
  // More than 1000 runs is refused before anything starts.
  std::string big = "[sweep]\nlr = [";
  for (int i = 0; i < 40; ++i) big += (i ? "," : "") + std::to_string(i + 1);
  big += "]\nseed = [";
  for (int i = 0; i < 40; ++i) big += (i ? "," : "") + std::to_string(i + 1);
  big += "]\n";
  EXPECT_NE(error_message([&] { parse(big); }).find("makes more than 1000 runs"),
            std::string::npos);
}

TEST(RunsConfig, RelativeBaseDirBecomesAbsolute) {
  const RunsFile f = parse_runs_config(
      "[[run]]\nname = \"a\"\ndata = \"x.csv\"\ntarget-columns = \"y\"\n", "runs.toml", "sub");
  ASSERT_EQ(f.runs.size(), 1u);
  EXPECT_EQ(f.runs[0].config.data, (std::filesystem::current_path() / "sub" / "x.csv").string());
}

TEST(RunsConfig, AnUnknownKeyFailsOnlyItsRunNamingKeyAndLine) {
  const RunsFile f = parse(R"([[run]]
name = "good"
device = "cpu"

[[run]]
name = "typo"
lerning-rate = 0.1

[[run]]
name = "negative"
lr = -1.0
)");
  ASSERT_EQ(f.runs.size(), 3u);
  EXPECT_EQ(f.runs[0].error, "");
  EXPECT_EQ(f.runs[1].error,
            "run 'typo': runs.toml:7: unknown key 'lerning-rate' (did you mean 'lr'?)");
  EXPECT_NE(f.runs[2].error.find("run 'negative': runs.toml:9: "), std::string::npos)
      << f.runs[2].error;
  EXPECT_NE(f.runs[2].error.find("--lr must be finite and >= 0, got -1"), std::string::npos)
      << f.runs[2].error;
}

TEST(RunsConfig, AWrongTypeAndABadDeviceAndParallelFailTheirRun) {
  const RunsFile f = parse(R"([[run]]
name = "type"
batch-size = "lots"
[[run]]
name = "dev"
device = "tpu"
[[run]]
name = "dp"
parallel = "dp"
replicas = 2
)");
  ASSERT_EQ(f.runs.size(), 3u);
  EXPECT_EQ(f.runs[0].error,
            "run 'type': runs.toml:3: key 'batch-size' must be an integer, got a string");
  EXPECT_NE(f.runs[1].error.find("run 'dev': runs.toml:4: "), std::string::npos) << f.runs[1].error;
  EXPECT_NE(f.runs[1].error.find("tpu"), std::string::npos) << f.runs[1].error;
  EXPECT_NE(f.runs[2].error.find("parallel = 'dp': a pipelines run is one process on one device"),
            std::string::npos)
      << f.runs[2].error;
}

TEST(RunsConfig, FileLevelProblemsRejectTheWholeFile) {
  EXPECT_EQ(error_message([] { parse("[defaults]\nlr = 0.1\n"); }),
            "runs.toml: no runs; add one [[run]] table per run with a name and training keys (name "
            "= \"a\", lr = 0.01), or a [sweep] table of values to try");
  EXPECT_EQ(error_message([] { parse("[[run]]\nname = \"a\"\n[[run]]\nname = \"a\"\n"); }),
            "runs.toml:4: run name 'a' is used twice; give each [[run]] its own name");
  EXPECT_EQ(error_message([] { parse("[[run]]\nname = \"a\"\n[[run]]\nlr = 0.1\n"); }),
            "runs.toml:3: [[run]] #2 has no name; give it name = \"...\" (its output directory)");
  EXPECT_NE(error_message([] {
              parse("[[run]]\nname = \"../up\"\n");
            }).find("runs.toml:2: run name '../up' is not a safe directory name"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              parse("[[run]]\nname = \"a\"\nlr = = 3\n");
            }).find("runs.toml:3: invalid TOML"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              parse("lr = 0.1\n[[run]]\nname = \"a\"\n");
            }).find("runs.toml:1: unknown top-level key 'lr'"),
            std::string::npos);
  EXPECT_EQ(error_message([] { parse("[defaults]\nbatchsize = 3\n[[run]]\nname = \"a\"\n"); }),
            "runs.toml:2: unknown key 'batchsize' (did you mean 'batch-size'?)");
  EXPECT_THROW(parse("[[run]]\nname = 3\n"), ValueError);
  // One key under two spellings in one table: refused, not "the last one wins".
  EXPECT_EQ(error_message([] {
              parse("[defaults]\nbatch-size = 3\nbatch_size = 4\n[[run]]\nname = \"a\"\n");
            }),
            "runs.toml:3: key 'batch_size' sets 'batch-size', which 'batch-size' already set in "
            "this table; keep "
            "one of them");
  const RunsFile twice = parse(
      "[defaults]\nbatch_size = 3\n[[run]]\nname = \"a\"\nbatch_size = 5\n"
      "[[run]]\nname = \"b\"\nlr = 0.1\nbatch-size = 2\nbatch_size = 4\n");
  EXPECT_EQ(twice.runs[0].error, "");  // a run overriding [defaults] is what runs are for
  EXPECT_EQ(twice.runs[0].config.batch_size, 5);
  EXPECT_EQ(twice.runs[1].error,
            "run 'b': runs.toml:10: key 'batch_size' sets 'batch-size', which 'batch-size' "
            "already set in this table; keep one of them");
}

TEST(RunsConfig, ReadingAMissingFileIsAnIoError) {
  EXPECT_THROW(read_runs_config("/nonexistent/runs.toml"), IoError);
}

TEST(RunsConfig, ConfigToTomlReadsBackToTheSameConfig) {
  TrainConfig c;
  c.model = "mlp:3,5,1";
  c.data = "/tmp/with \"quotes\".csv";
  c.target_columns = {"y", "z"};
  c.lr = 1.0 / 3.0;  // needs every digit to come back equal
  c.beta1 = 0.85;
  c.beta2 = 0.995;
  c.weight_decay = 0.0125;
  c.steps = 17;
  c.seed = 123456789012345ull;
  c.shuffle = false;
  c.memory_cap = "2GiB";
  c.threads = 3;
  const std::string text = config_to_toml(c);
  TrainConfig back;
  apply_toml_config(back, text, "config.toml");
  EXPECT_EQ(config_to_json(back), config_to_json(c)) << text;
  EXPECT_FALSE(back.epochs.has_value());  // unset optional keys stay unset
}

// Issue 30: sweep values that print alike under %g (1e-07 and 1.00000001e-07) once made one name
// twice with advice about [[run]] names; values that still read alike once a name's characters are
// replaced are refused naming both.
TEST(RunsConfig, SweepValuesThatPrintAlikeGetNamesThatDiffer) {
  const RunsFile f = parse("[sweep]\nlr = [1e-7, 1.00000001e-7]\n");
  ASSERT_EQ(f.runs.size(), 2u);
  EXPECT_EQ(f.runs[0].name, "lr-1e-07");
  EXPECT_EQ(f.runs[1].name, "lr-1.00000001e-07");
  const std::string msg = error_message([] { parse("[sweep]\ndata = [\"a b\", \"a?b\"]\n"); });
  EXPECT_NE(msg.find("[sweep] values data = 'a b' and data = 'a?b' both make the run name "
                     "'data-a_b'"),
            std::string::npos)
      << msg;
}

// Issue 30: a run named summary.json, or an output at OUT/summary.json, would be overwritten by
// (or overwrite) the summary written after every run finished: refused before the first run.
TEST(RunsConfig, NothingMayWriteTheSummary) {
  RunsFile f = parse("[[run]]\nname = \"summary.json\"\n");
  EXPECT_NE(error_message([&] { place_run_outputs(f, "/tmp/out"); })
                .find("run 'summary.json' would have its directory at /tmp/out/summary.json, "
                      "where minitrain pipelines writes its summary"),
            std::string::npos);
  RunsFile g = parse("[[run]]\nname = \"a\"\nlog = \"../summary.json\"\n");
  EXPECT_NE(error_message([&] { place_run_outputs(g, "/tmp/out"); })
                .find("run 'a' (log) and the summary of all runs would both write "
                      "/tmp/out/summary.json"),
            std::string::npos);
}

// Issue 30: 100 [[run]] tables crossed with 1000 sweep points are 100,000 runs; more than the cap
// (1000 unless raised) is refused naming the count and the flag that raises it.
TEST(RunsConfig, TheTotalNumberOfRunsIsCapped) {
  std::string text = "[sweep]\nseed = [";
  for (int i = 0; i < 20; ++i) text += (i ? "," : "") + std::to_string(i + 1);
  text += "]\n";
  for (int i = 0; i < 60; ++i) text += "[[run]]\nname = \"r" + std::to_string(i) + "\"\n";
  const RunsFile f = parse(text);
  ASSERT_EQ(f.runs.size(), 1200u);
  EXPECT_NE(error_message([&] { check_run_count(f, 1000); })
                .find("runs.toml makes 1200 runs (60 [[run]] x 20 [sweep] points), more than "
                      "--max-runs 1000; raise --max-runs if you mean it"),
            std::string::npos);
  EXPECT_NO_THROW(check_run_count(f, 1200));
}

}  // namespace
}  // namespace minitrain
