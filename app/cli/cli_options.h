#pragma once

#include <cstdint>
// Option groups shared by subcommands: how a cluster and a model are given on
// the command line (a preset name, a JSON file, or inline flags).

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/plans.h"
#include "core/predicted_step.h"
#include "core/presets.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace cs {
struct Range;
}

namespace cs::cli {

// Checks of a number option whose messages state the rule and the value
// ("--tp: must be > 0 (got 0)"); CLI11's own print a range up to 1.8e308.
const CLI::Validator& positive_number();
// A count that fits an int: "--seq: must be > 0 and <= 2147483647 (got 99999999999)".
const CLI::Validator& positive_int();
const CLI::Validator& non_negative_number();
// A count that fits an int, 0 allowed: "--threads: must be between 0 and 2147483647 (got ...)".
const CLI::Validator& non_negative_int();
// A seed: a whole number that fits 64 bits.
const CLI::Validator& seed_number();
// A number the range holds: "--bandwidth: must be > 0 and <= 1e+06 (got 1e-300)";
// `name` is what --help shows of it.
CLI::Validator number_within(const Range& range, std::string name = "NUMBER");
CLI::Validator integer_between(std::int64_t lo, std::int64_t hi);
// A count held in a double (past an int: samples, iterations): whole, in range.
CLI::Validator whole_number_within(const Range& range);
// A precision's name: fp32, tf32, bf16, fp16, fp8, int8 or int4.
CLI::Validator precision_name();  // "--zero: must be between 0 and 3 (got 5)"

// The default global batch, dp x micro-batch; a CliError where it passes
// what an int holds.
int samples_per_step(const ParallelPlan& p);

struct ClusterOptions {
  std::string cluster;  // preset name or JSON file
  std::string gpu;
  std::optional<int> nodes;
  std::optional<int> gpus_per_node;
  std::string intra_link;
  std::string inter_link;
  std::optional<double> price_per_gpu_hour;
  std::string given_as = "--cluster";  // the option that names it, for messages

  // positional: the cluster is the first positional argument (describe);
  // otherwise it is given with --cluster.
  void add_to(CLI::App& command, bool positional);
  // The cluster described, with any inline flags applied over the preset or file.
  Cluster resolve(const PresetCatalog& catalog) const;
  // The flags applied over `c` (a plan document's cluster), checked as a
  // cluster file is.
  Cluster over(Cluster c, const PresetCatalog& catalog) const;
  bool given() const { return !cluster.empty() || !gpu.empty(); }  // a cluster is named
  bool changes() const {  // flags that change a cluster are given
    return given() || nodes || gpus_per_node || !intra_link.empty() || !inter_link.empty() ||
           price_per_gpu_hour;
  }

 private:
  Cluster apply(Cluster c, const PresetCatalog& catalog, bool inline_build) const;
};

struct ModelOptions {
  std::string model;  // preset name or JSON file
  std::optional<int> layers, hidden, heads, kv_heads, ffn_hidden, seq_len, vocab;
  bool gated_mlp = false;
  std::optional<bool> dropout;
  std::optional<double> training_tokens;

  void add_to(CLI::App& command);
  bool given() const;  // a model is named, or a shape flag given
  bool changes() const {
    return given() || kv_heads || ffn_hidden || gated_mlp || dropout || training_tokens;
  }
  Workload resolve(const PresetCatalog& catalog) const;
  // The flags applied over `w` (a plan document's model), checked as a
  // workload file is.
  Workload over(Workload w) const;
};

// Over a plan document: a cluster or model named replaces the document's;
// flags alone change it. Shared by `plan` and `run`.
void apply_over_document(Plan& plan, const ClusterOptions& cluster, const ModelOptions& model,
                         const PresetCatalog& catalog);

// How a plan is given: a plan JSON document (--plan FILE), flags over it, or
// flags alone with the cluster and model options. Shared by `plan` and by
// the commands that run a plan.
struct PlanOptions {
  std::string plan_file;  // a plan document: {"cluster", "workload", "parallel", "precision"}
  std::optional<int> tp, pp, dp, virtual_stages, zero_stage, micro_batch, global_batch;
  bool sequence_parallel = false;
  bool flash_attention = false;     // --flash-attention (the default unless --plan says otherwise)
  bool no_flash_attention = false;  // --no-flash-attention
  bool blocking_tp_allreduce = false;  // --blocking-tp-allreduce
  bool whole_vocab = false;            // --whole-vocab
  bool no_overlap_grad_reduce = false;  // --no-overlap-grad-reduce
  bool fp32_main_grad = false;      // Megatron's fp32 main gradient
  std::string recompute;            // none, selective, full
  std::string precision;            // fp32, tf32, bf16, fp16, fp8, int8, int4

  void add_to(CLI::App& command);
  bool changes() const {  // flags that change the plan are given
    return tp || pp || dp || virtual_stages || zero_stage || micro_batch || global_batch ||
           sequence_parallel || flash_attention || no_flash_attention || blocking_tp_allreduce ||
           whole_vocab || no_overlap_grad_reduce || fp32_main_grad || !recompute.empty() ||
           !precision.empty();
  }
  // The plan: --plan's document (its cluster and workload unless the cluster
  // or model options name others), with every flag given applied over it.
  // dp defaults to the GPUs left by tp x pp; the global batch to dp x micro-batch.
  Plan resolve(const PresetCatalog& catalog, const ClusterOptions& cluster,
               const ModelOptions& model) const;
};

// A plan document as it stands, and the planner's prediction of it
// (calib::predict_plan): what a program of the user's own is held against
// (`--plan` of profile, trace import and trace stats), for a run of `ranks`
// ranks when known (0: not yet). Throws the CLI's error for a plan it
// cannot read or predict.
struct PlanFilePrediction {
  Plan plan;
  trace::PredictedStep step;
};
PlanFilePrediction plan_file_prediction(const PresetCatalog& catalog, const std::string& plan_file,
                                        int ranks = 0);

// True when the argument names an existing file, ends in ".json", or is
// "-" (standard input).
bool looks_like_file(const std::string& argument);

// "-" in place of a JSON file names standard input, which can be read once.
// How messages name a document: its path, or "standard input".
std::string document_name(const std::string& source);
// Said on stderr before a named pipe is read: the read waits for a writer.
void say_if_named_pipe(const std::string& path, const std::string& flag);
// Standard input taken for `flag`'s "-": a UsageError where a flag took it
// already (it can be read once); an error for a device that is not a
// terminal (< /dev/zero reads forever).
Status claim_standard_input(const std::string& flag);
// The JSON document `source` names: a file, or standard input for "-".
// Standard input named a second time (`flag` and the first one's are said)
// is a UsageError; other failures come back as the Result's message.
Result<nlohmann::json> read_document(const std::string& source, const std::string& flag);

}  // namespace cs::cli
