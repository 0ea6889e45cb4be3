#pragma once
// The planner's predicted step, written into a trace store so that the
// timeline, analyses and exports that serve measured runs serve it too (the
// app's predicted lane, `clusterscope plan --timeline`): one rank per
// pipeline stage (data- and tensor-parallel rank 0), a compute lane and a
// communication lane each.

#include <cstdint>
#include <string>
#include <vector>

#include "core/plans.h"
#include "core/result.h"

namespace cs::plan {

struct PredictedStore {
  std::string path;
  int stages = 0;
  std::int64_t spans = 0;
  std::int64_t step_ns = 0;
};

// Simulates the plan's schedule (planners/timeline.h) and writes it to a new
// trace store at `path`: one step from zero, or, given the start of each
// measured step (on the measured run's clock), the predicted step from each
// of those starts (at most kMaxPredictedSteps), so that it lines up with
// the run beside it.
inline constexpr std::size_t kMaxPredictedSteps = 2000;
// Its meta "source": what tells a predicted timeline from a store of measurements.
inline constexpr const char* kPredictedTimelineSource = "planner";
Result<PredictedStore> write_predicted_timeline(const Plan& plan, const std::string& path,
                                                const std::vector<std::int64_t>& step_starts = {});

}  // namespace cs::plan
