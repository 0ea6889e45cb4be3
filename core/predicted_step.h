#pragma once
// A run store's meta "predicted_step" (docs/trace-schema.md): the planner's
// estimate of one training step, kept with the run so that its analyses can
// hold the measurement against the plan. The one form its writers (the
// planner, the calibration's prediction of a run) and its readers (the trace
// analyses, the calibration, the app) share; its JSON keys are those every
// earlier version wrote, so their stores still read.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/machine_probe.h"
#include "core/result.h"

namespace cs::trace {

inline constexpr const char* kPredictedStepMetaKey = "predicted_step";

// Which stage of a pipeline the prediction timed: the one whose period set
// the pace. Stage s holds ranks [s x ranks_per_stage, (s + 1) x
// ranks_per_stage) in Megatron's order (core/rank_order.h); a middle stage
// is any of 1 .. stages - 2, which cost the same.
struct PipelinePace {
  enum class Stage { first, middle, last };
  int stages = 2;
  int ranks_per_stage = 1;
  Stage pacing = Stage::first;
  // Whether `rank` is of the pacing stage.
  bool holds(int rank) const;
};

// The parts of what a process allocates that a prediction holds apart and
// the engines sample apart, as the counters "memory in use: <label>
// (bytes)": (JSON key, label).
struct MemoryPartName {
  const char* key;
  const char* label;
};
inline constexpr MemoryPartName kMemoryPartNames[] = {
    {"weights", "weights"},
    {"gradients", "gradients"},
    {"optimizer_state", "optimizer state"},
    {"activations", "activations"},
    // Backward's gradient buffers, scratch, pipeline buffers: the rest.
    {"workspace", "workspace and buffers"},
};
// "memory in use: weights (bytes)".
std::string memory_part_counter(std::string_view label);
// One of those: a part of "memory in use (bytes)", which the app's timeline
// and counters chart leave to the prediction's table.
inline bool is_memory_part_counter(std::string_view name) {
  return name.starts_with("memory in use: ") && name.ends_with(" (bytes)");
}

// The planner's memory per device, of its most loaded stage (bytes).
struct PredictedMemory {
  // What the training process allocates itself: model state, activations,
  // workspaces and communication buffers (the engines' own allocations).
  double allocated_bytes = 0;
  // That, the CUDA context, the libraries' workspaces and the caching
  // allocator's slack: the device memory the process takes.
  double device_bytes = 0;
  // allocated_bytes by part (kMemoryPartNames' keys); empty in stores
  // written before the parts were recorded.
  std::map<std::string, double> parts;
  // With a pipeline, what each end stage allocates ("first": stage 0, the
  // embedding's; "last": the LM head's), allocated_bytes being the larger;
  // empty without a pipeline and in stores written before.
  std::map<std::string, double> stages;
};

struct PredictedStep {
  double step_seconds = 0;
  // Absent from stores written before it was recorded. An unreadable one
  // does not make the prediction unreadable: memory is then empty and
  // memory_error says why.
  std::optional<PredictedMemory> memory;
  std::string memory_error;
  // The pipeline's pacing stage, whose parts `breakdown` gives; absent
  // without a pipeline (and in stores written before it was recorded).
  std::optional<PipelinePace> pipeline;
  // Seconds per step by name, each group optional in the JSON:
  // - categories: as the step breakdown measures them (compute,
  //   communication, memory, synchronization, other);
  // - parts: measured by the annotation ranges named exactly like them;
  // - breakdown: as measure_step_parts names them (compute.<kind>,
  //   optimizer, communication.tp / .dp / .pp, wait, bubble, idle).
  std::map<std::string, double> categories;
  std::map<std::string, double> parts;
  std::map<std::string, double> breakdown;

  // What the calibration's prediction of a run adds (calib::predict_run);
  // absent from a bare planner prediction and from hand-written stores.
  std::optional<std::string> cluster;  // the cluster preset predicted on
  std::optional<bool> calibrated;
  std::optional<std::string> workload;  // its display name
  std::optional<std::vector<std::string>> notes;
  // The plan document predicted (the engines' shape on the calibrated
  // cluster), as JSON text of an object; empty when there is none. Text,
  // not a Plan: reading a plan needs the presets, and the app only draws it.
  std::string plan_json;
  // The machine probe as the predicted cluster says it takes. An unreadable
  // one does not make the prediction unreadable (the comparison stands
  // without it): machine_probe is then empty and machine_probe_error says why.
  std::optional<MachineProbe> machine_probe;
  std::string machine_probe_error;
};

// The JSON the store keeps: only the keys that are set (groups that are
// empty and optional fields unset are left out).
nlohmann::json to_json(const PredictedStep& step);

// Reads and checks the JSON of meta "predicted_step". An error names
// `where` ("run.db: meta predicted_step") and the JSON pointer of the bad
// field ("/breakdown/compute.gemm: must be a number of seconds"). Keys it
// does not know are passed over: a newer writer may add some.
Result<PredictedStep> read_predicted_step(std::string_view text, std::string_view where);

}  // namespace cs::trace
