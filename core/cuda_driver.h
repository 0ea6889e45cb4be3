#pragma once
// The CUDA driver API, resolved at run time from libcuda.so.1 (dlopen and
// dlsym): nothing needs CUDA headers or the driver to build, and programs
// start, and say so plainly, on machines without one. The one place that
// opens the driver by hand: the host probe, the GPU memory sampler and the
// injection library all go through it.
//
// Types follow cuda.h: CUresult and CUdevice are int (0 is CUDA_SUCCESS),
// CUcontext is a pointer, sizes are size_t. Each entry point is bound by the
// name the driver exports (cuda.h maps cuDeviceTotalMem to
// cuDeviceTotalMem_v2 and so on), and is nullptr when the driver lacks it.

#include <cstddef>
#include <memory>

namespace cs {

class CudaDriver {
 public:
  // Loads libcuda.so.1 (and so the driver, uninitialised until cuInit);
  // nullptr when it is not installed.
  static std::unique_ptr<CudaDriver> load();
  // The driver this process has already loaded; never loads or initialises
  // one. nullptr when none is loaded.
  static std::unique_ptr<CudaDriver> loaded();

  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  int (*cuInit)(unsigned flags) = nullptr;
  int (*cuDriverGetVersion)(int* version) = nullptr;
  int (*cuGetErrorString)(int result, const char** text) = nullptr;
  int (*cuDeviceGetCount)(int* count) = nullptr;
  int (*cuDeviceGet)(int* device, int ordinal) = nullptr;
  int (*cuDeviceGetName)(char* name, int length, int device) = nullptr;
  int (*cuDeviceTotalMem)(std::size_t* bytes, int device) = nullptr;  // _v2
  int (*cuDeviceGetAttribute)(int* value, int attribute, int device) = nullptr;
  int (*cuDevicePrimaryCtxGetState)(int device, unsigned* flags, int* active) = nullptr;
  int (*cuDevicePrimaryCtxRetain)(void** context, int device) = nullptr;
  int (*cuDevicePrimaryCtxRelease)(int device) = nullptr;                            // _v2
  int (*cuCtxPushCurrent)(void* context) = nullptr;                                  // _v2
  int (*cuCtxPopCurrent)(void** context) = nullptr;                                  // _v2
  int (*cuMemGetInfo)(std::size_t* free_bytes, std::size_t* total_bytes) = nullptr;  // _v2

 private:
  explicit CudaDriver(void* handle);
  void* handle_ = nullptr;
};

}  // namespace cs
