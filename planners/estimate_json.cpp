#include "planners/estimate_json.h"

#include <nlohmann/json.hpp>

#include "core/model_json.h"
#include "core/trace_types.h"

namespace cs::plan {

using nlohmann::json;

json to_json(const MemoryBreakdown& m) {
  json out = {{"per_gpu_bytes", m.total()},
              {"model_state_bytes", m.model_state()},
              {"embedding_model_state_bytes", m.embedding_model_state},
              {"embedding_activations_bytes", m.embedding_activations},
              {"nccl_channels_bytes", m.nccl_channels}};
  for (const MemoryPart& part : kMemoryParts)
    out[part.json_key] = m.*part.bytes;
  return out;
}

json to_json(const Estimate& e) {
  json memory = to_json(e.memory);
  memory["capacity_bytes"] = e.memory_capacity;
  memory["headroom_bytes"] = e.headroom_bytes;
  memory["fits"] = e.fits;
  memory["most_loaded_stage"] = e.most_loaded_stage;
  memory["first_stage"] = to_json(e.first_stage);
  memory["last_stage"] = to_json(e.last_stage);

  const TimeBreakdown& t = e.time;
  json time = {{"step_seconds", t.step()},
               {"bubble_fraction", e.bubble_fraction},
               {"pacing_stage", e.pacing_stage},
               {"compute_by_kind",
                {{"gemm_seconds", e.compute_by_kind.gemm},
                 {"attention_seconds", e.compute_by_kind.attention},
                 {"norm_seconds", e.compute_by_kind.norm},
                 {"activation_seconds", e.compute_by_kind.activation},
                 {"elementwise_seconds", e.compute_by_kind.elementwise},
                 {"loss_seconds", e.compute_by_kind.loss}}}};
  for (const TimePart& part : kTimeParts)
    time[part.json_key] = t.*part.seconds;
  const CommunicationDetail& c = e.communication;
  const json communication = {{"tp_seconds", c.tp_seconds},
                              {"pp_seconds", c.pp_seconds},
                              {"dp_seconds", c.dp_seconds},
                              {"dp_overlapped_seconds", c.dp_overlapped},
                              {"dp_bytes_per_gpu", c.dp_bytes_per_gpu},
                              {"dp_buckets", c.dp_buckets},
                              {"zero3_seconds", c.zero3_seconds}};
  const Throughput& th = e.throughput;
  const json throughput = {
      {"tokens_per_second", th.has_tokens ? json(th.tokens_per_second) : json()},
      {"samples_per_second", th.samples_per_second},
      {"model_flops_per_step", th.model_flops_per_step},
      {"hardware_flops_per_step", th.hardware_flops_per_step},
      {"model_tflops_per_gpu", th.model_tflops_per_gpu},
      {"hardware_tflops_per_gpu", th.hardware_tflops_per_gpu},
      {"mfu", th.mfu},
      {"hfu", th.hfu}};
  const TrainingCost& r = e.training;
  // No tokens (or samples) to train on: null, where zeros read "0 days, $0"
  // to a script. An inference plan has no 6PD (training's forward and
  // backward), nor a generic model (no token count to multiply).
  json training = nullptr;
  if (r.steps > 0) {
    training = {{"steps", r.steps},         {"seconds", r.seconds},   {"days", r.seconds / 86400},
                {"gpu_hours", r.gpu_hours}, {"cost_usd", r.cost_usd}, {"energy_kwh", r.energy_kwh},
                {"flops", r.flops},         {"flops_6pd", nullptr}};
    if (!e.inference && r.flops_6pd > 0) training["flops_6pd"] = r.flops_6pd;
  }
  const SeedCommunication& s = e.seed_communication;
  const json seed = {{"gradient_bytes", s.gradient_bytes},        {"ranks", s.ranks},
                     {"bandwidth_bytes_per_second", s.bandwidth}, {"latency_seconds", s.latency},
                     {"simple_seconds", s.simple_seconds},        {"ring_seconds", s.ring_seconds}};
  json out = {{"gpus", e.gpus},
              {"micro_batches", e.micro_batches},
              {"layers_per_stage", e.layers_per_stage},
              {"parameters", e.parameters},
              {"parameters_per_gpu", e.parameters_per_gpu},
              {"inference", e.inference},
              {"memory", memory},
              {"time", time},
              {"communication", communication},
              {"throughput", throughput},
              {"training", training},
              {"seed_communication", seed},
              {"notes", e.notes}};
  // An inference plan's run is the workload's tokens forward, not training:
  // the same figures under the name that says so ("training" stays, as
  // scripts read it).
  if (e.inference) out["serving"] = training;
  if (e.quantization.bits > 0) {
    const QuantizationSummary& q = e.quantization;
    out["quantization"] = {{"bits", q.bits},
                           {"levels", q.levels},
                           {"relative_max_error", q.relative_max_error},
                           {"relative_rms_error", q.relative_rms_error},
                           {"weight_bytes_saved", q.weight_bytes_saved}};
  }
  return out;
}

json to_json(const RankedPlan& r) {
  json parallel = cs::to_json(r.parallel);
  parallel.erase("kind");
  json precision = cs::to_json(r.precision);
  precision.erase("kind");
  return {{"nodes", r.nodes},
          {"score", r.score},
          {"parallel", parallel},
          {"precision", precision},
          {"estimate", to_json(r.estimate)}};
}

json to_json(const SearchResult& s) {
  json best = json::array();
  for (const RankedPlan& r : s.best)
    best.push_back(to_json(r));
  json memory = json::array();
  for (const RankedPlan& r : s.pareto_memory)
    memory.push_back(to_json(r));
  json gpus = json::array();
  for (const RankedPlan& r : s.pareto_gpus)
    gpus.push_back(to_json(r));
  return {{"best", best},         {"pareto_memory", memory},
          {"pareto_gpus", gpus},  {"candidates", s.candidates},
          {"valid", s.valid},     {"fitting", s.fitting},
          {"kept", s.kept},       {"seconds", s.seconds},
          {"threads", s.threads}, {"cancelled", s.cancelled},
          {"smallest_memory_bytes", s.smallest_memory_bytes},
          {"gpu_memory_bytes", s.gpu_memory_bytes}};
}

json to_json(const Timeline& t) {
  json spans = json::array();
  for (const TimelineSpan& s : t.spans) {
    spans.push_back({{"stage", s.stage},
                     {"lane", s.lane},
                     {"start_ns", s.start_ns},
                     {"end_ns", s.end_ns},
                     {"category", std::string(trace::to_string(s.category))},
                     {"kind", std::string(trace::to_string(s.kind))},
                     {"collective", std::string(trace::to_string(s.collective))},
                     {"name", s.name},
                     {"micro_batch", s.micro_batch},
                     {"chunk", s.chunk}});
  }
  return {{"stages", t.stages}, {"step_ns", t.step_ns}, {"spans", spans}};
}

trace::PredictedStep predicted_step(const Estimate& e) {
  const TimeBreakdown& t = e.time;
  const ComputeByKind& k = e.compute_by_kind;
  // As a trace measures them: a rank waits out the pipeline bubble inside a
  // receive (NCCL's kernel spins in it, MPI's call blocks), so the bubble is
  // exposed communication there, like the waiting inside collectives.
  const double communication = t.tp_communication + t.pp_communication + t.dp_communication +
                               t.zero_gather + t.collective_wait + t.pipeline_bubble;
  trace::PredictedStep p;
  p.step_seconds = t.step();
  // The framework's reserve (context, library workspaces), NCCL's channels
  // and the allocator's slack are the device's, not the process's tensors.
  const auto allocated = [](const MemoryBreakdown& b) {
    return b.total() - b.framework_reserve - b.fragmentation - b.nccl_channels;
  };
  const MemoryBreakdown& m = e.memory;
  p.memory = trace::PredictedMemory{allocated(m), m.total(), {}, {}};
  if (e.pipeline_stages > 1) {
    p.memory->stages = {{"first", allocated(e.first_stage)}, {"last", allocated(e.last_stage)}};
  }
  p.memory->parts = {
      {"weights", m.weights},
      {"gradients", m.gradients},
      {"optimizer_state", m.optimizer_state},
      {"activations", m.activations},
      {"workspace", m.activation_workspace + m.communication_buffers - m.nccl_channels}};
  // The forward work recomputed in backward, as the engines' "recompute"
  // ranges measure it (within compute, not a part of the step of its own).
  if (t.recompute > 0) p.parts = {{"recompute", t.recompute}};
  p.categories = {{"compute", t.forward + t.backward + t.recompute + t.optimizer + t.descheduled},
                  {"communication", communication},
                  {"other", 0.0}};
  p.breakdown = {{"compute.gemm", k.gemm},
                 {"compute.attention", k.attention},
                 {"compute.norm", k.norm},
                 {"compute.activation", k.activation},
                 {"compute.elementwise", k.elementwise},
                 {"compute.loss", k.loss},
                 {"optimizer", t.optimizer},
                 {"descheduled", t.descheduled},
                 {"communication.tp", t.tp_communication},
                 {"communication.dp", t.dp_communication + t.zero_gather},
                 {"communication.pp", t.pp_communication},
                 {"wait", t.collective_wait},
                 {"bubble", t.pipeline_bubble},
                 {"idle", 0.0}};
  if (e.pipeline_stages > 1) {
    const bool first = e.pacing_stage == 0, last = e.pacing_stage == e.pipeline_stages - 1;
    p.pipeline = trace::PipelinePace{e.pipeline_stages, e.ranks_per_stage,
                                     first  ? trace::PipelinePace::Stage::first
                                     : last ? trace::PipelinePace::Stage::last
                                            : trace::PipelinePace::Stage::middle};
  }
  return p;
}

}  // namespace cs::plan
