// Pinned staging buffers handed out round-robin: the buffer longest out of use is the likeliest
// to have finished its copy, so a worker rarely waits on the GPU.

#include "data/pinned_staging.h"

#include "core/error.h"

namespace minitrain {

PinnedStaging::PinnedStaging(Device device, const Stream& stream, int64_t rows, int64_t in_dim,
                             int64_t out_dim, std::size_t count)
    : device_(device), stream_(stream), rows_(rows), in_dim_(in_dim), out_dim_(out_dim) {
  MT_CHECK(count >= 1, "PinnedStaging: needs at least one buffer, got ", count);
  buffers_.reserve(count);
  DeviceGuard device_guard(device_);
  StreamGuard stream_guard(stream_);  // Note [data loader streams]: blocks tied to the stream
  for (std::size_t i = 0; i < count; ++i) {
    buffers_.push_back(Buffer{Tensor::empty_pinned({rows_, in_dim_}),
                              Tensor::empty_pinned({rows_, out_dim_}), BufferSlot(1), BufferSlot(1),
                              Event::create(device), false, false});
    Buffer& b = buffers_.back();
    (void)b.device_x.get(Shape{rows_, in_dim_}, DType::Float32, device_);
    (void)b.device_y.get(Shape{rows_, out_dim_}, DType::Float32, device_);
  }
}

PinnedStaging::~PinnedStaging() {
  for (Buffer& b : buffers_) {
    try {
      if (b.pending) b.copied.synchronize();
    } catch (...) {  // a device error has nowhere to go from a destructor
    }
  }
}

std::size_t PinnedStaging::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t tried = 0; tried < buffers_.size(); ++tried) {
    const std::size_t i = next_;
    next_ = (next_ + 1) % buffers_.size();
    if (!buffers_[i].busy) {
      buffers_[i].busy = true;
      return i;
    }
  }
  MT_THROW(Error, "PinnedStaging: all ", buffers_.size(),
           " buffers are in use; it needs more buffers than threads that stage at once");
}

void PinnedStaging::stage(int64_t k, const std::function<void(Tensor&, Tensor&)>& fill, Tensor& x,
                          Tensor& y) {
  MT_CHECK(k >= 1 && k <= rows_, "PinnedStaging::stage: ", k, " rows, buffers hold 1 to ", rows_);
  const std::size_t i = acquire();
  Buffer& b = buffers_[i];  // this thread's alone until `busy` is cleared
  const auto give_back = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    b.busy = false;
  };
  try {
    if (b.pending) {
      b.copied.synchronize();  // the consumer's stream has not reached this buffer's copy yet
      b.pending = false;
    }
    Tensor xh = b.x.narrow(0, k), yh = b.y.narrow(0, k);
    fill(xh, yh);
    DeviceGuard device_guard(device_);
    StreamGuard stream_guard(stream_);
    x = b.device_x.get(Shape{rows_, in_dim_}, DType::Float32, device_).narrow(0, k);
    y = b.device_y.get(Shape{rows_, out_dim_}, DType::Float32, device_).narrow(0, k);
    copy_bytes_async(x.raw_data(), device_, xh.raw_data(), Device::cpu(), xh.nbytes(), stream_);
    copy_bytes_async(y.raw_data(), device_, yh.raw_data(), Device::cpu(), yh.nbytes(), stream_);
    b.copied.record(stream_);
    b.pending = true;
  } catch (...) {
    give_back();
    throw;
  }
  give_back();
}

}  // namespace minitrain
