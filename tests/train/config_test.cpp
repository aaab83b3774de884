// The run configuration: command-line text, TOML files (flags override them), and the checks of
// impossible values, each with a message that names the flag (and, for files, file and line).

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "train/config.h"

namespace minitrain {
namespace {

using testing::error_message;

TEST(TrainConfig, DefaultsAreValid) {
  TrainConfig c;
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(c.model, "mlp:4,64,64,1");
  EXPECT_EQ(c.data, "synthetic");
  EXPECT_EQ(c.device, "auto");
  EXPECT_FALSE(c.epochs.has_value());
  EXPECT_FALSE(c.steps.has_value());
}

TEST(TrainConfig, SetsEveryKindFromCommandLineText) {
  TrainConfig c;
  set_config_value(c, "lr", "3e-4");
  set_config_value(c, "betas", "0.8,0.99");
  set_config_value(c, "target-columns", "y1,y2");
  set_config_value(c, "steps", "120");
  set_config_value(c, "amsgrad", "true");
  set_config_value(c, "batch_size", "16");  // '_' reads as '-'
  set_config_value(c, "seed", "7");
  EXPECT_DOUBLE_EQ(c.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.beta2, 0.99);
  EXPECT_EQ(c.target_columns, (std::vector<std::string>{"y1", "y2"}));
  EXPECT_EQ(c.steps, 120);
  EXPECT_TRUE(c.amsgrad);
  EXPECT_EQ(c.batch_size, 16);
  EXPECT_EQ(c.seed, 7u);
}

TEST(TrainConfig, BadCommandLineTextNamesFlagAndText) {
  TrainConfig c;
  EXPECT_NE(error_message([&] {
              set_config_value(c, "lr", "fast");
            }).find("--lr expects a number, got 'fast'"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              set_config_value(c, "epochs", "2.5");
            }).find("--epochs expects an integer"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              set_config_value(c, "betas", "0.9");
            }).find("--betas expects two numbers"),
            std::string::npos);
  EXPECT_NE(error_message([&] { set_config_value(c, "seed", "-1"); }).find("--seed must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              set_config_value(c, "lerning-rate", "1");
            }).find("unknown option --lerning-rate"),
            std::string::npos);
}

TEST(TrainConfig, TomlSetsKeysAndLaterFlagsOverrideThem) {
  TrainConfig c;
  apply_toml_config(c,
                    "model = 'mlp:3,16,2'\n"
                    "lr = 1\n"  // an integer is a fine number
                    "batch-size = 32\n"
                    "shuffle = false\n"
                    "betas = [0.5, 0.75]\n"
                    "target_columns = ['a', 'b']\n"
                    "data = 'table.csv'\n",
                    "run.toml");
  EXPECT_EQ(c.model, "mlp:3,16,2");
  EXPECT_DOUBLE_EQ(c.lr, 1.0);
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_FALSE(c.shuffle);
  EXPECT_DOUBLE_EQ(c.beta2, 0.75);
  EXPECT_EQ(c.target_columns, (std::vector<std::string>{"a", "b"}));
  set_config_value(c, "batch-size", "8");  // what the command line does after the file
  EXPECT_EQ(c.batch_size, 8);
  EXPECT_EQ(c.model, "mlp:3,16,2");
  EXPECT_NO_THROW(validate(c));
}

// RMSprop's settings and kl_div's: flags and TOML keys from the same table, validated.
TEST(TrainConfig, RMSpropAndKlDivSettingsFromFlagsAndToml) {
  TrainConfig c;
  apply_toml_config(c,
                    "optimizer = 'rmsprop'\n"
                    "momentum = 0.9\n"
                    "alpha = 0.95\n"
                    "centered = true\n"
                    "loss = 'kl_div'\n"
                    "kl-log-target = true\n",
                    "run.toml");
  EXPECT_EQ(c.optimizer, "rmsprop");
  EXPECT_DOUBLE_EQ(c.momentum, 0.9);
  EXPECT_DOUBLE_EQ(c.alpha, 0.95);
  EXPECT_TRUE(c.centered);
  EXPECT_EQ(c.loss, "kl_div");
  EXPECT_TRUE(c.loss_settings.log_target);
  EXPECT_NO_THROW(validate(c));
  set_config_value(c, "eps", "1e-6");  // eps is rmsprop's too
  set_config_value(c, "kl-log-target", "false");
  EXPECT_DOUBLE_EQ(c.eps, 1e-6);
  EXPECT_FALSE(c.loss_settings.log_target);
  EXPECT_NO_THROW(validate(c));
}

