#pragma once
// The CUDA engine's backend: GEMMs through cuBLAS (FP32, TF32, BF16, FP16)
// and cuBLASLt (FP8 E4M3 on Hopper and newer, forward GEMMs with per-tensor
// scaling; their backward runs in BF16), the engine's own kernels for the
// rest, everything in order on one compute stream. No CUDA header here: the
// worker and the CLI include this without the toolkit's headers.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/result.h"
#include "core/trace_types.h"
#include "profiler/worker/backend.h"

namespace cs::worker {

enum class CudaCompute { fp32, tf32, bf16, fp16, fp8 };

// The storage type of activations and weights for a compute mode.
DType cuda_storage_type(CudaCompute compute);
Result<CudaCompute> cuda_compute_from_string(const std::string& precision);

struct CudaDeviceInfo {
  std::string name;
  int compute_major = 0, compute_minor = 0;
  double memory_bytes = 0;
  int runtime_version = 0, driver_version = 0;
};

// The devices, or the sentence saying why there are none ("no GPU: ...").
Result<int> cuda_device_count();
Result<CudaDeviceInfo> cuda_device_info(int device);

// Called around every GEMM launch with a fresh id and the GEMM's name,
// FLOPs and operand bytes, so that a tracer can tie the kernels cuBLAS
// launches to the work they do (CUPTI external correlation); the engine
// itself knows nothing of CUPTI.
struct GemmHooks {
  std::function<void(std::uint64_t id, std::string_view name, double flops, std::int64_t bytes)>
      before;
  // `computed_in`: the type the GEMM ran in where it is not the run's
  // precision (an fp8 run's BF16 backward and fallbacks, its FP8 forwards),
  // else none: learning files the GEMM under it.
  std::function<void(std::uint64_t id, trace::DataType computed_in)> after;
};

Result<std::unique_ptr<Backend>> make_cuda_backend(int device, CudaCompute compute);
void set_gemm_hooks(Backend& cuda_backend, GemmHooks hooks);
// FP8 forward GEMMs run in FP8 and those that fell back to BF16 (no cuBLASLt kernel).
std::pair<std::uint64_t, std::uint64_t> cuda_fp8_gemm_counts(Backend& cuda_backend);
// The backend's compute stream (a cudaStream_t), for NCCL and events.
void* cuda_compute_stream(Backend& cuda_backend);
// Makes `device` current on the calling thread. A thread starts on device 0:
// one driving another GPU selects it first, or its allocations, events and
// launches go to the wrong device.
void cuda_use_device(int device);
// Bytes the engine has allocated (what torch.cuda.memory_allocated reports),
// and the device's used memory (cudaMemGetInfo), for the memory counters.
double cuda_device_memory_used(int device);

}  // namespace cs::worker
