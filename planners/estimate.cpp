#include "planners/estimate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/format.h"
#include "core/model_json.h"
#include "core/shown_name.h"
#include "planners/cost_model.h"

namespace cs::plan {

namespace {

using detail::Knobs;
using detail::Machine;
using detail::Model;

detail::Names names_of(const Plan& plan) {
  detail::Names names;
  if (plan.cluster.gpu) {
    names.gpu = shown_name(*plan.cluster.gpu);
    for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16}) {
      if (calibrated_without(*plan.cluster.gpu, p)) names.calibrated_without.push_back(p);
    }
  }
  names.model = shown_name(plan.workload);
  return names;
}

std::string join(const std::vector<Problem>& problems) {
  std::string text;
  for (const Problem& p : problems) {
    if (!text.empty()) text += '\n';
    text += (p.pointer.empty() ? std::string("/") : p.pointer) + ": " + p.message;
  }
  return text;
}

std::vector<std::string> notes_of(const Plan& plan, const Estimate& e) {
  std::vector<std::string> notes;
  const Cluster& c = plan.cluster;
  const ParallelPlan& p = plan.parallel;
  if (e.gpus < c.total_gpus()) {
    // The cost counts the GPUs the plan uses; where the whole cluster is
    // rented (its idle GPUs billed too), the run costs that much more.
    std::string whole;
    if (e.training.cost_usd > 0 && e.gpus > 0) {
      whole = ": the cost counts those; the whole cluster for the same time costs " +
              format_usd(e.training.cost_usd * c.total_gpus() / e.gpus);
    }
    notes.push_back("uses " + std::to_string(e.gpus) + " of the cluster's " +
                    std::to_string(c.total_gpus()) + " GPUs" + whole);
  }
  if (p.zero_stage > 0 && p.dp == 1) {
    notes.push_back("ZeRO shards over data-parallel ranks: with dp 1 it changes nothing");
  }
  if (p.recompute == Recompute::selective && p.flash_attention &&
      plan.workload.kind == WorkloadKind::transformer && !e.inference) {
    notes.push_back(
        "selective recomputation with fused attention saves no memory (the scores are never "
        "stored) but re-runs core attention in backward: recompute none is faster");
  }
  if (plan.precision.compute == Precision::fp16 &&
      plan.precision.loss_scaling == LossScaling::none && !plan.precision.inference) {
    notes.push_back("fp16 training without loss scaling loses small gradients to underflow");
  }
  if (plan.workload.kind == WorkloadKind::transformer && plan.workload.training_tokens <= 0) {
    notes.push_back("the workload gives no training tokens: no time or cost to train");
  }
  if (c.price_per_gpu_hour <= 0)
    notes.push_back("the cluster has no price per GPU-hour: cost is 0");
  if (e.inference)
    notes.push_back("forward-only plan: a step is one forward pass of the global batch");
  if (plan.workload.kind == WorkloadKind::generic && plan.workload.generic.weight_layers <= 0) {
    notes.push_back(
        "generic model with no layer count: kernel launches are not counted, so a small "
        "model's step is underestimated");
  }
  if (e.throughput.mfu > 1) {
    notes.push_back(
        "MFU above 100 %: model FLOPs count attention over the whole s x s square (Korthikanti's "
        "72 B s L h^2 (1 + s/6h + ...)), while the causal fused attention kernel computes half "
        "of it; at this sequence length attention dominates the step");
  }
  if (!e.fits) {
    notes.push_back("does not fit: needs " + format_bytes(e.memory.total()) + " per GPU, " +
                    format_bytes(e.memory_capacity) + " available");
  }
  return notes;
}

}  // namespace

std::vector<Problem> check_plan(const Plan& plan) {
  std::vector<Problem> problems;
  for (const Problem& p : check_parallel_plan(plan.parallel)) {
    problems.push_back({"/parallel" + p.pointer, p.message});
  }
  // The rules below assume sane degrees; the others (a global batch that is
  // not a multiple, ...) do not hide them.
  if (!check_parallel_degrees(plan.parallel).empty()) return problems;
  const Machine m = detail::machine_of(plan.cluster);
  const Model x = detail::model_of(plan.workload);
  const Knobs k = detail::knobs_of(plan.parallel, plan.precision);
  const detail::Names names = names_of(plan);
  detail::check_rules(m, x, k, &names, &problems);
  return problems;
}

Result<Estimate> estimate(const Plan& plan) {
  const std::vector<Problem> problems = check_plan(plan);
  if (!problems.empty()) return Error{join(problems)};
  const Machine m = detail::machine_of(plan.cluster);
  const Model x = detail::model_of(plan.workload);
  const Knobs k = detail::knobs_of(plan.parallel, plan.precision);
  const detail::LayerCosts costs = detail::layer_costs(m, x, k);
  Estimate e;
  detail::evaluate(m, x, k, costs, e);
  e.notes = notes_of(plan, e);
  return e;
}

