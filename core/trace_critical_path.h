#pragma once
// The critical path of a training step across its ranks: the chain of
// operations that set the step's length, as Holistic Trace Analysis's
// critical path analysis finds it, from what a trace store records.
//
// The walk starts at the step's end on the rank whose work ended last and
// goes back in time. At each point it takes the operation of that rank that
// ended last before it (compute, a copy, a collective, a pipeline transfer):
// - a collective whose transfer began when a later rank joined (the rank
//   that arrived last, matched as `trace stats` matches calls: the n-th call
//   of one collective in a step and communicator) is on the path from that
//   moment only, and the path goes on from there on the late rank: what
//   delayed the call is that rank's work, not the waiting of the others;
// - a pipeline receive whose send began after it does the same with the
//   sending rank (the n-th send from one rank to another of one size is the
//   n-th receive's);
// - anything else is on the path whole, and the walk goes on from its start.
// Time between operations is idle (host work no traced operation covers).
// So waiting for slower ranks never appears on the path: the slower rank's
// work does. The segments cover the step's window end to end.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/trace_types.h"

namespace cs::trace {

class TraceReader;

struct CriticalSegment {
  std::int32_t rank = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  // As the step parts name them (trace_analysis.h StepParts): "compute.gemm",
  // "optimizer", "communication.dp", ...; "memory" for copies and sets;
  // "idle" between operations. Static text: copying a segment copies no string.
  std::string_view part;
  StringId name;  // the operation's (TraceReader::string); none for idle
  LaneId lane;    // the operation's lane; none (0) for idle
};

struct CriticalPath {
  std::int32_t step = 0;
  std::int64_t start_ns = 0, end_ns = 0;  // the step across its ranks
  std::vector<CriticalSegment> segments;  // in time order, from start to end without a gap
  std::int64_t length_ns() const { return end_ns - start_ns; }
};

// The critical path of each step (job_step_windows), or of the steps
// first..last when given, in time order. A trace that records no steps is
// one step, numbered 0, from its first event to its last.
Result<std::vector<CriticalPath>> critical_paths(
    const TraceReader& reader, std::optional<std::pair<std::int32_t, std::int32_t>> steps = {});

struct CriticalPathSummary {
  int steps = 0;       // paths summarised
  int warm_up = 0;     // leading steps left out (warm_up_steps)
  double step_ns = 0;  // their mean length
  // Mean time per step on the path: by part (the step parts' order, then
  // "memory" and "idle"; parts never met left out), and by rank.
  std::vector<std::pair<std::string_view, double>> parts;
  std::vector<std::pair<std::int32_t, double>> ranks;
  struct Operation {
    StringId name;
    std::string_view part;
    std::int64_t count = 0;  // segments of it on the paths
    double per_step_ns = 0;  // mean time per step on the path
  };
  std::vector<Operation> operations;  // by time, descending
};

// The paths' means; with `leave_out_warm_up`, past the warm-up steps
// (warm_up_steps of their lengths), as the comparison with the prediction.
CriticalPathSummary summarize_critical_paths(const std::vector<CriticalPath>& paths,
                                             bool leave_out_warm_up);
// The same for the steps first..last when given (all of them), else for every
// step past the warm-up, without keeping the paths' segments: a long run's
// paths hold more segments than it has events.
Result<CriticalPathSummary> summarize_critical_paths(
    const TraceReader& reader, std::optional<std::pair<std::int32_t, std::int32_t>> steps = {});

}  // namespace cs::trace
