// A minimal training binary built against an installed minitrain (find_package or pkg-config):
// an MLP on the built-in synthetic regression, Adam, MSE; prints the loss and saves the weights.
//
//   train_mlp OUT.safetensors [DEVICE]        e.g. train_mlp mlp.safetensors cpu

#include <cstdio>
#include <memory>

#include "core/error.h"
#include "data/data_loader.h"
#include "data/readers.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "nn/state_dict.h"
#include "optim/make_optimizer.h"

using namespace minitrain;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_mlp OUT.safetensors [DEVICE]\n");
    return 2;
  }
  try {
    const Device device = Device::parse(argc > 2 ? argv[2] : "cpu");
    DataLoaderOptions batches;
    batches.batch_size = 64;
    batches.device = device;
    DataLoader loader(std::make_shared<TensorDataset>(make_synthetic_regression(1024, 4, 1, 1)),
                      batches);
    Generator gen(/*seed=*/0);
    std::unique_ptr<Sequential> model = make_mlp({4, 32, 1}, Activation::ReLU, gen, device);
    OptimizerConfig adam;
    adam.name = "adam";
    adam.lr = 3e-3;
    std::unique_ptr<Optimizer> optimizer = make_optimizer(adam, model->named_parameters());
    MSELoss loss_fn;
    double loss = 0.0;
    for (int64_t step = 0; step < 2 * loader.batches_per_epoch(); ++step) {
      const Batch batch = loader.next();
      optimizer->zero_grad();
      loss = loss_fn.forward(model->forward(batch.x), batch.y).item();
      model->backward(loss_fn.backward());
      optimizer->step();
    }
    std::printf("final loss %.6f\n", loss);
    save_weights(argv[1], *model);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "train_mlp: error: %s\n", e.what());
    return 1;
  }
}
