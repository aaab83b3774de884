// cuDNN functions minitrain calls, forwarded to libcudnn opened on first use (Note [vendor stubs]
// in core/vendor/vendor_library.h). The activation functions are deprecated in cuDNN 9 but still
// exported; their stubs must exist as long as kernels/cudnn_activation.cpp calls them.

#include <cudnn.h>

#include "core/vendor/forward.h"

MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle), (handle))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnSetStream, (cudnnHandle_t handle, cudaStream_t stream),
                  (handle, stream))
MT_VENDOR_FORWARD(cudnn, size_t, cudnnGetVersion, (void), ())
MT_VENDOR_FORWARD(cudnn, const char*, cudnnGetErrorString, (cudnnStatus_t status), (status))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnCreateTensorDescriptor,
                  (cudnnTensorDescriptor_t * desc), (desc))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnDestroyTensorDescriptor,
                  (cudnnTensorDescriptor_t desc), (desc))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnSetTensor4dDescriptor,
                  (cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format, cudnnDataType_t type,
                   int n, int c, int h, int w),
                  (desc, format, type, n, c, h, w))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnCreateActivationDescriptor,
                  (cudnnActivationDescriptor_t * desc), (desc))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnDestroyActivationDescriptor,
                  (cudnnActivationDescriptor_t desc), (desc))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnSetActivationDescriptor,
                  (cudnnActivationDescriptor_t desc, cudnnActivationMode_t mode,
                   cudnnNanPropagation_t nan, double coef),
                  (desc, mode, nan, coef))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnActivationForward,
                  (cudnnHandle_t handle, cudnnActivationDescriptor_t desc, const void* alpha,
                   const cudnnTensorDescriptor_t xDesc, const void* x, const void* beta,
                   const cudnnTensorDescriptor_t yDesc, void* y),
                  (handle, desc, alpha, xDesc, x, beta, yDesc, y))
MT_VENDOR_FORWARD(cudnn, cudnnStatus_t, cudnnActivationBackward,
                  (cudnnHandle_t handle, cudnnActivationDescriptor_t desc, const void* alpha,
                   const cudnnTensorDescriptor_t yDesc, const void* y,
                   const cudnnTensorDescriptor_t dyDesc, const void* dy,
                   const cudnnTensorDescriptor_t xDesc, const void* x, const void* beta,
                   const cudnnTensorDescriptor_t dxDesc, void* dx),
                  (handle, desc, alpha, yDesc, y, dyDesc, dy, xDesc, x, beta, dxDesc, dx))