// A loss setting declared once, in LossOptions: its row points into the config's LossOptions
// (no TrainConfig member of its own), and loss_options() hands it to the loss. poisson_nll's
// log_input defaults to true, as torch's; a TOML file and the command line turn it off.
TEST(TrainConfig, PoissonLogInputLivesInTheLossOptions) {
  TrainConfig c;
  EXPECT_TRUE(c.loss_settings.log_input);
  apply_toml_config(c, "loss = 'poisson_nll'\npoisson-log-input = false\n", "run.toml");
  EXPECT_EQ(c.loss, "poisson_nll");
  EXPECT_FALSE(c.loss_settings.log_input);
  EXPECT_FALSE(loss_options(c).log_input);
  EXPECT_EQ(loss_options(c).name, "poisson_nll");
  EXPECT_NO_THROW(validate(c));
  set_config_value(c, "poisson-log-input", "true");
  EXPECT_TRUE(loss_options(c).log_input);
  EXPECT_NE(config_to_json(c).find("\"poisson-log-input\":true"), std::string::npos);
  c.loss = "mse";
  c.loss_settings.log_input = false;
  EXPECT_NE(error_message([&] {
              validate(c);
            }).find("--poisson-log-input applies to --loss poisson_nll, not to --loss mse"),
            std::string::npos);
}

TEST(TrainConfig, TomlUnknownKeyNamesFileLineAndKey) {
  TrainConfig c;
  const std::string msg =
      error_message([&] { apply_toml_config(c, "lr = 0.1\n\nlerning-rate = 0.1\n", "run.toml"); });
  EXPECT_NE(msg.find("run.toml:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'lerning-rate'"), std::string::npos) << msg;
  EXPECT_DOUBLE_EQ(c.lr, TrainConfig{}.lr) << "a bad file must change nothing";
}

TEST(TrainConfig, TomlWrongTypeNamesKeyLineAndBothTypes) {
  TrainConfig c;
  const std::string msg =
      error_message([&] { apply_toml_config(c, "model = 'mlp:2,1'\nsteps = 1.5\n", "r.toml"); });
  EXPECT_NE(msg.find("r.toml:2: key 'steps' must be an integer, got a floating-point number"),
            std::string::npos)
      << msg;
  EXPECT_EQ(c.model, TrainConfig{}.model);
  EXPECT_NE(error_message([&] {
              apply_toml_config(c, "lr = 'fast'\n", "r.toml");
            }).find("'lr' must be a number"),
            std::string::npos);
}

TEST(TrainConfig, TomlSyntaxErrorNamesFileAndLine) {
  TrainConfig c;
  const std::string msg =
      error_message([&] { apply_toml_config(c, "lr = 0.1\nsteps = = 3\n", "bad.toml"); });
  EXPECT_NE(msg.find("bad.toml:2: invalid TOML"), std::string::npos) << msg;
}

TEST(TrainConfig, MissingConfigFileIsAnIoErrorNamingIt) {
  TrainConfig c;
  testing::expect_error<IoError>([&] { apply_toml_config_file(c, "/nonexistent/run.toml"); },
                                 {"/nonexistent/run.toml"});
}

