#pragma once
// GPU memory in use, as cudaMemGetInfo reports it (used = total - free), for
// the devices a program is using, read from a tracer's own thread.
//
// It binds to the CUDA driver the program has already loaded (it never loads
// or initialises one) and reads only devices whose primary context is active,
// through that context: cudaMemGetInfo on a fresh thread would instead create
// a context on device 0 and take hundreds of MB from every rank there.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_driver.h"
#include "core/result.h"

namespace cs::profiler {

class GpuMemoryProbe {
 public:
  struct Reading {
    int device = 0;
    std::int64_t used_bytes = 0;
    std::int64_t total_bytes = 0;
  };

  // Fails with a sentence when no CUDA driver is loaded in this process.
  static Result<std::unique_ptr<GpuMemoryProbe>> attach();
  ~GpuMemoryProbe();

  // One reading per device in use. Empty while the driver is not initialised.
  std::vector<Reading> read();
  // The driver's name of a device, e.g. "NVIDIA H200".
  std::string device_name(int device);

 private:
  explicit GpuMemoryProbe(std::unique_ptr<CudaDriver> driver);
  std::unique_ptr<CudaDriver> driver_;
};

}  // namespace cs::profiler
