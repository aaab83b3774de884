#pragma once
// MT_VENDOR_FORWARD: defines one vendor C function as a forward to the real one, found on first
// call (Note [vendor stubs] in core/vendor/vendor_library.h). Include after the vendor header, so
// that a parameter list that differs from the header's is a compile error, not a wrong call.
//
//   MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t h), (h))

#include "core/vendor/vendor_library.h"

// The function-local static is initialised once, thread-safely; when the library is missing the
// lookup throws, nothing is cached, and the next call tries again.
#define MT_VENDOR_FORWARD(library, result, name, parameters, arguments)          \
  extern "C" result name parameters {                                            \
    using Function = result(*) parameters;                                       \
    static const Function real = reinterpret_cast<Function>(                     \
        ::minitrain::vendor_symbol(::minitrain::VendorLibrary::library, #name)); \
    return real arguments;                                                       \
  }
