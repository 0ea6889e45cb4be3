#pragma once
// The summary `clusterscope run` prints at the end: per rank, compute,
// communication and how much of the communication compute hid, from the run
// store's analyses.

#include <iosfwd>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace cs::cli {

// {"ranks": [{"rank", "compute_ns", "communication_ns", "overlap_ns",
//   "overlap_percent", "exposed_communication_ns", "idle_ns", "span_ns"}...]}
// or {"error": "..."} when the store cannot be analysed.
nlohmann::json run_summary_json(const std::string& run_store);
void print_run_summary(std::ostream& out, const nlohmann::json& summary);

}  // namespace cs::cli
