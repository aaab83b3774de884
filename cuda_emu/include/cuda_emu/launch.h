#pragma once
// The emulated kernel launch. The build rewrites
//     kernel<<<grid, block, smem, stream>>>(args...);
// into
//     kernel | ::mtemu::launch("kernel", __FILE__, __LINE__, max_threads, grid, block, smem,
//     stream)(args...);
// (cuda_emu/rewrite_cuda.py): launch() holds the configuration, (args...) copies the arguments,
// and `|` with the kernel's address converts them to its parameter types and queues the grid on
// the stream, returning at once as a real launch does. Errors go to cudaGetLastError().

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"
#include "cuda_emu/initcheck.h"
#include "cuda_emu/vector_types.h"

namespace mtemu {

struct LaunchSite {
  const char* kernel;  ///< the launch expression's kernel, as written
  const char* file;
  int line;
  int max_threads;  ///< from __launch_bounds__, 0 where the kernel has none
};

struct LaunchConfig {
  dim3 grid, block;
  std::size_t dynamic_smem = 0;
  cudaStream_t stream = nullptr;
};

namespace detail {
/// Checks the configuration as the GPU does and queues the grid; `body` runs one thread.
cudaError_t enqueue_launch(const LaunchSite& site, const LaunchConfig& config, const void* kernel,
                           std::function<void()> body);

inline dim3 as_dim3(dim3 d) { return d; }
template <class I, class = std::enable_if_t<std::is_integral<I>::value>>
dim3 as_dim3(I v) {
  // A negative or huge count must fail the launch's check, not wrap to a small grid.
  return v < 0 || static_cast<unsigned long long>(v) > 0xffffffffull
             ? dim3(0)
             : dim3(static_cast<unsigned>(v));
}
inline cudaStream_t as_stream(cudaStream_t s) { return s; }
inline cudaStream_t as_stream(int zero) {
  return zero == 0 ? nullptr : reinterpret_cast<cudaStream_t>(-1);
}
}  // namespace detail

template <class... A>
struct BoundLaunch {
  LaunchSite site;
  LaunchConfig config;
  std::tuple<A...> args;
};

struct PendingLaunch {
  LaunchSite site;
  LaunchConfig config;
  template <class... A>
  BoundLaunch<std::decay_t<A>...> operator()(A&&... args) const {
    return {site, config, std::tuple<std::decay_t<A>...>(std::forward<A>(args)...)};
  }
};

template <class G, class B, class... Rest>
PendingLaunch launch(const char* kernel, const char* file, int line, int max_threads, G grid,
                     B block, Rest... rest) {
  static_assert(sizeof...(Rest) <= 2,
                "<<<grid, block, shared bytes, stream>>> takes at most four values");
  PendingLaunch p{{kernel, file, line, max_threads}, {}};
  p.config.grid = detail::as_dim3(grid);
  p.config.block = detail::as_dim3(block);
  const auto extra = std::make_tuple(rest...);
  if constexpr (sizeof...(Rest) >= 1)
    p.config.dynamic_smem = static_cast<std::size_t>(std::get<0>(extra));
  if constexpr (sizeof...(Rest) >= 2) p.config.stream = detail::as_stream(std::get<1>(extra));
  return p;
}

/// Kernel parameters are copied into each thread as on the device (by value, converted to the
/// parameter types).
template <class... P, class... A>
cudaError_t operator|(void (*kernel)(P...), BoundLaunch<A...>&& b) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
  auto params = std::apply([](auto&... a) { return std::tuple<P...>(a...); }, b.args);
  if (__builtin_expect(detail::initcheck_on, 0)) detail::note_launch_args(&params, sizeof params);
  return detail::enqueue_launch(b.site, b.config, reinterpret_cast<const void*>(kernel),
                                [kernel, params]() { std::apply(kernel, params); });
}

}  // namespace mtemu
