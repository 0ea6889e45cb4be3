#include "core/cuda_driver.h"

#include <dlfcn.h>

namespace cs {

namespace {

template <class F>
void bind(void* handle, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(handle, name));
}

}  // namespace

CudaDriver::CudaDriver(void* handle) : handle_(handle) {
  bind(handle_, cuInit, "cuInit");
  bind(handle_, cuDriverGetVersion, "cuDriverGetVersion");
  bind(handle_, cuGetErrorString, "cuGetErrorString");
  bind(handle_, cuDeviceGetCount, "cuDeviceGetCount");
  bind(handle_, cuDeviceGet, "cuDeviceGet");
  bind(handle_, cuDeviceGetName, "cuDeviceGetName");
  bind(handle_, cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  bind(handle_, cuDeviceGetAttribute, "cuDeviceGetAttribute");
  bind(handle_, cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState");
  bind(handle_, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  bind(handle_, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  bind(handle_, cuCtxPushCurrent, "cuCtxPushCurrent_v2");
  bind(handle_, cuCtxPopCurrent, "cuCtxPopCurrent_v2");
  bind(handle_, cuMemGetInfo, "cuMemGetInfo_v2");
}

CudaDriver::~CudaDriver() {
  dlclose(handle_);
}

std::unique_ptr<CudaDriver> CudaDriver::load() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) return nullptr;
  return std::unique_ptr<CudaDriver>(new CudaDriver(handle));
}

std::unique_ptr<CudaDriver> CudaDriver::loaded() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return nullptr;
  return std::unique_ptr<CudaDriver>(new CudaDriver(handle));
}

}  // namespace cs
