// The vendor libraries are opened on first use (core/vendor/): each forwarding stub reaches the
// real library of the major version the build compiled against, and a library or function that
// cannot be found is a DeviceError that names it, every place tried and what to do. None of this
// needs a GPU: version queries and error strings work without one. CUDA builds only.

#include <cublas_v2.h>
#include <cudnn.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>

#include "core/error.h"
#include "core/vendor/vendor_library.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(VendorLibraries, CublasStubsReachTheLibraryOfTheCompiledMajorVersion) {
  int major = -1, minor = -1;
  ASSERT_EQ(cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGetProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
  EXPECT_GE(minor, 0);
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  const std::string path = vendor_library_path(VendorLibrary::cublas);
  EXPECT_TRUE(contains(path, vendor_library_spec(VendorLibrary::cublas).soname)) << path;
}

TEST(VendorLibraries, CudnnAndNcclStubsReachTheirLibraries) {
  EXPECT_EQ(cudnnGetVersion() / 10000, size_t(CUDNN_MAJOR));  // major*10000 + minor*100 + patch
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
  int nccl = 0;
  ASSERT_EQ(ncclGetVersion(&nccl), ncclSuccess);
  EXPECT_EQ(nccl / 10000, NCCL_MAJOR);
  EXPECT_FALSE(std::string(ncclGetErrorString(ncclInvalidArgument)).empty());
  EXPECT_TRUE(contains(vendor_library_path(VendorLibrary::cudnn), "libcudnn.so."));
  EXPECT_TRUE(contains(vendor_library_path(VendorLibrary::nccl), "libnccl.so."));
}

TEST(VendorLibraries, SonamesCarryTheCompiledMajorVersions) {
  EXPECT_EQ(vendor_library_spec(VendorLibrary::cublas).soname,
            "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(vendor_library_spec(VendorLibrary::cublaslt).soname,
            "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(vendor_library_spec(VendorLibrary::cudnn).soname,
            "libcudnn.so." + std::to_string(CUDNN_MAJOR));
  EXPECT_EQ(vendor_library_spec(VendorLibrary::nccl).soname,
            "libnccl.so." + std::to_string(NCCL_MAJOR));
  // NVML comes with the driver, not the toolkit: the same soname for every driver, and no build
  // directory to look in.
  EXPECT_EQ(vendor_library_spec(VendorLibrary::nvml).soname, "libnvidia-ml.so.1");
  EXPECT_TRUE(vendor_library_spec(VendorLibrary::nvml).directories.empty());
}

TEST(VendorLibraries, AMissingLibraryNamesEveryPlaceTriedAndWhatToDo) {
  const VendorLibrarySpec spec{"cuFictional",
                               "libminitrain_no_such_library.so.7",
                               {"/nonexistent/one", "/nonexistent/two"},
                               "pick --gemm warptile"};
  EXPECT_THROW(open_vendor_library(spec), DeviceError);
  const std::string msg = error_message([&] { open_vendor_library(spec); });
  EXPECT_TRUE(contains(msg, "cuFictional (libminitrain_no_such_library.so.7) could not be loaded"))
      << msg;
  EXPECT_TRUE(contains(msg, "\n  libminitrain_no_such_library.so.7: ")) << msg;
  EXPECT_TRUE(contains(msg, "/nonexistent/one/libminitrain_no_such_library.so.7: ")) << msg;
  EXPECT_TRUE(contains(msg, "/nonexistent/two/libminitrain_no_such_library.so.7: ")) << msg;
  EXPECT_TRUE(contains(msg, "LD_LIBRARY_PATH")) << msg;
  EXPECT_TRUE(contains(msg, "pick --gemm warptile")) << msg;
}

TEST(VendorLibraries, AMissingFunctionNamesItAndTheLibraryFile) {
  EXPECT_THROW(vendor_symbol(VendorLibrary::nccl, "ncclNoSuchFunction"), DeviceError);
  const std::string msg =
      error_message([] { vendor_symbol(VendorLibrary::nccl, "ncclNoSuchFunction"); });
  EXPECT_TRUE(contains(msg, "has no function ncclNoSuchFunction")) << msg;
  EXPECT_TRUE(contains(msg, "libnccl.so.")) << msg;
  EXPECT_NE(vendor_symbol(VendorLibrary::nccl, "ncclAllReduce"), nullptr);
}

}  // namespace
}  // namespace minitrain
