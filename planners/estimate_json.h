#pragma once
// The JSON form of an Estimate and a search result: the keys that
// `clusterscope plan --json` and `clusterscope search --json` print and
// docs/planner.md documents (memory.per_gpu_bytes, memory.<part>_bytes,
// time.step_seconds, time.<part>_seconds, throughput.tokens_per_second, ...).

#include <nlohmann/json_fwd.hpp>

#include "core/predicted_step.h"
#include "planners/estimate.h"
#include "planners/search.h"
#include "planners/timeline.h"

namespace cs::plan {

nlohmann::json to_json(const MemoryBreakdown& memory);
nlohmann::json to_json(const Estimate& estimate);
// A ranked plan: its parallel and precision plans, cluster size and estimate.
nlohmann::json to_json(const RankedPlan& plan);
nlohmann::json to_json(const SearchResult& result);
nlohmann::json to_json(const Timeline& timeline);

// What a run store keeps of the estimate (meta "predicted_step",
// docs/calibration.md): the step and its parts as the trace analyses measure
// them — categories (compute, communication, other), and breakdown:
// compute.<kind> for every ComputeByKind kind, optimizer, communication.tp /
// .dp / .pp (exposed), wait, bubble and idle (0: the plan expects none) —
// in seconds.
trace::PredictedStep predicted_step(const Estimate& estimate);

}  // namespace cs::plan
