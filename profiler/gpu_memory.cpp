#include "profiler/gpu_memory.h"

#include <dlfcn.h>

namespace cs::profiler {

// Driver API entry points, resolved by their exported names (cuda.h maps
// cuMemGetInfo to cuMemGetInfo_v2 and so on). CUresult and CUdevice are int,
// CUcontext is a pointer.
struct GpuMemoryProbe::Driver {
  void* handle = nullptr;
  int (*device_count)(int*) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*primary_state)(int, unsigned*, int*) = nullptr;
  int (*primary_retain)(void**, int) = nullptr;
  int (*primary_release)(int) = nullptr;
  int (*push)(void*) = nullptr;
  int (*pop)(void**) = nullptr;
  int (*mem_info)(std::size_t*, std::size_t*) = nullptr;
  int (*device_name)(char*, int, int) = nullptr;

  template <class F>
  bool bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    return f != nullptr;
  }
  ~Driver() {
    if (handle) dlclose(handle);
  }
};

Result<std::unique_ptr<GpuMemoryProbe>> GpuMemoryProbe::attach() {
  auto d = std::make_unique<Driver>();
  d->handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!d->handle) return Error{"no CUDA driver is loaded in this process"};
  const bool bound =
      d->bind(d->device_count, "cuDeviceGetCount") && d->bind(d->device_get, "cuDeviceGet") &&
      d->bind(d->primary_state, "cuDevicePrimaryCtxGetState") &&
      d->bind(d->primary_retain, "cuDevicePrimaryCtxRetain") &&
      d->bind(d->primary_release, "cuDevicePrimaryCtxRelease_v2") &&
      d->bind(d->push, "cuCtxPushCurrent_v2") && d->bind(d->pop, "cuCtxPopCurrent_v2") &&
      d->bind(d->mem_info, "cuMemGetInfo_v2") && d->bind(d->device_name, "cuDeviceGetName");
  if (!bound) return Error{"the loaded CUDA driver lacks the memory-query entry points"};
  return std::unique_ptr<GpuMemoryProbe>(new GpuMemoryProbe(std::move(d)));
}

GpuMemoryProbe::GpuMemoryProbe(std::unique_ptr<Driver> driver) : driver_(std::move(driver)) {}
GpuMemoryProbe::~GpuMemoryProbe() = default;

std::vector<GpuMemoryProbe::Reading> GpuMemoryProbe::read() {
  std::vector<Reading> readings;
  Driver& d = *driver_;
  int count = 0;
  if (d.device_count(&count) != 0) return readings;  // not initialised yet
  for (int i = 0; i < count; ++i) {
    int device = 0;
    unsigned flags = 0;
    int active = 0;
    if (d.device_get(&device, i) != 0 || d.primary_state(device, &flags, &active) != 0 || !active) {
      continue;
    }
    // Retaining an active primary context only counts a reference.
    void* context = nullptr;
    if (d.primary_retain(&context, device) != 0) continue;
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    bool ok = false;
    if (d.push(context) == 0) {
      ok = d.mem_info(&free_bytes, &total_bytes) == 0;
      void* popped = nullptr;
      d.pop(&popped);
    }
    d.primary_release(device);
    if (ok && total_bytes >= free_bytes) {
      readings.push_back({i, static_cast<std::int64_t>(total_bytes - free_bytes),
                          static_cast<std::int64_t>(total_bytes)});
    }
  }
  return readings;
}

std::string GpuMemoryProbe::device_name(int ordinal) {
  int device = 0;
  char name[256] = {};
  if (driver_->device_get(&device, ordinal) != 0 ||
      driver_->device_name(name, sizeof name - 1, device) != 0) {
    return "GPU " + std::to_string(ordinal);
  }
  return name;
}

}  // namespace cs::profiler
