// clusterscope plan [--cluster C] [--model M] [--plan FILE] [--tp ... --precision ...] [--json]

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/output_folder.h"
#include "app/cli/text_table.h"
#include "core/format.h"
#include "core/json_text.h"
#include "core/model_json.h"
#include "core/shown_name.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"
#include "planners/estimate.h"
#include "planners/estimate_json.h"
#include "planners/seed_formulas.h"
#include "planners/timeline_store.h"

namespace cs::cli {

namespace {

// A predicted timeline replaces an earlier one, never a store of measurements
// (a run, a profile, an import, a calibration's sweeps): they were lost to a
// `plan --timeline` given the wrong name. A store too damaged to open is
// replaced, as a run replaces one.
void refuse_replacing_measurements(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  auto reader = trace::TraceReader::open(path, trace::TraceReader::Options{.repair = false});
  if (!reader) return;
  const std::string source = (*reader)->meta("source").value_or("");
  if (source == plan::kPredictedTimelineSource) return;
  throw CliError(path + ": holds measurements (a trace store of source " +
                 (source.empty() ? std::string("unknown") : source) +
                 "), not a predicted timeline; --timeline replaces only a timeline it wrote: " +
                 "remove it or give another name");
}

struct PlanCommandOptions {
  ClusterOptions cluster;
  ModelOptions model;
  PlanOptions plan;
  std::string timeline;  // a trace store for the predicted step
  bool json = false;
};

std::string percent(double part, double whole) {
  return whole > 0 ? format_fixed(100.0 * part / whole, 1) + " %" : "-";
}

std::string describe_plan(const Plan& plan) {
  const ParallelPlan& p = plan.parallel;
  std::string text = "dp " + std::to_string(p.dp) + " x tp " + std::to_string(p.tp) + " x pp " +
                     std::to_string(p.pp);
  if (p.schedule == PipelineSchedule::interleaved) {
    text += " (" + std::to_string(p.virtual_stages) + " chunks each, interleaved)";
  }
  text += ", sequence parallel " + std::string(p.sequence_parallel ? "on" : "off");
  text += ", ZeRO-" + std::to_string(p.zero_stage);
  text += ", micro-batch " + std::to_string(p.micro_batch) + ", global batch " +
          std::to_string(p.global_batch);
  text += ", recompute " + std::string(to_string(p.recompute));
  text += ", " + std::string(to_string(plan.precision.compute));
  if (plan.precision.fp32_main_grad) text += " (fp32 main gradient)";
  text += ", fused attention " + std::string(p.flash_attention ? "on" : "off");
  return text;
}

// What the planner's data-parallel time holds at a ZeRO stage: the seed
// article's line sets one all-reduce beside it.
std::string planned_dp_exchange(int zero_stage) {
  switch (zero_stage) {
    case 0:
      return "data-parallel all-reduce";
    case 1:
      return "reduce-scatter of the gradients and all-gather of the updated weights";
    case 2:
      return "reduce-scatter of every micro-batch's gradients and all-gather of the updated "
             "weights";
    default:
      return "reduce-scatter of every micro-batch's gradients and the weights' all-gathers, "
             "forward and backward";
  }
}

void print_text(const Plan& plan, const plan::Estimate& e) {
  const std::string model = shown_name(plan.workload);
  const std::string cluster = shown_name(plan.cluster);
  std::cout << model << " on " << cluster << "\n";
  std::cout << "Plan: " << describe_plan(plan) << "\n";
  std::cout << "      " << e.gpus << (e.gpus == 1 ? " GPU, " : " GPUs, ") << e.micro_batches
            << (e.micro_batches == 1 ? " micro-batch" : " micro-batches")
            << " per replica per step";
  if (e.layers_per_stage > 0) std::cout << ", " << e.layers_per_stage << " layers per stage";
  std::cout << ", " << format_count(e.parameters) << " parameters ("
            << format_count(e.parameters_per_gpu) << " on the most loaded GPU)\n\n";

  const plan::MemoryBreakdown& m = e.memory;
  std::cout << "Memory per GPU (stage " << e.most_loaded_stage
            << ", the most loaded): " << format_bytes(m.total()) << " of "
            << format_bytes(e.memory_capacity) << " - "
            << (e.fits ? "fits, " + format_bytes(e.headroom_bytes) + " free"
                       : "does NOT fit, " + format_bytes(-e.headroom_bytes) + " short")
            << "\n";
  TextTable mem({"part", "bytes", "share"});
  mem.right_align(1);
  mem.right_align(2);
  for (const plan::MemoryPart& part : plan::kMemoryParts) {
    const double bytes = m.*part.bytes;
    mem.add({part.label, format_bytes(bytes), percent(bytes, m.total())});
  }
  mem.print(std::cout);
  std::cout << "\n";

  const plan::TimeBreakdown& t = e.time;
  std::cout << "Step time: " << format_seconds(t.step())
            << (e.inference ? " (one forward pass)" : "") << "\n";
  TextTable time({"part", "time", "share"});
  time.right_align(1);
  time.right_align(2);
  for (const plan::TimePart& part : plan::kTimeParts) {
    const double seconds = t.*part.seconds;
    if (!part.listed_when_zero && !(seconds > 0)) continue;
    time.add({part.label, format_seconds(seconds), percent(seconds, t.step())});
  }
  time.print(std::cout);
  if (e.communication.dp_seconds > 0) {
    // ZeRO-3's figure holds the weights' gathers, which hide behind forward too.
    const bool zero3 = plan.parallel.zero_stage >= 3;
    std::cout << "  data-parallel " << (zero3 ? "gathers and reductions " : "reduction ")
              << format_seconds(e.communication.dp_seconds) << " in " << e.communication.dp_buckets
              << (e.communication.dp_buckets == 1 ? " bucket, " : " buckets, ")
              << format_seconds(e.communication.dp_overlapped) << " hidden behind "
              << (zero3 ? "forward and backward\n" : "backward\n");
  }
  std::cout << "\n";

  const plan::Throughput& th = e.throughput;
  // A generic model (a ResNet's images) has no tokens: its tokens_per_second
  // counts samples, which "123 ktokens/s, 123 ksamples/s" said twice.
  std::cout << "Throughput: ";
  if (plan.workload.kind == WorkloadKind::transformer)
    std::cout << format_rate(th.tokens_per_second, "tokens/s") << ", ";
  std::cout << format_rate(th.samples_per_second, "samples/s") << "\n";
  std::cout << "  model " << format_fixed(th.model_tflops_per_gpu, 1) << " TFLOP/s per GPU, MFU "
            << format_fixed(th.mfu * 100, 1) << " %; hardware "
            << format_fixed(th.hardware_tflops_per_gpu, 1) << " TFLOP/s per GPU, HFU "
            << format_fixed(th.hfu * 100, 1) << " %\n";
  // Which peak: an FP8 plan's MFU is of the FP8 peak, twice the 16-bit one.
  if (plan.cluster.gpu) {
    // INT4 weights compute at INT8's rate (PeakRates::of); integer peaks are OP/s.
    const Precision path =
        plan.precision.compute == Precision::int4 ? Precision::int8 : plan.precision.compute;
    const bool integer = path == Precision::int8;
    const double peak = plan.cluster.gpu->peak.of(path);
    std::cout << "  (both of the " << to_string(path) << " dense peak, "
              << format_fixed(peak / 1e12, 1) << (integer ? " TOP/s" : " TFLOP/s") << " per GPU";
    if (th.hfu < th.mfu) {
      std::cout << "; hardware FLOPs below model FLOPs: fused causal attention computes half "
                   "the attention square that model FLOPs count";
    }
    std::cout << ")\n";
  }
  std::cout << "\n";

  const plan::TrainingCost& r = e.training;
  if (r.steps > 0) {
    std::cout << (e.inference ? "The workload's tokens, one forward pass each: " : "Training run: ")
              << format_count(r.steps)
              << (e.inference ? (r.steps == 1 ? " pass, " : " passes, ")
                              : (r.steps == 1 ? " step, " : " steps, "))
              << format_seconds(r.seconds) << ", " << format_amount(r.gpu_hours) << " GPU-hours";
    if (r.cost_usd > 0) std::cout << ", " << format_usd(r.cost_usd);
    // No power known (a calibrated CPU's): no energy, as no price (it read "0 kWh").
    if (r.energy_kwh > 0) std::cout << ", " << format_energy_kwh(r.energy_kwh);
    std::cout << '\n';
    std::cout << "  compute " << format_rate(r.flops, "FLOP");
    if (r.flops_6pd > 0) std::cout << " (6PD: " << format_rate(r.flops_6pd, "FLOP") << ")";
    std::cout << "\n\n";
  }
  const plan::SeedCommunication& s = e.seed_communication;
  if (s.ranks > 1) {
    // S in decimal bytes, as B is: the line's sum can be redone from it.
    std::cout << "Gradient sync, the seed article's model T = S*N/B + L*(N-1) beside the ring, "
                 "both flat over the slowest link:\n"
              << "  S = " << format_rate(s.gradient_bytes, "B") << " ("
              << format_bytes(s.gradient_bytes) << "), N = " << s.ranks
              << ", B = " << format_rate(s.bandwidth, "B/s")
              << ", L = " << format_seconds(s.latency) << ": simple "
              << format_seconds(s.simple_seconds) << ", ring all-reduce (2(N-1)/N*S/B + 2(N-1)L) "
              << format_seconds(s.ring_seconds) << "; the planner's "
              << planned_dp_exchange(plan.parallel.zero_stage) << " (by link tier, bucketed) "
              << format_seconds(e.communication.dp_seconds) << "\n\n";
  }
  if (e.quantization.bits > 0) {
    const plan::QuantizationSummary& q = e.quantization;
    std::cout << "Quantisation: INT" << q.bits << " weights, " << q.levels << " levels"
              << (plan.precision.quant.symmetric ? " (symmetric)" : "") << ": worst error "
              << format_fixed(q.relative_max_error * 100, 3) << " % of the range quantised, RMS "
              << format_fixed(q.relative_rms_error * 100, 3) << " %; saves "
              << format_bytes(q.weight_bytes_saved)
              << (plan.parallel.pp > 1 ? " of weights on the most loaded GPU"
                                       : " of weights per GPU")
              << " against bf16\n";
    // The seed article's worked example, with this plan's integer width.
    // Symmetric quantises [-0.8, 0.8] for it: a wider range, a coarser step.
    const bool symmetric = plan.precision.quant.symmetric;
    const double lo = -0.5, hi = 0.8;
    const plan::QuantParams qp = symmetric
                                     ? plan::symmetric_quant_params(lo, hi, q.bits)
                                     : plan::quant_params(lo, hi, q.bits, /*signed_range=*/true);
    const plan::Quantized x = plan::quantize(0.3, qp);
    std::cout << "  e.g. a tensor in [" << format_fixed(lo, 1) << ", " << format_fixed(hi, 1) << "]"
              << (symmetric
                      ? " (as [" + format_fixed(qp.min, 1) + ", " + format_fixed(qp.max, 1) + "])"
                      : std::string())
              << ": scale " << format_significant(qp.scale) << ", zero point " << qp.zero_point
              << "; 0.3 -> " << x.q << " -> " << format_significant(x.dequantized) << " (error "
              << format_significant(x.error) << ")\n\n";
  }
  for (const std::string& note : e.notes)
    std::cout << "Note: " << note << "\n";
}

void run(const PlanCommandOptions& o, Context& ctx) {
  const Plan plan = o.plan.resolve(ctx.catalog(), o.cluster, o.model);
  const std::vector<Problem> problems = plan::check_plan(plan);
  if (!problems.empty()) {
    if (o.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const Problem& p : problems)
        list.push_back({{"pointer", p.pointer}, {"message", p.message}});
      std::cout << json_text(
                       nlohmann::json{
                           {"plan", cs::to_json(plan)}, {"valid", false}, {"problems", list}},
                       2)
                << '\n';
    }
    // The file named, as validate names it: the rules alone did not say
    // which document broke them. With flags over it, the rule broken may be
    // theirs (--gpus-per-node 0 read "plan.json: /cluster/gpus_per_node: the
    // cluster has no GPU" of a file that gave it 8).
    const std::string file = o.plan.plan_file.empty() ? "" : document_name(o.plan.plan_file);
    const bool flags_over =
        !file.empty() && (o.plan.changes() || o.cluster.changes() || o.model.changes());
    const std::string where = flags_over ? file + " with the flags over it" : file;
    std::string text = "the plan" + (file.empty() ? "" : " of " + where) + " cannot run (" +
                       std::to_string(problems.size()) +
                       (problems.size() == 1 ? " problem):" : " problems):");
    for (const Problem& p : problems)
      text += "\n  " + (file.empty() ? "" : where + ": ") + p.pointer + ": " + p.message;
    throw CliError(text);
  }
  const plan::Estimate e = take(plan::estimate(plan));
  // The predicted step as a trace store, as the app draws it: its timeline,
  // stats and exports are those of a measured run. A timeline that cannot
  // be drawn (too many passes) leaves the estimate to print; the path is
  // checked first, before anything is worked out.
  std::optional<plan::PredictedStore> timeline;
  Status timeline_written;
  if (!o.timeline.empty()) {
    take(trace::check_store_path(o.timeline));
    refuse_replacing_measurements(o.timeline);
    const OutputFolder timeline_folder(o.timeline);
    timeline_written =
        trace::build_store_then_replace(o.timeline, [&](const std::string& temporary) -> Status {
          auto written = plan::write_predicted_timeline(plan, temporary);
          if (!written) return written.error();
          timeline = *written;
          return {};
        });
    if (timeline) timeline->path = o.timeline;
  }
  if (o.json) {
    nlohmann::json out = plan::to_json(e);
    if (timeline) {
      out["timeline"] = {{"store", timeline->path},
                         {"stages", timeline->stages},
                         {"spans", timeline->spans},
                         {"step_seconds", static_cast<double>(timeline->step_ns) * 1e-9}};
    } else if (!timeline_written) {
      out["timeline"] = {{"store", o.timeline}, {"error", timeline_written.message()}};
    }
    out["plan"] = cs::to_json(plan);
    out["valid"] = true;
    out["problems"] = nlohmann::json::array();
    if (!e.fits) {
      const Problem p = plan::memory_problem(plan, e);
      out["problems"].push_back({{"pointer", p.pointer}, {"message", p.message}});
    }
    std::cout << json_text(out, 2) << '\n';
  } else {
    print_text(plan, e);
    if (timeline) {
      std::cout << "Predicted timeline: " << timeline->path << " (" << timeline->stages
                << (timeline->stages == 1 ? " stage, " : " stages, ")
                << format_count(static_cast<double>(timeline->spans)) << " spans, a step of "
                << format_seconds(static_cast<double>(timeline->step_ns) * 1e-9)
                << "): open it in the app, or `clusterscope trace export` it\n";
    }
  }
  // The estimate is printed, and a script learns that the plan cannot run
  // as it is (it exited 0): exit status kPlanDoesNotFit.
  if (!e.fits) {
    std::cerr << "clusterscope: the plan does not fit: " << plan::memory_problem(plan, e).message
              << '\n';
  }
  if (!timeline_written) {
    throw CliError("the predicted timeline was not written: " + timeline_written.message() +
                   " (the estimate above stands)");
  }
  if (!e.fits) throw CliExitCode{kPlanDoesNotFit};
}

}  // namespace

void register_plan(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<PlanCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Estimate one plan: memory per GPU, step time by part, throughput, MFU, and the time, "
      "cost and energy to train");
  o->cluster.add_to(*cmd, /*positional=*/false);
  o->model.add_to(*cmd);
  o->plan.add_to(*cmd);
  cmd->add_option("--timeline", o->timeline,
                  "Also write the predicted step's timeline, per pipeline stage, to this trace "
                  "store (.db), as the app draws it");
  add_json_flag(*cmd, o->json);
  cmd->callback([o, &ctx] { run(*o, ctx); });
}

}  // namespace cs::cli
