#include "profiler/cupti/api_filter.h"

#include <algorithm>
#include <array>

#include "core/kernel_names.h"

namespace cs::profiler::cupti_api {

namespace {

constexpr std::array<CUpti_CallbackId, 11> kNoisyRuntime = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v12030,
    // PyTorch's allocator and NCCL call it around allocations, thousands of times.
    CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010,
};

constexpr std::array<CUpti_CallbackId, 12> kNoisyDriver = {
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetName,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2,
};

// Driver calls kept: kernel and graph launches, and the virtual-memory calls
// NCCL and allocators make directly.
constexpr std::array<CUpti_CallbackId, 16> kTrackedDriver = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemExportToShareableHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
};

bool contains(std::span<const CUpti_CallbackId> list, CUpti_CallbackId cbid) {
  return std::find(list.begin(), list.end(), cbid) != list.end();
}

}  // namespace

std::span<const CUpti_CallbackId> noisy_runtime_calls() {
  return kNoisyRuntime;
}
std::span<const CUpti_CallbackId> noisy_driver_calls() {
  return kNoisyDriver;
}

bool keep(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) return !contains(kNoisyRuntime, cbid);
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) return contains(kTrackedDriver, cbid);
  return false;
}

std::string name(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
  const CUpti_CallbackDomain domain =
      kind == CUPTI_ACTIVITY_KIND_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
  const char* text = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &text) != CUPTI_SUCCESS || !text) {
    return (kind == CUPTI_ACTIVITY_KIND_DRIVER ? "driver call " : "runtime call ") +
           std::to_string(cbid);
  }
  // Runtime names carry the version that introduced them: cudaMemcpy_v3020.
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME)
    return std::string(cs::trace::api_name_without_version(text));
  return text;
}

}  // namespace cs::profiler::cupti_api
