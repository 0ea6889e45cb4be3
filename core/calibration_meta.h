#pragma once
// What a calibration store holds, in its meta row "calibration": the engine
// and host measured and, per configuration, how many ranks ran at once and
// under which store ranks their events were recorded (several mpirun worlds
// share one store). Written by the recorder (profiler), read by the fit
// (planners).

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cs {

inline constexpr std::string_view kCalibrationMetaKey = "calibration";
// The annotation over a calibration's cold all-reduces: the collectives
// inside it are timed as a training step meets its gradients after
// backward, their buffers out of the caches (Link::cold_*).
inline constexpr std::string_view kColdCollectivesAnnotation = "all-reduce sweep, caches cold";
// What the cold sweep writes before each all-reduce to evict the caches:
// more than the last-level caches the CPU engine meets.
inline constexpr std::int64_t kColdSweepEvictBytes = std::int64_t{64} << 20;

// The bounds of what a calibration sweeps, for the CLI's options, the
// worker's and the sweep lines read back: rank counts and threads up to
// 4096 (a sweep line's rank of three million made a lane per rank up to
// it), buffers and messages up to 16 GiB (past that a rank's buffers,
// several per size, exhaust any host's memory: a bare std::bad_alloc).
inline constexpr int kMaxSweepRanks = 4096;
inline constexpr std::int64_t kMaxSweepBytes = std::int64_t{1} << 34;

// One set of a layer GEMM's operands (h tokens of width h to width `out`),
// bytes: the input, output and their gradients and the weight and bias in
// the storage type, the weight's and bias's gradients in fp32. The GEMM
// sweep holds as many sets as take 8 MiB (up to 16), so that each
// repetition meets its operands out of the core's caches; calibrate checks
// a rank's memory against the same figures before any rank starts.
inline double layer_gemm_set_bytes(int element_bytes, std::int64_t h, std::int64_t out) {
  const double square = static_cast<double>(h) * static_cast<double>(h);  // input, its gradient
  const double wide =
      static_cast<double>(h) * static_cast<double>(out);  // weight, output, its gradient
  const double bias = static_cast<double>(out);
  return element_bytes * (2 * square + 3 * wide + bias) + 4.0 * (wide + bias);
}
inline int layer_gemm_set_copies(double set_bytes) {
  const double copies = std::ceil(8.0 * (1 << 20) / set_bytes);
  return copies >= 16 ? 16 : copies <= 1 ? 1 : static_cast<int>(copies);
}

struct CalibrationPhase {
  int ranks = 1;       // ranks that ran at once (the machine's share each got)
  int first_rank = 0;  // store rank of the world's rank 0
  int threads = 0;     // BLAS threads per rank (CPU engine); 0 when unknown
  std::string precision = "fp32";
};

struct CalibrationInfo {
  std::string engine;  // "cpu" or "cuda"
  std::string host;
  std::string device;  // "CPU (host)", "NVIDIA H200"
  double host_memory_bytes = 0;
  int cpu_cores = 0;
  std::vector<CalibrationPhase> phases;
};

std::string calibration_meta_json(const CalibrationInfo& info);
// `where` names the source in messages ("run.db: meta calibration").
Result<CalibrationInfo> calibration_info_from_json(std::string_view text, std::string_view where);

}  // namespace cs
