#pragma once
// The predicted timeline of one training step: for one rank per pipeline
// stage (data-parallel rank 0, tensor-parallel rank 0), the ordered spans of
// the step as the schedule runs them: forward and backward per micro-batch
// (and model chunk), recomputation, tensor-parallel communication, pipeline
// send/receive, bubbles, the data-parallel gradient reduction with its
// overlap, and the optimizer. Times are integer nanoseconds from the step's
// start; categories and kinds are those of the trace store (core/trace_types.h)
// so that a measured run can be compared with it category by category.

#include <cstdint>
#include <string>
#include <vector>

#include "core/plans.h"
#include "core/result.h"
#include "core/trace_types.h"
#include "planners/estimate.h"

namespace cs::plan {

struct TimelineSpan {
  int stage = 0;  // pipeline stage of the rank
  int lane = 0;   // 0: compute stream, 1: communication stream (overlapped work)
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;  // [start, end)
  trace::Category category = trace::Category::compute;
  trace::EventKind kind = trace::EventKind::kernel;
  trace::Collective collective = trace::Collective::none;
  std::string name;      // "forward", "backward", "recompute", "tp all-reduce", "bubble", ...
  int micro_batch = -1;  // -1 when the span is not a micro-batch's
  int chunk = -1;        // model chunk (virtual stage), -1 when not a chunk's

  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

struct Timeline {
  int stages = 0;
  std::int64_t step_ns = 0;         // end of the last span: the predicted step time
  std::vector<TimelineSpan> spans;  // by stage, then lane, then start
};

// The most chunk passes (micro-batches x stages x chunks) a timeline draws.
inline constexpr std::int64_t kMaxTimelinePasses = 1'000'000;

// Simulates the plan's pipeline schedule (1F1B, or Megatron's interleaved
// order) on the estimate's per-micro-batch costs. Fails on the plans that
// estimate() refuses, and on steps of more than kMaxTimelinePasses passes
// (at /parallel/global_batch).
Result<Timeline> predict_timeline(const Plan& plan);

// Seconds of the stage's spans in a category, counting only its compute lane
// (lane 0) plus the exposed part of lane 1 (not overlapped by lane 0).
double category_seconds(const Timeline& timeline, int stage, trace::Category category);

}  // namespace cs::plan
