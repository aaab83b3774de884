// Train an MLP on a CSV table with minitrain's Trainer (the loop `minitrain train` uses): every
// column but the targets is a feature, and the model is sized from the table.
//
//   csv_regression TABLE.csv TARGETS [EPOCHS] [HIDDEN]     e.g. csv_regression houses.csv price 20
//
// TARGETS is one column name or several, comma-separated ("y1,y2").

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/data_loader.h"
#include "data/readers.h"
#include "nn/mlp.h"
#include "optim/make_optimizer.h"
#include "train/trainer.h"

using namespace minitrain;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: csv_regression TABLE.csv TARGETS [EPOCHS] [HIDDEN]\n");
    return 2;
  }
  try {
    std::vector<std::string> targets;
    std::stringstream names(argv[2]);
    for (std::string name; std::getline(names, name, ',');) targets.push_back(name);
    const int64_t epochs = argc > 3 ? std::atoll(argv[3]) : 20;
    const int64_t hidden = argc > 4 ? std::atoll(argv[4]) : 32;

    // A bad cell, a short row or an unknown target column is an error naming file, line and column.
    auto table = std::make_shared<TensorDataset>(load_csv_dataset(argv[1], targets));
    std::printf("%s: %lld rows, %lld features, %lld targets\n", argv[1],
                static_cast<long long>(table->size()), static_cast<long long>(table->feature_dim()),
                static_cast<long long>(table->target_dim()));

    const Device device = Device::parse("auto");
    Generator gen(/*seed=*/0);
    auto model = make_mlp({table->feature_dim(), hidden, hidden, table->target_dim()},
                          Activation::Tanh, gen, device);
    OptimizerConfig adam;
    adam.lr = 1e-2;
    auto optimizer = make_optimizer(adam, model->named_parameters());
    DataLoaderOptions batches;
    batches.batch_size = 16;
    batches.device = device;
    DataLoader loader(table, batches);

    TrainerOptions options;
    options.total_steps = steps_for_epochs(epochs, loader.batches_per_epoch(), /*grad_accum=*/1);
    double epoch_loss = 0.0;
    options.on_step = [&](const StepStats& s) {
      epoch_loss += s.loss;
      if (s.step % loader.batches_per_epoch() == 0) {
        std::printf("epoch %3lld  mean loss %.6f\n", static_cast<long long>(s.epoch),
                    epoch_loss / static_cast<double>(loader.batches_per_epoch()));
        epoch_loss = 0.0;
      }
    };
    const TrainSummary summary = Trainer(*model, *optimizer, loader, options).run();
    std::printf("loss %.6f -> %.6f in %.2f s\n", summary.first_loss, summary.last_loss,
                summary.seconds);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "csv_regression: error: %s\n", e.what());
    return 1;
  }
}
