#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/trace_merge.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"
#include "profiler/launcher.h"

namespace cs::launch {

Status merge_run_stores(const RunSpec& spec, Outcome outcome, std::string& note) {
  note.clear();
  std::vector<std::string> inputs;
  std::vector<std::string> problems;
  nlohmann::json missing = nlohmann::json::array();
  for (int rank = 0; rank < spec.ranks; ++rank) {
    const std::string path = rank_store_path(spec.run_store, rank);
    // A store cut short by a crash still opens (the reader completes it as
    // "interrupted"); a rank that never wrote one is named.
    if (auto state = trace::inspect_store(path); !state) {
      problems.push_back("rank " + std::to_string(rank) + ": " + state.message());
      missing.push_back(rank);
      continue;
    }
    inputs.push_back(path);
  }
  auto joined = [&] {
    std::string text;
    for (const std::string& p : problems)
      text += (text.empty() ? "" : "; ") + p;
    return text;
  };
  if (inputs.empty()) {
    return Error{"no run store was written: no rank store to merge into " + spec.run_store + " (" +
                 joined() + ")"};
  }

  trace::MergeOptions options;
  options.run.title = spec.title;
  options.run.plan_json = spec.plan_json;
  options.run.command_line = spec.command_line;
  options.status = std::string(to_string(outcome));
  options.meta = {{"world_size", std::to_string(spec.ranks)},
                  {"run_outcome", std::string(to_string(outcome))},
                  {"worker_command", command_text(worker_command(spec))},
                  {"ranks_without_store_json", json_text(missing)}};
  options.meta.insert(options.meta.end(), spec.extra_meta.begin(), spec.extra_meta.end());
  // The ranks have exited (or merge-only after the job's srun): a rank store
  // left "writing" on another node is repaired.
  options.writers_ended = true;
  auto merged = trace::merge_stores(inputs, spec.run_store, options);
  if (!merged) return merged.error();
  if (!problems.empty()) {
    note = "the run store lacks " + std::to_string(problems.size()) + " of " +
           std::to_string(spec.ranks) + " ranks: " + joined();
  }
  return {};
}

Status check_rank_stores_world(const RunSpec& spec) {
  for (int rank = 0; rank < spec.ranks; ++rank) {
    const std::string path = rank_store_path(spec.run_store, rank);
    if (!trace::inspect_store(path)) continue;  // missing: merge_run_stores names it
    // Read as it is: the merge, not this check, completes a crashed store.
    trace::TraceReader::Options as_it_is;
    as_it_is.repair = false;
    auto reader = trace::TraceReader::open(path, as_it_is);
    if (!reader) continue;
    const auto text = (*reader)->meta("parallel");
    if (!text) continue;  // an older worker's store: nothing to hold it to
    const nlohmann::json parallel = nlohmann::json::parse(*text, nullptr, false);
    if (!parallel.is_object()) continue;
    long long world = 1;
    std::string layout;
    bool readable = true;
    for (const char* key : {"dp", "tp", "pp"}) {
      const long long n = parallel.contains(key) && parallel[key].is_number_integer()
                              ? parallel[key].get<long long>()
                              : 0;
      readable = readable && n >= 1 && n <= 1'000'000;
      if (!readable) break;
      world *= n;
      layout += (layout.empty() ? "" : " x ") + std::string(key) + " " + std::to_string(n);
    }
    if (!readable) continue;  // the next store may say
    if (world == spec.ranks) return {};
    return Error{path + " is a rank store of a run of " + std::to_string(world) + " ranks (" +
                 layout + "), but the plan given has " + std::to_string(spec.ranks) +
                 (spec.ranks == 1 ? " rank" : " ranks") + ": give the run's own plan (its flags, " +
                 "or --plan " + run_store_stem(spec.run_store) + ".plan.json); nothing was merged"};
  }
  return {};
}

Outcome outcome_from_rank_stores(const RunSpec& spec, std::vector<std::string>* unreadable) {
  bool cancelled = false;
  bool failed = false;
  bool crashed = false;
  for (int rank = 0; rank < spec.ranks; ++rank) {
    const std::string path = rank_store_path(spec.run_store, rank);
    auto state = trace::inspect_store(path);
    if (!state) {
      // A store that is there but does not read (a truncated copy) says
      // nothing of how its rank ended: called a crash, a run whose ranks all
      // completed was "crashed". A missing one is a rank that never wrote.
      std::error_code ec;
      if (std::filesystem::exists(path, ec)) {
        if (unreadable)
          unreadable->push_back("rank " + std::to_string(rank) + ": " + state.message());
      } else {
        crashed = true;
      }
      continue;
    }
    const std::string& status = state->status;
    if (status == "cancelled") {
      cancelled = true;
    } else if (status == "failed") {
      failed = true;
    } else if (status != "complete") {
      crashed = true;  // "writing" (its writer died) or "interrupted"
    }
  }
  if (failed) return Outcome::failed;
  if (crashed) return Outcome::crashed;
  if (cancelled) return Outcome::cancelled;
  return Outcome::completed;
}

}  // namespace cs::launch
