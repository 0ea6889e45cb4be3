#pragma once
// Kernel names as a tracer meets them: C++ demangling, and what NCCL's kernel
// names and NVTX range names say about a collective.
//
// NCCL kernels (any name starting with "nccl") are communication. Their names:
//   ncclDevKernel_<Coll>_<Op>_<type>_<ALGO>_<PROTO>   NCCL >= 2.19, e.g.
//       ncclDevKernel_AllReduce_Sum_bf16_RING_LL, ncclDevKernel_AllGather_RING_LL,
//       ncclDevKernel_SendRecv, ncclDevKernel_Generic (several collectives)
//   ncclSymkDevKernel_<Coll>_<algo>[_<op>_<type>]     symmetric-memory kernels
//   ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<ctype>     NCCL < 2.19, e.g.
//       ncclKernel_AllReduce_RING_LL_Sum_float, ..._Sum___nv_bfloat16
// NCCL runs signed-integer sums on its unsigned kernels, so u32/u64 kernels
// are reported as int32/int64 (same size, and what the caller most likely passed).
// The CUPTI tracer and the Kineto and Nsight Systems importers all read
// kernel names here.

#include <optional>
#include <string>
#include <string_view>

#include "core/trace_types.h"

namespace cs::trace {

// The readable form of a mangled C++ name ("_Z3addPfS_" -> "add(float*, float*)");
// the name itself when it is not mangled or cannot be demangled.
std::string demangle(const char* name);

// The function name without return type, template arguments or parameters:
// "void at::native::foo<float>(int)" -> "at::native::foo".
std::string_view kernel_base_name(std::string_view demangled);

// The name with template arguments but without return type, parameters or
// "(anonymous namespace)::": what tells one kernel from another where a
// table has no room for the whole name ("void cs::worker::(anonymous
// namespace)::softmax_kernel<float>(float*, int)" -> "cs::worker::softmax_kernel<float>").
std::string kernel_short_name(std::string_view demangled);

struct NcclKernel {
  Collective collective = Collective::none;  // none: Generic kernels; send_recv: SendRecv
  DataType dtype = DataType::none;
  bool point_to_point = false;  // SendRecv kernels (also all-to-all, gather, scatter)
};

// What an NCCL kernel's name says; nothing when the name is not an NCCL kernel.
// Takes a mangled or demangled name.
std::optional<NcclKernel> parse_nccl_kernel_name(std::string_view name);

// An NCCL API call as NCCL's NVTX range in domain "NCCL" names it ("ncclAllReduce").
struct NcclCall {
  Collective collective = Collective::none;  // none for gather/scatter
  bool point_to_point = false;               // send, recv
  bool third_field_is_peer_or_root = false;  // the payload's int after the size: peer or root
};

std::optional<NcclCall> nccl_call_from_range_name(std::string_view name);

// A CUDA runtime call's name without the version CUPTI and Nsight Systems
// append ("cudaMemcpy_v3020" -> "cudaMemcpy", as `nsys stats` shows it):
// the CUPTI tracer and the Nsight Systems import name calls alike.
std::string_view api_name_without_version(std::string_view name);

}  // namespace cs::trace