TEST(TrainConfig, TomlFilePathsAreRelativeToTheFile) {
  testing::ScratchDir dir;
  const std::string path =
      dir.write_raw("run.toml",
                    "data = 'x.npy'\ntargets = '/abs/y.npy'\nsave = 'out/w.safetensors'\n"
                    "model = 'mlp:2,1'\n");
  TrainConfig c;
  apply_toml_config_file(c, path);
  EXPECT_EQ(c.data, dir.path("x.npy"));
  EXPECT_EQ(c.targets, "/abs/y.npy");
  EXPECT_EQ(c.save, dir.path("out/w.safetensors"));
  EXPECT_EQ(c.model, "mlp:2,1");

  TrainConfig synthetic;
  apply_toml_config(synthetic, "data = 'synthetic:100'\n", "s.toml", "/some/dir");
  EXPECT_EQ(synthetic.data, "synthetic:100");
}

struct BadConfigCase {
  const char* what;
  std::function<void(TrainConfig&)> change;
  const char* message;
};

TEST(TrainConfig, ValidateRejectsImpossibleValuesWithOneClearMessageEach) {
  const std::vector<BadConfigCase> cases = {
      {"batch size 0", [](TrainConfig& c) { c.batch_size = 0; },
       "--batch-size must be >= 1, got 0"},
      {"negative lr", [](TrainConfig& c) { c.lr = -0.1; },
       "--lr must be finite and >= 0, got -0.1"},
      {"negative lr as written (not -1.67772e+07)", [](TrainConfig& c) { c.lr = -16777217; },
       "--lr must be finite and >= 0, got -16777217"},
      {"epochs and steps", [](TrainConfig& c) { c.epochs = 2, c.steps = 10; },
       "--epochs and --steps both given"},
      {"zero epochs", [](TrainConfig& c) { c.epochs = 0; }, "--epochs must be >= 1"},
      {"targets without npy", [](TrainConfig& c) { c.targets = "y.npy"; },
       "--targets is for .npy data"},
      {"npy without targets", [](TrainConfig& c) { c.data = "x.npy"; }, "needs --targets Y.npy"},
      {"csv without columns", [](TrainConfig& c) { c.data = "t.csv"; }, "needs --target-columns"},
      // issue 30: --ignore-columns misuse, and paths the system cannot open ("internal error")
      {"ignore without csv", [](TrainConfig& c) { c.ignore_columns = {"id"}; },
       "--ignore-columns is for .csv data"},
      {"ignore a target",
       [](TrainConfig& c) { c.data = "t.csv", c.target_columns = {"y"}, c.ignore_columns = {"y"}; },
       "--ignore-columns names 'y', which --target-columns names too"},
      {"ignore twice",
       [](TrainConfig& c) {
         c.data = "t.csv", c.target_columns = {"y"}, c.ignore_columns = {"id", "id"};
       },
       "--ignore-columns names 'id' twice"},
      {"checkpoint dir beyond PATH_MAX",
       [](TrainConfig& c) { c.checkpoint_dir = std::string(4600, 'd'); },
       "--checkpoint-dir is 4600 characters long"},
      {"checkpoint dir near PATH_MAX",
       [](TrainConfig& c) { c.checkpoint_dir = "/" + std::string(4080, 'd'); },
       "the paths the run makes from it can be at most 4095 bytes"},
      {"save name beyond NAME_MAX",
       [](TrainConfig& c) { c.save = "out/" + std::string(250, 'w') + ".safetensors"; },
       "a file or directory name can be at most 255 bytes (NAME_MAX)"},
      {"unknown data", [](TrainConfig& c) { c.data = "data.parquet"; }, "--data 'data.parquet'"},
      {"bad synthetic rows", [](TrainConfig& c) { c.data = "synthetic:-5"; }, "positive integer"},
      {"unknown optimizer", [](TrainConfig& c) { c.optimizer = "lion"; },
       "--optimizer: unknown value 'lion'"},
      {"nesterov without momentum", [](TrainConfig& c) { c.optimizer = "sgd", c.nesterov = true; },
       "--nesterov requires momentum > 0"},
      {"momentum with adam", [](TrainConfig& c) { c.momentum = 0.9; },
       "--momentum applies to --optimizer sgd, rmsprop, not to adam"},
      {"nesterov with rmsprop",
       [](TrainConfig& c) { c.optimizer = "rmsprop", c.momentum = 0.9, c.nesterov = true; },
       "--nesterov applies to --optimizer sgd, not to rmsprop"},
      {"centered with sgd", [](TrainConfig& c) { c.optimizer = "sgd", c.centered = true; },
       "--centered applies to --optimizer rmsprop, not to sgd"},
      {"alpha with adam", [](TrainConfig& c) { c.alpha = 0.9; },
       "--alpha applies to --optimizer rmsprop, not to adam"},
      {"negative alpha", [](TrainConfig& c) { c.optimizer = "rmsprop", c.alpha = -0.5; },
       "--alpha must be finite and >= 0, got -0.5"},
      {"negative rmsprop momentum",
       [](TrainConfig& c) { c.optimizer = "rmsprop", c.momentum = -0.5; },
       "--momentum must be finite and >= 0, got -0.5"},
      {"kl log target with mse", [](TrainConfig& c) { c.loss_settings.log_target = true; },
       "--kl-log-target applies to --loss kl_div, not to --loss mse"},
      {"label smoothing with huber",
       [](TrainConfig& c) { c.loss = "huber", c.loss_settings.label_smoothing = 0.1; },
       "--label-smoothing applies to --loss cross_entropy, not to --loss huber"},
      {"huber delta with kl_div",
       [](TrainConfig& c) { c.loss = "kl_div", c.loss_settings.delta = 2; },
       "--huber-delta applies to --loss huber, not to --loss kl_div"},
      {"beta of 1", [](TrainConfig& c) { c.beta2 = 1.0; },
       "--betas (beta2) must be in [0, 1), got 1"},
      {"step schedule without step size", [](TrainConfig& c) { c.schedule = "step"; },
       "--step-size"},
      {"negative clip", [](TrainConfig& c) { c.clip_grad_norm = -1; },
       "--clip-grad-norm must be finite and >= 0 (0: no clipping), got -1"},
      {"clip not a number", [](TrainConfig& c) { c.clip_grad_norm = std::nan(""); },
       "--clip-grad-norm must be finite and >= 0 (0: no clipping), got nan"},
      {"grad accum 0", [](TrainConfig& c) { c.grad_accum = 0; }, "--grad-accum must be >= 1"},
      {"checkpoint-every without dir", [](TrainConfig& c) { c.checkpoint_every = 5; },
       "needs --checkpoint-dir"},
      {"resume without dir", [](TrainConfig& c) { c.resume = true; },
       "--resume needs --checkpoint-dir"},
      {"save not safetensors", [](TrainConfig& c) { c.save = "w.bin"; }, "*.safetensors"},
      {"parallel dp", [](TrainConfig& c) { c.parallel = "dp"; },
       "--parallel dp needs --replicas N"},
      {"parallel nonsense", [](TrainConfig& c) { c.parallel = "zz"; },
       "--parallel: unknown value 'zz'"},
      {"replicas", [](TrainConfig& c) { c.replicas = 2; }, "--replicas given without --parallel"},
      {"activation", [](TrainConfig& c) { c.activation = "swish"; },
       "--activation: unknown value 'swish'"},
      {"model", [](TrainConfig& c) { c.model = "resnet50"; }, "--model 'resnet50'"},
      {"negative workers", [](TrainConfig& c) { c.workers = -1; },
       "--workers must be >= 0, got -1"},
      {"absurd workers", [](TrainConfig& c) { c.workers = 100000; },
       "--workers must be <= 1024, got 100000"},
  };
  for (const BadConfigCase& bad : cases) {
    TrainConfig c;
    bad.change(c);
    std::string msg;
    try {
      validate(c);
    } catch (const ValueError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(bad.message), std::string::npos) << bad.what << ": got '" << msg << "'";
  }
}

TEST(TrainConfig, JsonNamesEveryKey) {
  TrainConfig c;
  c.steps = 5;
  const std::string json = config_to_json(c);
  for (const ConfigKey& k : config_keys())
    EXPECT_NE(json.find(std::string("\"") + k.name + "\""), std::string::npos) << k.name;
  EXPECT_NE(json.find("\"steps\":5"), std::string::npos) << json;
}

}  // namespace
}  // namespace minitrain