namespace {

// A tp above the plan's that the model's shape and the node allow (the
// rules at /parallel/tp and /parallel/sequence_parallel, its data
// parallelism apart): GPT-2 XL's 25 heads take none on 8-GPU nodes, where
// "more tp" was advised.
bool larger_tp_exists(const Plan& plan) {
  for (int tp = plan.parallel.tp + 1; tp <= plan.cluster.gpus_per_node; ++tp) {
    if (plan.cluster.gpus_per_node % tp != 0) continue;
    Plan trial = plan;
    trial.parallel.tp = tp;
    trial.parallel.dp = 1;
    trial.parallel.global_batch = trial.parallel.micro_batch;
    const std::vector<Problem> problems = check_plan(trial);
    if (std::none_of(problems.begin(), problems.end(), [](const Problem& p) {
          return p.pointer == "/parallel/tp" || p.pointer == "/parallel/sequence_parallel";
        }))
      return true;
  }
  return false;
}

// A pp above the plan's that divides the layers (the rule at /parallel/pp)
// and that the cluster's GPUs hold (at tp 1 and dp 1, the fewest it takes):
// pp = layers took "more pp" too, and so did a one-GPU machine, where any
// pipeline needs GPUs it does not have ("more GPUs" says that).
bool larger_pp_exists(const Plan& plan) {
  const int layers = plan.workload.transformer.layers;
  const int gpus = plan.cluster.total_gpus();
  for (int pp = plan.parallel.pp + 1; pp <= std::min(layers, gpus); ++pp)
    if (layers % pp == 0) return true;
  return false;
}

}  // namespace

