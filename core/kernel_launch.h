#pragma once
// How a kernel was launched: its grid and block, registers per thread and
// shared memory per block, as CUPTI's kernel record, an Nsight Systems
// export (CUPTI_ACTIVITY_KIND_KERNEL) and a PyTorch profile's kernel args
// give them. A trace store keeps it beside the kernel's event (the
// kernel_launches table), for the event's details.

#include <cstdint>
#include <optional>
#include <string>

#include "core/trace_types.h"

namespace cs::trace {

struct KernelLaunch {
  std::int64_t grid[3] = {0, 0, 0};        // blocks in x, y, z
  std::int64_t block[3] = {0, 0, 0};       // threads per block in x, y, z
  std::int64_t registers_per_thread = -1;  // -1: not recorded
  // Per block, static and dynamic together (what a PyTorch profile's
  // "shared memory" says); -1: not recorded.
  std::int64_t shared_memory_bytes = -1;
  std::int64_t dynamic_shared_memory_bytes = -1;  // of it, where the source splits it

  std::int64_t blocks() const { return grid[0] * grid[1] * grid[2]; }
  std::int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
  friend bool operator==(const KernelLaunch&, const KernelLaunch&) = default;
};

// The kinds of event a launch is kept for: kernels, and NCCL's kernels,
// which are stored as collectives and transfers.
inline bool may_have_launch(EventKind kind) {
  return kind == EventKind::kernel || kind == EventKind::collective || kind == EventKind::p2p;
}

// The launch as a source gave it, or nothing when it is not one CUDA could
// have made (a dimension below 1 or past CUDA's limits, a negative register
// or shared-memory count, dynamic past the whole): an unreadable launch is
// left out, the kernel kept.
std::optional<KernelLaunch> checked_launch(const KernelLaunch& launch);

// "grid 128 x 1 x 1, block 256 x 1 x 1 (32.8 k threads), 64 registers per
// thread, 48.0 KiB shared memory per block (16.0 KiB dynamic)"; what was not
// recorded is left out.
std::string launch_text(const KernelLaunch& launch);

}  // namespace cs::trace
