// Train a classifier on a CSV table with the library API: cross-entropy over the classes of a
// label column (text or integers), a stratified held-out fifth, accuracy on it after each epoch.
//
//   classify_csv TABLE.csv LABEL [EPOCHS] [HIDDEN]          e.g. classify_csv iris.csv species 50

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.h"
#include "data/class_labels.h"
#include "data/data_loader.h"
#include "data/holdout_split.h"
#include "data/readers.h"
#include "nn/mlp.h"
#include "optim/make_optimizer.h"
#include "train/trainer.h"
#include "train/validation.h"

using namespace minitrain;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: classify_csv TABLE.csv LABEL [EPOCHS] [HIDDEN]\n");
    return 2;
  }
  try {
    const int64_t epochs = argc > 3 ? std::atoll(argv[3]) : 50;
    const int64_t hidden = argc > 4 ? std::atoll(argv[4]) : 32;
    // Text labels become class indices in sorted order; classes.names keeps the names.
    CsvClassLabels classes;
    const TensorDataset table = load_csv_dataset(argv[1], {argv[2]}, &classes);
    const auto num_classes = static_cast<int64_t>(classes.names.size());
    if (num_classes < 2) MT_THROW(ValueError, "column ", argv[2], " needs text labels");
    check_class_labels(table.targets(), num_classes, -100, argv[1]);

    // A fifth of each class held out, chosen by the seed.
    const HoldoutSplit split =
        holdout_split(table.size(), 0.2, /*seed=*/0, label_values(table.targets()));
    auto train_rows = std::make_shared<TensorDataset>(subset(table, split.train));
    auto held_out = std::make_shared<TensorDataset>(subset(table, split.held_out));

    const Device device = Device::parse("auto");
    Generator gen(/*seed=*/0);
    auto model =
        make_mlp({table.feature_dim(), hidden, num_classes}, Activation::ReLU, gen, device);
    OptimizerConfig adam;
    adam.lr = 1e-2;
    auto optimizer = make_optimizer(adam, model->named_parameters());
    DataLoaderOptions batches;
    batches.batch_size = 16;
    batches.device = device;
    DataLoader loader(train_rows, batches);

    LossOptions cross_entropy;
    cross_entropy.name = "cross_entropy";
    ValidatorOptions held_out_options;
    held_out_options.loss = cross_entropy;
    held_out_options.device = device;
    Validator validator(held_out, held_out_options);

    TrainerOptions options;
    options.total_steps = steps_for_epochs(epochs, loader.batches_per_epoch(), /*grad_accum=*/1);
    options.loss = make_loss(cross_entropy);
    options.validate = [&] { return validator.evaluate(*model); };  // after each epoch
    options.on_step = [](const StepStats& s) {
      if (s.val && s.epoch % 10 == 0)
        std::printf("epoch %3lld  loss %.4f  val_loss %.4f  val_accuracy %.3f\n",
                    static_cast<long long>(s.epoch), s.loss, s.val->loss, s.val->accuracy);
    };
    const TrainSummary summary = Trainer(*model, *optimizer, loader, options).run();
    std::printf(
        "%lld classes, %lld held-out rows: accuracy %.3f (best val_loss %.4f at step %lld)\n",
        static_cast<long long>(num_classes), static_cast<long long>(held_out->size()),
        summary.last_val->accuracy, summary.best_val->loss,
        static_cast<long long>(summary.best_step));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "classify_csv: error: %s\n", e.what());
    return 1;
  }
}
