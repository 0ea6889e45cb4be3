#pragma once
// The machine probe: a short fixed measurement each rank makes before its
// first step (one layer GEMM forward, one layer-norm backward, one
// all-reduce over every rank), kept
// in the run store (meta "machine_probe"). The planner predicts the same two
// operations from the cluster the run was predicted on (meta
// "predicted_step", key "machine_probe"), so a comparison can tell a model
// that is wrong from a machine that is not the one calibrated: other work on
// the host, a slower clock, a changed network.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace cs {

inline constexpr std::string_view kMachineProbeMetaKey = "machine_probe";

// What is probed. The GEMM is the calibration's layer GEMM: `tokens` rows
// through a linear layer of `width` -> 4 x `width`, forward with its bias.
// The loop is a layer norm's backward over `tokens` x `width`, right after
// the GEMM threads read its output gradient, as the calibration times it:
// on a CPU it shows how fast the cores hand each other cache lines.
struct MachineProbeShape {
  int width = 0;
  std::string precision = "fp32";  // the run's compute precision
  std::int64_t all_reduce_bytes = 0;
  int ranks = 1;  // the all-reduce's group: every rank of the run
  int tokens() const { return width; }
  int out() const { return 4 * width; }
  std::int64_t loop_elements() const { return std::int64_t{tokens()} * width; }
};

// The probe's shape on an engine: a GEMM of a few milliseconds on a CPU,
// one that fills an accelerator on CUDA; a 1 MiB all-reduce.
MachineProbeShape machine_probe_shape(std::string_view backend, std::string_view precision,
                                      int ranks);

struct MachineProbe {
  MachineProbeShape shape;
  double gemm_seconds = 0;
  double loop_seconds = 0;        // 0 in a store recorded before the loop was probed
  double all_reduce_seconds = 0;  // 0 for one rank
};

std::string machine_probe_json(const MachineProbe& probe);
// `where` names the source in messages ("run.db: meta machine_probe").
Result<MachineProbe> machine_probe_from_json(std::string_view text, std::string_view where);

// A measured probe held against the planner's: measured / predicted per
// operation (0 where either side is missing).
struct MachineDrift {
  MachineProbe measured;
  MachineProbe predicted;
  double gemm_ratio() const;
  double loop_ratio() const;
  double all_reduce_ratio() const;
  // Any ratio beyond 1 +/- `tolerance` (the 15 % a step prediction is held to).
  bool drifted(double tolerance = 0.15) const;
  // "GEMM probe (256 x 256 -> 1024 fp32): 1.42 ms, the calibration says 1.12 ms (+27 %); ..."
  std::string text() const;
};

}  // namespace cs
