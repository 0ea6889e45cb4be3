#include "profiler/gpu_memory.h"

namespace cs::profiler {

Result<std::unique_ptr<GpuMemoryProbe>> GpuMemoryProbe::attach() {
  std::unique_ptr<CudaDriver> d = CudaDriver::loaded();
  if (!d) return Error{"no CUDA driver is loaded in this process"};
  if (!d->cuDeviceGetCount || !d->cuDeviceGet || !d->cuDevicePrimaryCtxGetState ||
      !d->cuDevicePrimaryCtxRetain || !d->cuDevicePrimaryCtxRelease || !d->cuCtxPushCurrent ||
      !d->cuCtxPopCurrent || !d->cuMemGetInfo || !d->cuDeviceGetName) {
    return Error{"the loaded CUDA driver lacks the memory-query entry points"};
  }
  return std::unique_ptr<GpuMemoryProbe>(new GpuMemoryProbe(std::move(d)));
}

GpuMemoryProbe::GpuMemoryProbe(std::unique_ptr<CudaDriver> driver) : driver_(std::move(driver)) {}
GpuMemoryProbe::~GpuMemoryProbe() = default;

std::vector<GpuMemoryProbe::Reading> GpuMemoryProbe::read() {
  std::vector<Reading> readings;
  const CudaDriver& d = *driver_;
  int count = 0;
  if (d.cuDeviceGetCount(&count) != 0) return readings;  // not initialised yet
  for (int i = 0; i < count; ++i) {
    int device = 0;
    unsigned flags = 0;
    int active = 0;
    if (d.cuDeviceGet(&device, i) != 0 ||
        d.cuDevicePrimaryCtxGetState(device, &flags, &active) != 0 || !active) {
      continue;
    }
    // Retaining an active primary context only counts a reference.
    void* context = nullptr;
    if (d.cuDevicePrimaryCtxRetain(&context, device) != 0) continue;
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    bool ok = false;
    if (d.cuCtxPushCurrent(context) == 0) {
      ok = d.cuMemGetInfo(&free_bytes, &total_bytes) == 0;
      void* popped = nullptr;
      d.cuCtxPopCurrent(&popped);
    }
    d.cuDevicePrimaryCtxRelease(device);
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
  if (driver_->cuDeviceGet(&device, ordinal) != 0 ||
      driver_->cuDeviceGetName(name, sizeof name - 1, device) != 0) {
    return "GPU " + std::to_string(ordinal);
  }
  return name;
}

}  // namespace cs::profiler
