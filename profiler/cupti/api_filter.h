#pragma once
// Which CUDA API calls are worth a trace event, as PyTorch's kineto decides:
// every runtime call except a few that programs make around every launch or
// allocation (cudaGetDevice, cudaGetLastError, event create/destroy, stream
// capture queries), and of the
// driver calls only those that launch work or map memory (what Triton, NCCL
// and CUDA graphs call directly). Internal to the CUPTI tracer: includes CUPTI.

#include <span>
#include <string>

#include <cupti.h>

namespace cs::profiler::cupti_api {

// Runtime calls dropped at the source (cuptiActivityEnableRuntimeApi) and by the decoder.
std::span<const CUpti_CallbackId> noisy_runtime_calls();
// Driver calls dropped at the source (cuptiActivityEnableDriverApi): context
// queries, and what the tracer's own GPU-memory sampler calls.
std::span<const CUpti_CallbackId> noisy_driver_calls();

// Whether an API record of `kind` (RUNTIME or DRIVER) with `cbid` becomes an event.
bool keep(CUpti_ActivityKind kind, CUpti_CallbackId cbid);

// "cudaLaunchKernel" for runtime cbid cudaLaunchKernel_v7000, "cuLaunchKernelEx"
// for the driver: CUPTI's name without the version suffix of runtime calls.
std::string name(CUpti_ActivityKind kind, CUpti_CallbackId cbid);

}  // namespace cs::profiler::cupti_api
