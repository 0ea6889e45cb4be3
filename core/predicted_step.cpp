#include "core/predicted_step.h"

#include <nlohmann/json.hpp>

#include "core/json_object.h"
#include "core/json_reader.h"
#include "core/json_text.h"

namespace cs::trace {

using nlohmann::json;

namespace {

struct Group {
  const char* key;
  std::map<std::string, double> PredictedStep::*member;
};
constexpr Group kGroups[] = {{"categories", &PredictedStep::categories},
                             {"parts", &PredictedStep::parts},
                             {"breakdown", &PredictedStep::breakdown}};

constexpr std::pair<PipelinePace::Stage, const char*> kStageNames[] = {
    {PipelinePace::Stage::first, "first"},
    {PipelinePace::Stage::middle, "middle"},
    {PipelinePace::Stage::last, "last"}};

// "memory": {"allocated_bytes": ..., "device_bytes": ..., "parts": {...}}.
Result<PredictedMemory> read_memory(const json& memory, const std::string& at) {
  if (!memory.is_object()) return Error{at + ": /memory: must be an object"};
  PredictedMemory m;
  // Up to an exabyte: no device holds more.
  for (auto [key, field] : {std::pair{"allocated_bytes", &m.allocated_bytes},
                            std::pair{"device_bytes", &m.device_bytes}}) {
    if (!memory.contains(key) || !memory[key].is_number() || !(memory[key].get<double>() >= 0) ||
        memory[key].get<double>() > 1e18)
      return Error{at + ": /memory/" + key + ": must be a number of bytes from 0 to 1e18"};
    *field = memory[key].get<double>();
  }
  if (m.allocated_bytes > m.device_bytes)
    return Error{at + ": /memory: allocated_bytes (" + number_text(m.allocated_bytes) +
                 ") is more than device_bytes (" + number_text(m.device_bytes) + ")"};
  if (memory.contains("parts")) {
    const json& parts = memory["parts"];
    if (!parts.is_object()) return Error{at + ": /memory/parts: must be an object"};
    for (const auto& [key, value] : parts.items()) {
      if (!value.is_number() || !(value.get<double>() >= 0) || value.get<double>() > 1e18)
        return Error{at + ": " + json_pointer_append("/memory/parts", key) +
                     ": must be a number of bytes from 0 to 1e18"};
      m.parts[key] = value.get<double>();
    }
  }
  if (memory.contains("stages")) {
    const json& stages = memory["stages"];
    if (!stages.is_object()) return Error{at + ": /memory/stages: must be an object"};
    for (const auto& [key, value] : stages.items()) {
      const std::string where = json_pointer_append("/memory/stages", key);
      if (key != "first" && key != "last")
        return Error{at + ": " + where + ": unknown stage (\"first\" or \"last\")"};
      if (!value.is_number() || !(value.get<double>() >= 0) || value.get<double>() > 1e18)
        return Error{at + ": " + where + ": must be a number of bytes from 0 to 1e18"};
      m.stages[key] = value.get<double>();
    }
  }
  return m;
}

}  // namespace

std::string memory_part_counter(std::string_view label) {
  return "memory in use: " + std::string(label) + " (bytes)";
}

bool PipelinePace::holds(int rank) const {
  if (rank < 0 || ranks_per_stage < 1) return false;
  const int stage = rank / ranks_per_stage;
  switch (pacing) {
    case Stage::first:
      return stage == 0;
    case Stage::last:
      return stage == stages - 1;
    case Stage::middle:
      return stage > 0 && stage < stages - 1;
  }
  return false;
}

json to_json(const PredictedStep& p) {
  json j = {{"step_seconds", p.step_seconds}};
  if (p.pipeline) {
    const char* pacing = "first";
    for (const auto& [stage, name] : kStageNames) {
      if (stage == p.pipeline->pacing) pacing = name;
    }
    j["pipeline"] = {{"stages", p.pipeline->stages},
                     {"ranks_per_stage", p.pipeline->ranks_per_stage},
                     {"pacing", pacing}};
  }
  for (const Group& g : kGroups) {
    if (!(p.*g.member).empty()) j[g.key] = p.*g.member;
  }
  if (p.memory) {
    j["memory"] = {{"allocated_bytes", p.memory->allocated_bytes},
                   {"device_bytes", p.memory->device_bytes}};
    if (!p.memory->parts.empty()) j["memory"]["parts"] = p.memory->parts;
    if (!p.memory->stages.empty()) j["memory"]["stages"] = p.memory->stages;
  }
  if (p.cluster) j["cluster"] = *p.cluster;
  if (p.calibrated) j["calibrated"] = *p.calibrated;
  if (p.workload) j["workload"] = *p.workload;
  if (p.notes) j["notes"] = *p.notes;
  if (!p.plan_json.empty()) {
    // plan_json is an object's text by contract; anything else is left out
    // rather than written as a store that does not read.
    json plan = parse_json_text(p.plan_json);
    if (plan.is_object()) j["plan"] = std::move(plan);
  }
  if (p.machine_probe)
    j[std::string(kMachineProbeMetaKey)] = json::parse(machine_probe_json(*p.machine_probe));
  return j;
}

Result<PredictedStep> read_predicted_step(std::string_view text, std::string_view where) {
  const std::string at(where);
  auto parsed = parse_json_object(text, at);
  if (!parsed) return parsed.error();
  json j = std::move(parsed).value();
  PredictedStep p;
  // Times a planner can give: an edited or imported store's -0.3 s step or
  // 1e308 s part printed as a prediction ("-300 ms", "1157... days").
  constexpr double kMostSeconds = 1e9;
  if (!j.contains("step_seconds") || !j["step_seconds"].is_number())
    return Error{at + ": /step_seconds: must be a number"};
  p.step_seconds = j["step_seconds"].get<double>();
  if (!(p.step_seconds > 0 && p.step_seconds <= kMostSeconds)) {
    return Error{at + ": /step_seconds: must be > 0 and at most 1e9 seconds (got " +
                 number_text(p.step_seconds) + ")"};
  }
  for (const Group& g : kGroups) {
    if (!j.contains(g.key)) continue;
    const std::string pointer = json_pointer_append("", g.key);
    if (!j[g.key].is_object()) return Error{at + ": " + pointer + ": must be an object"};
    for (const auto& [key, value] : j[g.key].items()) {
      if (!value.is_number())
        return Error{at + ": " + json_pointer_append(pointer, key) +
                     ": must be a number of seconds"};
      const double seconds = value.get<double>();
      if (!(seconds >= 0 && seconds <= kMostSeconds)) {
        return Error{at + ": " + json_pointer_append(pointer, key) +
                     ": must be from 0 to 1e9 seconds (got " + number_text(seconds) + ")"};
      }
      (p.*g.member)[key] = seconds;
    }
  }
  if (j.contains("memory")) {
    auto memory = read_memory(j["memory"], at);
    if (memory)
      p.memory = memory.value();
    else
      p.memory_error = memory.message();
  }
  if (j.contains("pipeline")) {
    const json& pipe = j["pipeline"];
    if (!pipe.is_object()) return Error{at + ": /pipeline: must be an object"};
    PipelinePace pace;
    auto count = [&](const char* key, int least, int& out) -> Status {
      if (!pipe.contains(key) || !pipe[key].is_number_integer() ||
          pipe[key].get<double>() < least || pipe[key].get<double>() > (1 << 20))
        return Error{at + ": /pipeline/" + key + ": must be a whole number from " +
                     std::to_string(least) + " to 1048576"};
      out = pipe[key].get<int>();
      return {};
    };
    if (Status s = count("stages", 2, pace.stages); !s) return s.error();
    if (Status s = count("ranks_per_stage", 1, pace.ranks_per_stage); !s) return s.error();
    bool known = false;
    if (pipe.contains("pacing") && pipe["pacing"].is_string()) {
      for (const auto& [stage, name] : kStageNames) {
        if (pipe["pacing"].get<std::string>() == name) {
          pace.pacing = stage;
          known = true;
        }
      }
    }
    if (!known) return Error{at + ": /pipeline/pacing: must be \"first\", \"middle\" or \"last\""};
    p.pipeline = pace;
  }
  // The calibration's fields: each optional, each of one type.
  auto text_field = [&](const char* key, std::optional<std::string>& out) -> Status {
    if (!j.contains(key)) return {};
    if (!j[key].is_string()) return Error{at + ": /" + key + ": must be text"};
    out = j[key].get<std::string>();
    return {};
  };
  if (Status s = text_field("cluster", p.cluster); !s) return s.error();
  if (Status s = text_field("workload", p.workload); !s) return s.error();
  if (j.contains("calibrated")) {
    if (!j["calibrated"].is_boolean()) return Error{at + ": /calibrated: must be true or false"};
    p.calibrated = j["calibrated"].get<bool>();
  }
  if (j.contains("notes")) {
    const json& notes = j["notes"];
    if (!notes.is_array()) return Error{at + ": /notes: must be a list of text"};
    p.notes.emplace();
    for (std::size_t i = 0; i < notes.size(); ++i) {
      if (!notes[i].is_string())
        return Error{at + ": /notes/" + std::to_string(i) + ": must be text"};
      p.notes->push_back(notes[i].get<std::string>());
    }
  }
  if (j.contains("plan")) {
    if (!j["plan"].is_object()) return Error{at + ": /plan: must be an object"};
    p.plan_json = json_text(j["plan"]);
  }
  const std::string probe_key(kMachineProbeMetaKey);
  if (j.contains(probe_key)) {
    auto probe = machine_probe_from_json(json_text(j[probe_key]), at + ": /" + probe_key);
    if (probe)
      p.machine_probe = std::move(probe).value();
    else
      p.machine_probe_error = probe.message();
  }
  return p;
}

}  // namespace cs::trace
