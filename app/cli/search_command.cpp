// clusterscope search [--cluster C] [--model M] --global-batch N[,N...] [--objective O] [--top K]
// [--json]

#include <algorithm>
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/text_table.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/shown_name.h"
#include "core/workload.h"
#include "planners/estimate_json.h"
#include "planners/search.h"

namespace cs::cli {

namespace {

struct SearchCommandOptions {
  ClusterOptions cluster;
  ModelOptions model;
  std::vector<int> global_batches;
  std::string objective = "throughput";
  int top = 10;
  int threads = 0;
  std::vector<int> node_counts;
  std::vector<std::string> precisions;
  double max_days = 0;
  double min_headroom_gib = 0;
  int max_micro_batch = 64;
  bool any_gpu_count = false;
  bool fp32_main_grad = false;
  bool json = false;
};

std::string plan_cells(const plan::RankedPlan& r) {
  const ParallelPlan& p = r.parallel;
  std::string text = std::to_string(p.dp) + "/" + std::to_string(p.tp) + "/" + std::to_string(p.pp);
  if (p.virtual_stages > 1) text += "x" + std::to_string(p.virtual_stages);
  return text;
}

// `show_nodes`, `show_batch`: a column for what the search varied of them.
// `rate`: the throughput's unit, "tokens/s", or "samples/s" for a generic
// model (a ResNet's images), whose tokens_per_second counts samples.
// Plans that serve (a search never mixes them with plans that train) have
// no time to train: theirs is the time to run the tokens forward, "serve".
void print_table(const char* title, const std::vector<plan::RankedPlan>& plans, bool show_nodes,
                 bool show_batch, const std::string& rate) {
  std::cout << title << "\n";
  const std::string run_column =
      !plans.empty() && plans.front().estimate.inference ? "serve" : "train";
  std::vector<std::string> header = {"#",         "dp/tp/pp", "SP",       "ZeRO", "mb",
                                     "recompute", "prec",     "fused",    "step", rate,
                                     "MFU",       "mem/GPU",  run_column, "cost"};
  if (show_batch) header.insert(header.begin() + 5, "batch");
  if (show_nodes) header.insert(header.begin() + 1, "nodes");
  TextTable t(header);
  const std::size_t first_number =
      static_cast<std::size_t>(std::find(header.begin(), header.end(), "step") - header.begin());
  for (std::size_t i = first_number; i < header.size(); ++i)
    t.right_align(i);
  int rank = 0;
  for (const plan::RankedPlan& r : plans) {
    const plan::Estimate& e = r.estimate;
    std::vector<std::string> row = {
        std::to_string(++rank),
        plan_cells(r),
        r.parallel.sequence_parallel ? "on" : "off",
        std::to_string(r.parallel.zero_stage),
        std::to_string(r.parallel.micro_batch),
        std::string(to_string(r.parallel.recompute)),
        std::string(to_string(r.precision.compute)),
        r.parallel.flash_attention ? "on" : "off",
        format_seconds(e.time.step()),
        format_count(e.throughput.tokens_per_second),
        format_fixed(e.throughput.mfu * 100, 1) + " %",
        format_bytes(e.memory.total()),
        e.training.seconds > 0 ? format_seconds(e.training.seconds) : "-",
        e.training.cost_usd > 0 ? format_usd(e.training.cost_usd) : "-"};
    if (show_batch) row.insert(row.begin() + 5, std::to_string(r.parallel.global_batch));
    if (show_nodes) row.insert(row.begin() + 1, std::to_string(r.nodes));
    t.add(row);
  }
  t.print(std::cout);
  // MFU is of each plan's own precision's peak (docs/planner.md).
  const std::string note = plan::mfu_across_precisions_note(plans, rate);
  if (!note.empty()) std::cout << note << "\n";
  std::cout << "\n";
}

// Ctrl-C ends the search early with what it found so far.
std::stop_source* g_stop = nullptr;
extern "C" void on_interrupt(int) {
  if (g_stop) g_stop->request_stop();
}

// The GPU counts the search split: the cluster's, or those of --node-counts
// ("the cluster's 32 GPUs" was said of a search over 64 and 128 nodes).
std::string gpus_searched(const Cluster& cluster, const std::vector<int>& node_counts) {
  const double per_node = cluster.gpus_per_node;
  if (node_counts.empty())
    return "the cluster's " + format_count(per_node * cluster.nodes) + " GPUs";
  std::string gpus;
  std::string nodes;
  for (std::size_t i = 0; i < node_counts.size(); ++i) {
    const std::string sep = i == 0 ? "" : i + 1 == node_counts.size() ? " or " : ", ";
    gpus += sep + format_count(per_node * node_counts[i]);
    nodes += sep + std::to_string(node_counts[i]);
  }
  return "the " + gpus + " GPUs of " + nodes + " nodes";
}

// An interrupted search ends as a failure (exit 1), so that a script tells it
// from one that went through: what it found is printed before.
std::string stopped_text(const plan::SearchResult& r) {
  return "the search was stopped (interrupted) after " +
         format_count(static_cast<double>(r.candidates)) + " candidate plans" +
         (r.best.empty() ? ": no plan to show" : ": the plans shown are the best of those");
}

void run(const SearchCommandOptions& o, Context& ctx) {
  const Cluster cluster = o.cluster.resolve(ctx.catalog());
  const Workload workload = o.model.resolve(ctx.catalog());
  auto objective = plan::objective_from_string(o.objective);
  if (!objective) {
    throw UsageError("--objective must be throughput, cost, time, memory or gpus (got \"" +
                     o.objective + "\")");
  }
  // Without an amount to train on, no plan has a time to train: a limit on
  // it would keep every plan without a word (and cost or time rank as
  // GPU-seconds per token, said below).
  const bool has_training = training_samples(workload) > 0;
  if (o.max_days > 0 && !has_training) {
    throw UsageError("--max-days: " + workload.name +
                     " has no amount to train on (--tokens N, or a workload's training_tokens / "
                     "dataset_samples): no plan has a time to train to hold to it");
  }
  const bool per_token = !has_training && (*objective == plan::Objective::cost ||
                                           *objective == plan::Objective::time_to_train);
  plan::SearchSpace space;
  space.global_batches = o.global_batches;  // required, each checked by the flag
  for (const std::string& name : o.precisions) {
    if (auto p = precision_from_string(name)) space.precisions.push_back(*p);  // checked likewise
  }
  space.max_micro_batch = o.max_micro_batch;
  space.use_all_gpus = !o.any_gpu_count;
  space.fp32_main_grad = o.fp32_main_grad;
  space.node_counts = o.node_counts;
  // The planner refuses to grow a one-node cluster with no link between
  // nodes; the flag that gives one is the command line's to name.
  const bool grows =
      std::any_of(o.node_counts.begin(), o.node_counts.end(), [](int n) { return n > 1; });
  if (grows && !cluster.inter_node) {
    throw CliError("search: the cluster \"" + cluster.name +
                   "\" has no link between nodes, so --node-counts cannot grow it past one "
                   "node: give one with --inter-link (e.g. ib-ndr)");
  }
  plan::SearchLimits limits;
  limits.top_k = o.top;
  limits.threads = o.threads;
  limits.max_days = o.max_days;
  limits.min_headroom_bytes = o.min_headroom_gib * 1024.0 * 1024.0 * 1024.0;

  std::stop_source stop;
  g_stop = &stop;
  // Ctrl-C or a SIGTERM (a CI job's timeout) stops the search: the best of
  // what was evaluated is still printed.
  auto previous_int = std::signal(SIGINT, on_interrupt);
  auto previous_term = std::signal(SIGTERM, on_interrupt);
  plan::SearchControl control;
  control.stop = stop.get_token();
  auto result = plan::search(cluster, workload, space, *objective, limits, control);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  g_stop = nullptr;
  const plan::SearchResult r = take(std::move(result));

  if (o.json) {
    nlohmann::json out = plan::to_json(r);
    out["objective"] = std::string(plan::to_string(*objective));
    if (per_token) out["objective_per_token"] = true;
    out["cluster"] = cluster.name;
    out["workload"] = workload.name;
    std::cout << json_text(out, 2) << '\n';
    if (r.cancelled) throw CliError(stopped_text(r));
    return;
  }
  const std::string model = shown_name(workload);
  std::cout << "Search: " << model << " on " << shown_name(cluster) << ", objective "
            << plan::to_string(*objective)
            << (per_token ? " (per token: with no amount to train on given, --tokens N, no plan "
                            "has a whole run to cost or time)"
                          : "")
            << "\n\n";
  const bool show_nodes = o.node_counts.size() > 1;
  const bool show_batch = o.global_batches.size() > 1;
  if (r.best.empty() && !r.cancelled) {
    if (r.candidates == 0) {
      // Every split of the GPUs needs more replicas than the batch has samples.
      std::cout << "No candidate plan: no global batch given divides over "
                << gpus_searched(cluster, o.node_counts)
                << (o.any_gpu_count ? "" : " (--any-gpu-count lets plans leave GPUs idle)")
                << ".\n\n";
    } else if (r.fitting == 0) {
      std::cout << "No plan fits in GPU memory";
      if (r.smallest_memory_bytes > 0) {
        std::cout << ": the smallest of the " << format_count(static_cast<double>(r.valid))
                  << " valid plans needs " << format_bytes(r.smallest_memory_bytes)
                  << " per GPU, the GPU has " << format_bytes(r.gpu_memory_bytes)
                  << " (every split, ZeRO stage, recomputation and micro-batch was tried: a "
                     "larger cluster, --node-counts, or a GPU with more memory)";
      }
      std::cout << ".\n\n";
    } else {
      // They fit; the limits (--max-days, --min-headroom, ...) left none.
      std::string limits_given;
      // As given: 0.001 read "0.0".
      if (o.max_days > 0) limits_given += "--max-days " + number_text(o.max_days);
      if (o.min_headroom_gib > 0)
        limits_given += (limits_given.empty() ? "" : " and ") + std::string("--min-headroom ") +
                        number_text(o.min_headroom_gib);
      std::cout << "No plan within the limits: " << format_count(static_cast<double>(r.fitting))
                << " fit in GPU memory, none within " << limits_given << ".\n\n";
    }
  } else {
    const std::string rate = workload.kind == WorkloadKind::transformer ? "tokens/s" : "samples/s";
    print_table(
        ("Best " + std::to_string(r.best.size()) + " (dp/tp/pp, x chunks when interleaved):")
            .c_str(),
        r.best, show_nodes, show_batch, rate);
    print_table("Pareto front, throughput against memory per GPU:", r.pareto_memory, show_nodes,
                show_batch, rate);
    // Where plans differ in GPU count: several cluster sizes, or plans that
    // leave GPUs idle (--any-gpu-count, where it went unprinted: "how few
    // GPUs does it take?" was in --json alone).
    if (show_nodes || o.any_gpu_count) {
      print_table("Pareto front, throughput against GPU count:", r.pareto_gpus, show_nodes,
                  show_batch, rate);
    }
  }
  std::cout << (r.cancelled ? "Stopped early: evaluated " : "Evaluated ")
            << format_count(static_cast<double>(r.candidates)) << " candidate plans ("
            << format_count(static_cast<double>(r.fitting)) << " fit in memory) in "
            << format_seconds(r.seconds) << " on " << r.threads
            << (r.threads == 1 ? " thread" : " threads") << ".\n";
  if (r.cancelled) throw CliError(stopped_text(r));
}

}  // namespace

void register_search(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<SearchCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "Search every parallelism and precision plan for a cluster and model, ranked, with "
      "the Pareto fronts of throughput against memory and GPU count");
  o->cluster.add_to(*cmd, /*positional=*/false);
  o->model.add_to(*cmd);
  cmd->add_option("--global-batch", o->global_batches,
                  "Sequences (samples) per step; several: 512,1024")
      ->required()
      ->delimiter(',')
      ->check(positive_int());
  cmd->add_option("--objective", o->objective,
                  "throughput, cost, time, memory (headroom) or gpus (fewest)");
  cmd->add_option("--top", o->top, "How many plans to list")->check(positive_int());
  cmd->add_option("--threads", o->threads, "Worker threads (default: every hardware thread)")
      ->check(integer_between(0, 4096));
  cmd->add_option("--node-counts", o->node_counts,
                  "Cluster sizes to try, e.g. 4,8,16,32 (how many nodes does it need?)")
      ->delimiter(',')
      ->check(positive_int());
  cmd->add_option("--precision", o->precisions,
                  "Precisions to try (default: every one the GPU has)")
      ->delimiter(',')
      ->check(precision_name());
  cmd->add_option("--max-days", o->max_days,
                  "Keep plans that train the workload within this many days")
      ->check(positive_number());  // 0 kept every plan, as if no limit were given
  cmd->add_option("--min-headroom", o->min_headroom_gib,
                  "Keep plans with at least this much GPU memory free (GiB)")
      ->check(non_negative_number());
  cmd->add_option("--max-micro-batch", o->max_micro_batch,
                  "Largest micro-batch tried (powers of two)")
      ->check(integer_between(1, 1 << 20));
  cmd->add_flag("--any-gpu-count", o->any_gpu_count,
                "Also try plans that leave GPUs idle (dp x tp x pp < GPUs)");
  cmd->add_flag("--fp32-main-grad", o->fp32_main_grad,
                "Accumulate gradients in fp32 (Megatron-LM)");
  add_json_flag(*cmd, o->json);
  cmd->callback([o, &ctx] { run(*o, ctx); });
}

}  // namespace cs::cli