Problem memory_problem(const Plan& plan, const Estimate& e) {
  if (e.fits) return {};
  const MemoryBreakdown& mem = e.memory;
  std::vector<std::pair<double, std::string>> parts;
  for (const MemoryPart& part : kMemoryParts) {
    if (part.plan_shrinks) parts.emplace_back(mem.*part.bytes, part.label);
  }
  std::sort(parts.begin(), parts.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  const detail::Names names = names_of(plan);
  std::string message = "needs " + format_bytes(mem.total()) + " on GPU stage " +
                        std::to_string(e.most_loaded_stage) + ", the " +
                        (names.gpu.empty() ? std::string("GPU") : names.gpu) + " has " +
                        format_bytes(e.memory_capacity) + "; largest: " + parts[0].second + " " +
                        format_bytes(parts[0].first) + ", " + parts[1].second + " " +
                        format_bytes(parts[1].first);
  // Only what this plan can still change: ZeRO shards nothing at dp 1 (nor
  // past stage 1 with a pipeline), tp stops at a node's GPUs, and a generic
  // model has neither tp nor pp.
  // What shrinks each of the two parts named, the larger first: a plan
  // short by less than its activations was told only of ZeRO when its
  // optimizer state was larger (LLaMA-3 8B on one H200: 30 GiB short, 38 GiB
  // of activations, and no word of recomputation, which makes it fit).
  const ParallelPlan& k = plan.parallel;
  const bool transformer = plan.workload.kind == WorkloadKind::transformer;
  std::vector<std::string> tries;
  for (std::size_t i = 0; i < 2; ++i) {
    if (parts[i].second == "activations") {
      if (k.recompute != Recompute::full && !plan.precision.inference) tries.push_back("recompute");
      if (transformer && k.tp > 1 && !k.sequence_parallel) tries.push_back("sequence parallelism");
      if (k.micro_batch > 1) tries.push_back("a smaller micro-batch");
    } else if ((i == 0 || parts[i].second == "weights" || parts[i].second == "gradients" ||
                parts[i].second == "optimizer state") &&
               k.dp > 1 && k.zero_stage < (k.pp > 1 ? 1 : 3) && !plan.precision.inference &&
               std::find(tries.begin(), tries.end(), "a higher ZeRO stage") == tries.end()) {
      tries.push_back("a higher ZeRO stage");
    }
  }
  if (transformer && larger_tp_exists(plan)) tries.push_back("more tp");
  if (transformer && larger_pp_exists(plan)) tries.push_back("more pp");
  tries.push_back(transformer ? "more GPUs" : "more GPUs with ZeRO");
  message += " (try ";
  for (std::size_t i = 0; i < tries.size(); ++i)
    message += (i == 0 ? "" : i + 1 == tries.size() ? " or " : ", ") + tries[i];
  message += ")";
  return {"/parallel", message};
}

std::string_view to_string(Control c) {
  switch (c) {
    case Control::tp:
      return "tp";
    case Control::pp:
      return "pp";
    case Control::dp:
      return "dp";
    case Control::virtual_stages:
      return "virtual_stages";
    case Control::sequence_parallel:
      return "sequence_parallel";
    case Control::zero_stage:
      return "zero_stage";
    case Control::micro_batch:
      return "micro_batch";
    case Control::global_batch:
      return "global_batch";
    case Control::recompute:
      return "recompute";
    case Control::precision:
      return "precision";
    case Control::flash_attention:
      return "flash_attention";
    case Control::overlap_grad_reduce:
      return "overlap_grad_reduce";
  }
  return "";
}

std::string_view json_pointer(Control c) {
  switch (c) {
    case Control::tp:
      return "/parallel/tp";
    case Control::pp:
      return "/parallel/pp";
    case Control::dp:
      return "/parallel/dp";
    case Control::virtual_stages:
      return "/parallel/virtual_stages";
    case Control::sequence_parallel:
      return "/parallel/sequence_parallel";
    case Control::zero_stage:
      return "/parallel/zero_stage";
    case Control::micro_batch:
      return "/parallel/micro_batch";
    case Control::global_batch:
      return "/parallel/global_batch";
    case Control::recompute:
      return "/parallel/recompute";
    case Control::precision:
      return "/precision/compute";
    case Control::flash_attention:
      return "/parallel/flash_attention";
    case Control::overlap_grad_reduce:
      return "/parallel/overlap_grad_reduce";
  }
  return "";
}

namespace {

std::vector<int> divisors(int n) {
  // Up to the square root, each divisor with its pair: a count near 2^30
  // (a global batch) took a billion steps on the GUI thread.
  std::vector<int> out;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    out.push_back(static_cast<int>(d));
    if (d * d != n) out.push_back(static_cast<int>(n / d));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Powers of two up to `limit`, with the extra values merged in (sorted, unique).
std::vector<int> powers_of_two_and(int limit, std::vector<int> extra) {
  // In 64 bits: doubling past 2^30 wrapped an int to 0, looping for ever.
  for (std::int64_t v = 1; v <= limit; v *= 2)
    extra.push_back(static_cast<int>(v));
  std::sort(extra.begin(), extra.end());
  extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
  extra.erase(std::remove_if(extra.begin(), extra.end(), [&](int v) { return v < 1 || v > limit; }),
              extra.end());
  return extra;
}

// `pointer`: the control's own; its problem is the reason shown, when it has one.
// A value is invalid for a problem of its own: one at its control, or one
// the current plan (`standing`) does not have. A problem elsewhere that the
// plan already has made every value of every control invalid, each naming
// that other control's problem.
ControlOption try_option(const Plan& plan, int value, std::string label, std::string_view pointer,
                         const std::vector<Problem>& standing) {
  ControlOption o;
  o.value = value;
  o.label = std::move(label);
  const std::vector<Problem> problems = check_plan(plan);
  if (!problems.empty()) {
    auto stands = [&](const Problem& p) {
      return p.pointer != pointer &&
             std::any_of(standing.begin(), standing.end(), [&](const Problem& s) {
               return s.pointer == p.pointer && s.message == p.message;
             });
    };
    const Problem* own = nullptr;
    for (const Problem& p : problems) {
      if (p.pointer == pointer) {
        own = &p;
        break;
      }
      if (!own && !stands(p)) own = &p;
    }
    if (own) {
      o.reason = own->pointer + ": " + own->message;
      return o;
    }
    // Valid here; its memory is not known while the plan has that problem.
    o.valid = true;
    o.reason = "not estimated while " + problems.front().pointer + " has a problem";
    return o;
  }
  o.valid = true;
  auto e = estimate(plan);
  if (!e) {
    o.reason = e.message();
    return o;
  }
  o.fits = e->fits;
  if (!o.fits) {
    const Problem p = memory_problem(plan, *e);
    o.reason = p.pointer + ": " + p.message;
  }
  return o;
}

}  // namespace

void set_compute_precision(ParallelPlan& parallel, PrecisionPlan& precision, Precision compute) {
  const bool main_grad = precision.fp32_main_grad;
  precision = PrecisionPlan::for_compute(compute);
  precision.fp32_main_grad = main_grad && !precision.inference;
  if (precision.inference) {
    parallel.recompute = Recompute::none;
    parallel.zero_stage = 0;
  }
}

namespace {

// As Megatron-LM derives data parallelism from the world size: a new tp x pp
// keeps the GPUs the plan used, dp taking what is left, where that divides
// (16 x 2 x 1 to tp 4 is 8 x 4 x 1, not 16 x 4 x 1 on twice the GPUs), and
// the global batch stays a multiple of dp x micro_batch.
void keep_world_size(ParallelPlan& parallel, int tp, int pp) {
  const std::int64_t world = std::int64_t{parallel.dp} * parallel.tp * parallel.pp;
  const std::int64_t model = std::int64_t{tp} * pp;
  if (tp < 1 || pp < 1 || world % model != 0) return;
  const std::int64_t dp = world / model;
  const std::int64_t per_step = dp * parallel.micro_batch;
  if (dp < 1 || per_step < 1 || parallel.global_batch % per_step != 0) return;
  parallel.dp = static_cast<int>(dp);
}

}  // namespace

void set_control(ParallelPlan& parallel, PrecisionPlan& precision, Control control, int value) {
  switch (control) {
    case Control::tp:
      keep_world_size(parallel, value, parallel.pp);
      parallel.tp = value;
      if (value < 2) parallel.sequence_parallel = false;
      break;
    case Control::pp:
      keep_world_size(parallel, parallel.tp, value);
      parallel.pp = value;
      if (value < 2) {
        parallel.virtual_stages = 1;
        parallel.schedule = PipelineSchedule::one_f_one_b;
      }
      break;
    case Control::dp:
      parallel.dp = value;
      break;
    case Control::virtual_stages:
      parallel.virtual_stages = value;
      parallel.schedule = value > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
      break;
    case Control::sequence_parallel:
      parallel.sequence_parallel = value != 0;
      break;
    case Control::zero_stage:
      parallel.zero_stage = value;
      break;
    case Control::micro_batch:
      parallel.micro_batch = value;
      break;
    case Control::global_batch:
      parallel.global_batch = value;
      break;
    case Control::recompute:
      parallel.recompute = static_cast<Recompute>(value);
      break;
    case Control::precision:
      set_compute_precision(parallel, precision, static_cast<Precision>(value));
      break;
    case Control::flash_attention:
      parallel.flash_attention = value != 0;
      break;
    case Control::overlap_grad_reduce:
      parallel.overlap_grad_reduce = value != 0;
      break;
  }
}

std::vector<ControlOption> control_options(const Plan& plan, Control control) {
  std::vector<ControlOption> out;
  const int gpus = std::max(plan.cluster.total_gpus(), 1);
  const bool transformer = plan.workload.kind == WorkloadKind::transformer;
  const TransformerShape& s = plan.workload.transformer;
  const std::vector<Problem> standing = check_plan(plan);
  auto option = [&](int value, std::string label) {
    Plan trial = plan;
    set_control(trial.parallel, trial.precision, control, value);
    out.push_back(try_option(trial, value, std::move(label), json_pointer(control), standing));
  };
  auto integers = [&](const std::vector<int>& values) {
    for (int v : values)
      option(v, std::to_string(v));
  };
  switch (control) {
    case Control::tp:
      integers(powers_of_two_and(std::min(gpus, 1024),
                                 transformer ? divisors(s.heads) : std::vector<int>{}));
      break;
    case Control::pp:
      integers(powers_of_two_and(std::min(gpus, 1024),
                                 transformer ? divisors(s.layers) : std::vector<int>{}));
      break;
    case Control::dp:
      integers(divisors(gpus));
      break;
    case Control::virtual_stages: {
      std::vector<int> values = {1};
      if (transformer && plan.parallel.pp > 1) {
        for (int v = 2; v <= s.layers / plan.parallel.pp; ++v) {
          if ((s.layers / plan.parallel.pp) % v == 0) values.push_back(v);
        }
      }
      integers(values);
      break;
    }
    case Control::sequence_parallel:
    case Control::flash_attention:
    case Control::overlap_grad_reduce:
      for (int v : {0, 1})
        option(v, v ? "on" : "off");
      break;
    case Control::zero_stage:
      integers({0, 1, 2, 3});
      break;
    case Control::micro_batch:
      integers(powers_of_two_and(std::max(plan.parallel.global_batch, 1), {}));
      break;
    case Control::global_batch: {
      // Multiples of dp x micro-batch around the current value.
      // Multiples past an int are no global batch (the field holds an int).
      const long long unit =
          std::max(static_cast<long long>(plan.parallel.dp) * plan.parallel.micro_batch, 1LL);
      std::vector<int> values;
      for (long long f = 1; f <= 4096 && values.size() < 16 &&
                            unit * f <= std::numeric_limits<int>::max();
           f *= 2)
        values.push_back(static_cast<int>(unit * f));
      if (std::find(values.begin(), values.end(), plan.parallel.global_batch) == values.end()) {
        values.push_back(plan.parallel.global_batch);
        std::sort(values.begin(), values.end());
      }
      integers(values);
      break;
    }
    case Control::recompute:
      for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full})
        option(static_cast<int>(r), std::string(to_string(r)));
      break;
    case Control::precision:
      for (Precision p : kAllPrecisions)
        option(static_cast<int>(p), std::string(cs::to_string(p)));
      break;
  }
  return out;
}

}  // namespace cs::plan
