#include "core/kernel_launch.h"

#include "core/format.h"

namespace cs::trace {

std::optional<KernelLaunch> checked_launch(const KernelLaunch& launch) {
  // CUDA's limits: a grid of 2^31 - 1 blocks in x, 65535 in y and z; 1024
  // threads per block, 64 in z. A newer GPU could raise the block's, so only
  // the grid's hard limits and a block that fits an int are held to.
  constexpr std::int64_t kGridLimits[3] = {2147483647, 65535, 65535};
  for (int i = 0; i < 3; ++i) {
    if (launch.grid[i] < 1 || launch.grid[i] > kGridLimits[i]) return std::nullopt;
    if (launch.block[i] < 1 || launch.block[i] > 2147483647) return std::nullopt;
  }
  // Their products must stay counts (a block of 2^31 cubed overflowed them).
  if (static_cast<double>(launch.block[0]) * static_cast<double>(launch.block[1]) *
          static_cast<double>(launch.block[2]) >
      2147483647.0)
    return std::nullopt;
  if (launch.registers_per_thread < -1 || launch.registers_per_thread > 65536) return std::nullopt;
  if (launch.shared_memory_bytes < -1 || launch.dynamic_shared_memory_bytes < -1)
    return std::nullopt;
  if (launch.shared_memory_bytes >= 0 &&
      launch.dynamic_shared_memory_bytes > launch.shared_memory_bytes)
    return std::nullopt;
  return launch;
}

std::string launch_text(const KernelLaunch& launch) {
  auto dims = [](const std::int64_t(&d)[3]) {
    return std::to_string(d[0]) + " x " + std::to_string(d[1]) + " x " + std::to_string(d[2]);
  };
  std::string out = "grid " + dims(launch.grid) + ", block " + dims(launch.block) + " (" +
                    format_count(static_cast<double>(launch.blocks()) *
                                 static_cast<double>(launch.threads_per_block())) +
                    " threads)";
  if (launch.registers_per_thread >= 0)
    out += ", " + std::to_string(launch.registers_per_thread) + " registers per thread";
  if (launch.shared_memory_bytes >= 0) {
    out += ", " + format_bytes(static_cast<double>(launch.shared_memory_bytes)) +
           " shared memory per block";
    if (launch.dynamic_shared_memory_bytes >= 0)
      out += " (" + format_bytes(static_cast<double>(launch.dynamic_shared_memory_bytes)) +
             " dynamic)";
  }
  return out;
}

}  // namespace cs::trace
