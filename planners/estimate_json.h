#pragma once
// The JSON form of an Estimate and a search result: the keys that
// `clusterscope plan --json` and `clusterscope search --json` print and
// docs/planner.md documents (memory.per_gpu_bytes, memory.<part>_bytes,
// time.step_seconds, time.<part>_seconds, throughput.tokens_per_second, ...).

#include <nlohmann/json_fwd.hpp>

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

}  // namespace cs::plan
