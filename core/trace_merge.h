#pragma once
// Combines per-rank trace stores (one per worker process) into one run store
// on one clock. The launcher calls it when a run ends, `clusterscope profile`
// and the importers when they have one store per rank.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/trace_writer.h"

namespace cs::trace {

enum class ClockAlignment {
  // recorded offsets when every rank's tracer measured one; no shift when all
  // ranks ran on one host (one clock); otherwise the ends of matching
  // collectives; otherwise none.
  automatic,
  recorded,     // RankInfo::clock_offset_ns of each input
  collectives,  // the n-th collective of each kind ends at the same time on every rank
  none,
};

std::string_view to_string(ClockAlignment a);
std::optional<ClockAlignment> clock_alignment_from_string(std::string_view text);

struct MergeOptions {
  ClockAlignment alignment = ClockAlignment::automatic;
  // The run's metadata. Empty fields are taken from the first input that has
  // them; plan_json and command_line are how the launcher records the run.
  RunInfo run;
  // The output's status: how the run ended ("complete", "cancelled", "crashed", "hung", ...).
  std::string status = "complete";
  // More meta rows for the output (e.g. "predicted_step", "world_size").
  std::vector<std::pair<std::string, std::string>> meta;
  WriterOptions writer;
  // Every input's writer has exited (the launcher, after its ranks): inputs
  // left "writing" on another host are repaired (see TraceReader::Options).
  bool writers_ended = false;
  // The inputs are ranks of one run, which record one world size; a
  // calibration's phases (1, 2 and 4 ranks) are not.
  bool ranks_of_one_run = true;
};

struct MergeReport {
  std::string method;  // the alignment used: "recorded", "same-host", ...
  std::map<std::int32_t, std::int64_t> offsets_ns;  // added to each rank's times
  std::map<std::int32_t, std::string> rank_method;  // per rank, when methods differ
  std::int64_t events = 0;          // events the store kept
  std::vector<std::string> losses;  // what its writer could not keep (trace info's warnings)
  std::int32_t ranks = 0;
  // An alignment on collectives whose matches disagree (their spread past
  // kAlignmentSpreadNs): the collectives paired may not be the same ones.
  // Under automatic alignment such a rank is left as recorded, and said so.
  std::vector<std::string> warnings;
};

// Collectives end within microseconds of each other on every rank; matches
// that spread further than this did not pair the same collective.
inline constexpr std::int64_t kAlignmentSpreadNs = 100'000;

// Writes `output` (replacing it) from `inputs`. Each input may hold one rank
// or several; a rank found in two inputs is an error that names both. The
// output records the method and offsets in its meta table ("clock_alignment",
// "clock_offsets_json") and its ranks carry offset 0: times are on one clock.
Result<MergeReport> merge_stores(const std::vector<std::string>& inputs, const std::string& output,
                                 const MergeOptions& options = {});

}  // namespace cs::trace
