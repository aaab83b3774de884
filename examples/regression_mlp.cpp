// A regression MLP trained with minitrain's library API, the training step written out:
// forward, MSE loss, backward, optimizer step. The data is the built-in synthetic regression.
//
//   regression_mlp [DEVICE] [EPOCHS]        e.g. regression_mlp cuda 10
//
// The same run from the command line: minitrain train --model mlp:4,64,64,1 --epochs 5

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "data/data_loader.h"
#include "data/readers.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/make_optimizer.h"

using namespace minitrain;

int main(int argc, char** argv) {
  try {
    const Device device = Device::parse(argc > 1 ? argv[1] : "auto");
    const int epochs = argc > 2 ? std::atoi(argv[2]) : 5;
    check_available(device);

    // Data: 4096 rows of x ~ U(-1, 1)^4 and a smooth nonlinear y, batched and shuffled.
    auto data = std::make_shared<TensorDataset>(make_synthetic_regression(4096, 4, 1, /*seed=*/1));
    DataLoaderOptions batches;
    batches.batch_size = 64;
    batches.seed = 0;
    batches.device = device;
    DataLoader loader(data, batches);

    // Model: Linear(4, 64), ReLU, Linear(64, 64), ReLU, Linear(64, 1) with PyTorch's init.
    Generator gen(/*seed=*/0);
    std::unique_ptr<Sequential> model = make_mlp({4, 64, 64, 1}, Activation::ReLU, gen, device);
    OptimizerConfig adam;
    adam.name = "adam";
    adam.lr = 3e-3;
    std::unique_ptr<Optimizer> optimizer = make_optimizer(adam, model->named_parameters());
    MSELoss loss_fn;

    std::printf("training %lld parameters on %s\n", static_cast<long long>(model->num_parameters()),
                device.str().c_str());
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double sum = 0.0;
      for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
        const Batch batch = loader.next();
        optimizer->zero_grad();
        const Tensor pred = model->forward(batch.x);         // caches what backward needs
        const Tensor loss = loss_fn.forward(pred, batch.y);  // mean of (pred - y)^2
        model->backward(loss_fn.backward());                 // accumulates parameter gradients
        optimizer->step();
        sum += loss.item();
      }
      std::printf("epoch %d  mean loss %.6f\n", epoch,
                  sum / static_cast<double>(loader.batches_per_epoch()));
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "regression_mlp: error: %s\n", e.what());
    return 1;
  }
}
