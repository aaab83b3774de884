#pragma once
// The emulated build's <cuda_runtime.h>: the runtime API, the device-side language and the
// kernel launch that `<<<grid, block, smem, stream>>>` is rewritten into at build time.
#include "cuda_runtime_api.h"
#include "cuda_emu/device_api.h"
#include "cuda_emu/launch.h"
