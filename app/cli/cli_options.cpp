#include "app/cli/cli_options.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "app/calibration/calibration_workflow.h"
#include "app/cli/context.h"
#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/parse_count.h"
#include "core/shown_name.h"

namespace cs::cli {

namespace {

CLI::Validator number_in(const Range& range, std::string name) {
  return CLI::Validator([range](std::string& text) { return range.broken_by(text); },
                        std::move(name));
}

}  // namespace

const CLI::Validator& positive_number() {
  static const CLI::Validator check = number_in(Range::positive(), "POSITIVE");
  return check;
}

const CLI::Validator& positive_int() {
  static const CLI::Validator check =
      number_in({0, double(std::numeric_limits<int>::max()), true}, "POSITIVE");
  return check;
}

const CLI::Validator& non_negative_number() {
  static const CLI::Validator check = number_in(Range::non_negative(), "NONNEGATIVE");
  return check;
}

const CLI::Validator& non_negative_int() {
  static const CLI::Validator check =
      number_in(Range::between(0, double(std::numeric_limits<int>::max())), "NONNEGATIVE");
  return check;
}

const CLI::Validator& seed_number() {
  // Whole and within 64 bits: CLI11 made 1e30 the largest seed, silently.
  static const CLI::Validator check(
      [](std::string& text) -> std::string {
        if (parse_count<std::uint64_t>(text)) return {};
        return "must be a whole number from 0 to 18446744073709551615 (got " + text + ")";
      },
      "SEED");
  return check;
}

CLI::Validator number_within(const Range& range, std::string name) {
  return number_in(range, std::move(name));
}

CLI::Validator whole_number_within(const Range& range) {
  CLI::Validator in_range = number_in(range, "WHOLE");
  return CLI::Validator(
      [in_range](std::string& text) mutable -> std::string {
        std::string checked = text;
        if (std::string error = in_range(checked); !error.empty()) return error;
        const double value = std::strtod(text.c_str(), nullptr);
        if (value != std::floor(value)) return "must be a whole number (got " + text + ")";
        return {};
      },
      "WHOLE");
}

CLI::Validator integer_between(std::int64_t lo, std::int64_t hi) {
  return number_in(Range::between(static_cast<double>(lo), static_cast<double>(hi)),
                   std::to_string(lo) + " to " + std::to_string(hi));
}

CLI::Validator precision_name() {
  std::vector<std::string> names;
  for (Precision p : kAllPrecisions)
    names.emplace_back(cs::to_string(p));
  return CLI::IsMember(names);
}

int samples_per_step(const ParallelPlan& p) {
  const std::int64_t samples = p.samples_per_micro_step();
  if (samples > std::numeric_limits<int>::max()) {
    throw CliError("dp x micro-batch = " + std::to_string(p.dp) + " x " +
                   std::to_string(p.micro_batch) + " = " + std::to_string(samples) +
                   " sequences per step: more than " +
                   std::to_string(std::numeric_limits<int>::max()));
  }
  return static_cast<int>(samples);
}

// A folder is read as a file too, so that reading it says what it is
// (read_json_file) rather than "unknown preset".
bool looks_like_file(const std::string& argument) {
  std::error_code ec;
  // A path that is there is read, whatever it is and however it is written:
  // a named pipe in the working folder (`mkfifo model`) was "an unknown
  // model preset" where one given as ./model or <(...) was read.
  return argument == "-" || std::filesystem::exists(argument, ec) ||
         (argument.size() > 5 && argument.ends_with(".json"));
}

std::string document_name(const std::string& source) {
  return source == "-" ? "standard input" : source;
}

void say_if_named_pipe(const std::string& path, const std::string& flag) {
  // A named pipe waits for a program to write to it: say so, not hang mute.
  std::error_code ec;
  if (std::filesystem::is_fifo(path, ec))
    std::cerr << "clusterscope: " << flag << ": reading " << path
              << ", a named pipe: waiting for a program to write to it (Ctrl-C to stop)\n";
}

Result<nlohmann::json> read_document(const std::string& source, const std::string& flag) {
  if (source != "-") {
    say_if_named_pipe(source, flag);
    return read_json_file(source);
  }
  if (Status claimed = claim_standard_input(flag); !claimed)
    return Error{claimed.message() + ", not a JSON document: give a file"};
  return read_json_stream(std::cin, document_name(source));
}

Status claim_standard_input(const std::string& flag) {
  // One process, one command: the flag that took standard input first.
  static std::string taken_by;
  if (!taken_by.empty()) {
    throw UsageError(flag + " -: standard input is read for " + taken_by +
                     " already, and it can be read once");
  }
  taken_by = flag;
  // A terminal is typed into; any other device (< /dev/zero) reads forever.
  struct stat in {};
  if (::fstat(STDIN_FILENO, &in) == 0 && S_ISCHR(in.st_mode) && !::isatty(STDIN_FILENO))
    return Error{flag + " -: standard input is a device"};
  return {};
}

void ClusterOptions::add_to(CLI::App& command, bool positional) {
  const char* what =
      "Cluster: a preset name (see `clusterscope presets clusters`), "
      "\"this-machine\", or a cluster JSON file (- reads standard input)";
  if (positional) {
    given_as = "cluster";
    command.add_option("cluster", cluster, what);
  } else {
    command.add_option("--cluster", cluster, what);
  }
  command.add_option("--gpu", gpu, "GPU preset, to build a cluster inline or replace its GPU");
  command.add_option("--nodes", nodes, "Number of nodes")
      ->check(integer_between(1, Cluster::kMaxNodes));
  command.add_option("--gpus-per-node", gpus_per_node, "GPUs per node (default 8 inline)")
      ->check(integer_between(0, Cluster::kMaxGpusPerNode));
  command.add_option("--intra-link", intra_link,
                     "Link preset between the GPUs of a node (default: the GPU's own fabric or PCIe "
                     "generation, else pcie4)");
  command.add_option("--inter-link", inter_link,
                     "Link preset between nodes, one port per GPU (default ib-ndr)");
  command.add_option("--price", price_per_gpu_hour, "Price per GPU-hour in USD")
      ->check(number_within(price_per_gpu_hour_range(), "NONNEGATIVE"));
}

Cluster ClusterOptions::resolve(const PresetCatalog& catalog) const {
  Cluster c;
  if (!cluster.empty()) {
    if (looks_like_file(cluster)) {
      auto j = take(read_document(cluster, given_as));
      const std::string name = document_name(cluster);
      // A plan file carries its cluster inside.
      if (j.is_object() && j.contains("parallel") && j.contains("cluster")) {
        c = take(plan_from_json(j, name, &catalog)).cluster;
      } else {
        c = take(cluster_from_json(j, name, &catalog));
      }
    } else {
      c = take(catalog.cluster(cluster));
    }
  } else if (!gpu.empty()) {
    c.name = "custom";
    c.display_name = "Custom cluster";
    c.source = "command line";
    c.gpus_per_node = 8;
  } else {
    throw CliError(
        "no cluster given: name a preset or a JSON file, or use --gpu NAME --nodes N "
        "--gpus-per-node G");
  }

  return apply(std::move(c), catalog, cluster.empty());
}

Cluster ClusterOptions::over(Cluster c, const PresetCatalog& catalog) const {
  return apply(std::move(c), catalog, false);
}

Cluster ClusterOptions::apply(Cluster c, const PresetCatalog& catalog, bool inline_build) const {
  const Cluster preset = c;  // as named, before the flags change it
  if (!gpu.empty()) {
    const GpuSpec* g = catalog.find_gpu(gpu);
    if (!g) throw CliError(catalog.unknown_name_message("GPU preset", gpu, catalog.gpu_names()));
    c.gpu = *g;
  }
  if (nodes) c.nodes = *nodes;
  if (gpus_per_node) c.gpus_per_node = *gpus_per_node;
  if (c.gpus_per_node == 0) c.gpu.reset();
  if (c.gpus_per_node > 0 && !c.gpu) {
    throw CliError("--gpus-per-node " + std::to_string(c.gpus_per_node) +
                   " needs a GPU: add --gpu NAME");
  }

  auto link = [&](const std::string& name) {
    const Link* l = catalog.find_link(name);
    if (!l) throw CliError(catalog.unknown_name_message("link preset", name, catalog.link_names()));
    return *l;
  };
  if (!intra_link.empty()) {
    c.intra_node = link(intra_link);
  } else if (inline_build || !gpu.empty()) {
    c.intra_node = link(c.gpu ? node_link_preset(*c.gpu) : "pcie4");
  }
  if (!inter_link.empty()) {
    c.inter_node = link(inter_link);
  } else if (c.nodes > 1 && !c.inter_node) {
    c.inter_node = link("ib-ndr");
  }
  if (c.inter_node && c.nics_per_node == 0) c.nics_per_node = std::max(1, c.gpus_per_node);
  // Another GPU in a preset's nodes: the preset's price and board power
  // were its own GPU's (an A100 price on H100s costed the run 40 % low).
  const bool gpu_replaced = !inline_build && !gpu.empty() && preset.gpu && preset.gpu->name != gpu;
  if (gpu_replaced) {
    if (preset.price_per_gpu_hour > 0 && !price_per_gpu_hour) {
      std::cerr << "clusterscope: note: --gpu " << gpu << " replaces the " << preset.gpu->name
                << " of " << preset.name << ", whose price ($" << preset.price_per_gpu_hour
                << " per GPU-hour) is that GPU's: the cost is left out; give --price\n";
    }
    c.price_per_gpu_hour = 0;
    c.power_per_gpu_watts = 0;  // the new GPU's TDP
  }
  if (price_per_gpu_hour) c.price_per_gpu_hour = *price_per_gpu_hour;
  if (!inline_build) {
    // A preset's name says what it was ("1 node (8 GPUs)"): changed by
    // flags, it says so, rather than contradicting the lines below it.
    std::string changed;
    auto note = [&](bool differs, const std::string& flag) {
      if (differs) changed += (changed.empty() ? "" : " ") + flag;
    };
    note(!gpu.empty() && (!preset.gpu || preset.gpu->name != gpu), "--gpu " + gpu);
    note(nodes && *nodes != preset.nodes, "--nodes " + std::to_string(nodes.value_or(0)));
    note(gpus_per_node && *gpus_per_node != preset.gpus_per_node,
         "--gpus-per-node " + std::to_string(gpus_per_node.value_or(0)));
    note(!intra_link.empty() && intra_link != preset.intra_node.name, "--intra-link " + intra_link);
    note(!inter_link.empty() && (!preset.inter_node || inter_link != preset.inter_node->name),
         "--inter-link " + inter_link);
    if (price_per_gpu_hour && *price_per_gpu_hour != preset.price_per_gpu_hour) {
      std::ostringstream price;
      price << *price_per_gpu_hour;
      note(true, "--price " + price.str());
    }
    if (!changed.empty()) c.display_name = shown_name(c) + ", changed by " + changed;
  }

  // The same rules as a cluster file.
  return take(cluster_from_json(to_json(c), "command line", &catalog));
}

void ModelOptions::add_to(CLI::App& command) {
  command.add_option(
      "--model", model,
      "Model: a preset name (see `clusterscope presets models`) or a workload JSON file "
      "(- reads standard input)");
  // The workload document's ranges, so that a flag is refused as its field is.
  command.add_option("--layers", layers, "Transformer layers")
      ->check(integer_between(1, kMaxLayers));
  command.add_option("--hidden", hidden, "Hidden size")->check(integer_between(1, kMaxWidth));
  command.add_option("--heads", heads, "Attention heads")->check(integer_between(1, kMaxWidth));
  command.add_option("--kv-heads", kv_heads, "Key/value heads (grouped-query attention)")
      ->check(integer_between(1, kMaxWidth));
  command
      .add_option("--ffn", ffn_hidden,
                  "MLP inner size (default 4 x hidden; needed with --gated-mlp)")
      ->check(integer_between(1, kMaxLength));
  command.add_option("--seq", seq_len, "Sequence length")->check(integer_between(1, kMaxLength));
  command.add_option("--vocab", vocab, "Vocabulary size")->check(integer_between(1, kMaxLength));
  command.add_flag("--gated-mlp", gated_mlp, "SwiGLU-style gated MLP");
  command
      .add_option("--dropout", dropout,
                  "Dropout after attention and MLP, on or off (the model's; LLaMA trains "
                  "without): its masks are kept for backward")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "on" || text == "off") return {};
            return "must be on or off (got " + text + ")";
          },
          "on|off"));
  command.add_option("--tokens", training_tokens, "Tokens to train on")
      ->check(number_within(training_tokens_range(), "NONNEGATIVE"));
}

bool ModelOptions::given() const {
  return !model.empty() || layers || hidden || heads || seq_len || vocab;
}

Workload ModelOptions::resolve(const PresetCatalog& catalog) const {
  Workload w;
  if (!model.empty()) {
    if (looks_like_file(model)) {
      auto j = take(read_document(model, "--model"));
      const std::string name = document_name(model);
      if (j.is_object() && j.contains("parallel") && j.contains("workload")) {
        w = take(plan_from_json(j, name, &catalog)).workload;
      } else {
        w = take(workload_from_json(j, name));
      }
    } else if (const Workload* preset = catalog.find_model(model)) {
      w = *preset;
    } else {
      throw CliError(catalog.unknown_name_message("model preset", model, catalog.model_names()));
    }
  } else {
    if (!(layers && hidden && heads && seq_len && vocab)) {
      throw CliError(
          "no model given: name a preset or a JSON file with --model, or give --layers "
          "--hidden --heads --seq --vocab");
    }
    w.name = "custom";
    w.display_name = "Custom transformer";
    w.source = "command line";
    w.transformer.ffn_hidden = 4 * *hidden;
  }
  return over(std::move(w));
}

Workload ModelOptions::over(Workload w) const {
  if (w.kind == WorkloadKind::generic && (layers || hidden || heads || kv_heads || ffn_hidden ||
                                          gated_mlp || dropout || seq_len || vocab)) {
    throw CliError(
        "--layers/--hidden/--heads/--kv-heads/--ffn/--gated-mlp/--dropout/--seq/--vocab apply "
        "to transformers, and \"" +
        w.name + "\" is a generic model");
  }
  TransformerShape& s = w.transformer;
  if (layers) s.layers = *layers;
  if (hidden) s.hidden = *hidden;
  if (heads) {
    // A model of grouped-query attention keeps its key/value heads: they
    // must still divide the heads given (the document's rule, said of the
    // flag, since the user never set kv_heads).
    if (!kv_heads && s.kv_heads > 0 && s.kv_heads != s.heads && *heads % s.kv_heads != 0) {
      throw CliError("--heads " + std::to_string(*heads) + ": " + w.display_name + " has " +
                     std::to_string(s.kv_heads) +
                     " key/value heads (grouped-query attention), which must divide the heads: "
                     "give --kv-heads too");
    }
    if (s.kv_heads == s.heads || s.kv_heads == 0) s.kv_heads = *heads;
    s.heads = *heads;
  }
  if (kv_heads) s.kv_heads = *kv_heads;
  if (gated_mlp && !s.gated_mlp && !ffn_hidden) {
    // As a workload document requires ffn_hidden with gated_mlp: 4 x hidden
    // is not a gated MLP's size, and three such matrices overstate the model.
    throw CliError(
        "--gated-mlp needs --ffn: a gated (SwiGLU) MLP's inner size is about 8/3 x hidden, not "
        "4 x hidden (LLaMA-2 7B: --hidden 4096 --ffn 11008)");
  }
  if (ffn_hidden) s.ffn_hidden = *ffn_hidden;
  if (gated_mlp) s.gated_mlp = true;
  if (dropout) s.dropout = *dropout;
  if (seq_len) s.seq_len = *seq_len;
  if (vocab) s.vocab = *vocab;
  if (training_tokens) w.training_tokens = *training_tokens;
  // A rule between two fields is named by the model and the flags given over
  // it, which the user typed ("gpt3-1.3b with --hidden 100: /hidden: must be
  // divisible by heads (16)"), not as "command line".
  std::string flags;
  auto add = [&flags](const char* flag, const std::optional<int>& value) {
    if (value) flags += std::string(" ") + flag + " " + std::to_string(*value);
  };
  add("--layers", layers);
  add("--hidden", hidden);
  add("--heads", heads);
  add("--kv-heads", kv_heads);
  add("--ffn", ffn_hidden);
  add("--seq", seq_len);
  add("--vocab", vocab);
  if (gated_mlp) flags += " --gated-mlp";
  if (dropout) flags += *dropout ? " --dropout on" : " --dropout off";
  const std::string source =
      flags.empty() ? std::string("command line")
                    : (model.empty() ? std::string("the model of") : model + " with") + flags;
  return take(workload_from_json(to_json(w), source));
}

void apply_over_document(Plan& plan, const ClusterOptions& cluster, const ModelOptions& model,
                         const PresetCatalog& catalog) {
  if (cluster.given()) {
    plan.cluster = cluster.resolve(catalog);
  } else if (cluster.changes()) {
    plan.cluster = cluster.over(plan.cluster, catalog);
  }
  if (!model.model.empty()) {
    plan.workload = model.resolve(catalog);
  } else if (model.changes()) {
    plan.workload = model.over(plan.workload);
  }
}

void PlanOptions::add_to(CLI::App& command) {
  command.add_option(
      "--plan", plan_file,
      "Plan JSON document (cluster, workload, parallel, precision; - reads standard input); "
      "flags override it");
  command.add_option("--tp", tp, "Tensor-parallel degree")->check(positive_int());
  command.add_option("--pp", pp, "Pipeline stages")->check(positive_int());
  command.add_option("--dp", dp, "Data-parallel replicas (default: the GPUs left by tp x pp)")
      ->check(positive_int());
  command
      .add_option("--virtual-stages", virtual_stages,
                  "Model chunks per pipeline rank (> 1: the interleaved schedule)")
      ->check(positive_int());
  command.add_flag("--sequence-parallel", sequence_parallel,
                   "Split layer norms and dropouts over the tensor-parallel group");
  command.add_option("--zero", zero_stage, "ZeRO stage: 0, 1, 2 or 3")->check(integer_between(0, 3));
  command.add_option("--micro-batch", micro_batch, "Sequences (samples) per micro-batch")
      ->check(positive_int());
  command
      .add_option("--global-batch", global_batch,
                  "Sequences (samples) per optimizer step (default: dp x micro-batch)")
      ->check(positive_int());
  command.add_option("--recompute", recompute, "Activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  command.add_option("--precision", precision, "Compute precision (and its usual storage formats)")
      ->check(precision_name());
  command.add_flag("--flash-attention", flash_attention,
                   "Fused attention that never stores the s x s scores (the default)");
  command.add_flag("--no-flash-attention", no_flash_attention,
                   "Unfused attention (softmax in memory)");
  command.add_flag("--blocking-tp-allreduce", blocking_tp_allreduce,
                   "Backward's tensor-parallel input-gradient all-reduce blocks instead of "
                   "overlapping the weight gradient (as the ClusterScope engines run it)");
  command.add_flag("--no-overlap-grad-reduce", no_overlap_grad_reduce,
                   "The data-parallel gradient reduction starts after backward instead of "
                   "bucket by bucket during it (Megatron-LM without --overlap-grad-reduce)");
  command.add_flag("--whole-vocab", whole_vocab,
                   "Every tensor-parallel rank keeps the embedding and LM head whole instead of "
                   "its share of the vocabulary (as the ClusterScope engines run them)");
  command.add_flag(
      "--fp32-main-grad", fp32_main_grad,
      "Accumulate gradients in fp32 (Megatron-LM's main gradient, 18 bytes per parameter)");
}

Plan PlanOptions::resolve(const PresetCatalog& catalog, const ClusterOptions& cluster_options,
                          const ModelOptions& model_options) const {
  Plan plan;
  const bool from_file = !plan_file.empty();
  const std::string plan_name = document_name(plan_file);
  // A plan document without a global batch takes its gradient accumulation
  // (1 when it names none) x dp x micro-batch, after the flags (--dp 8 over
  // such a file asked for a batch of 1 before; its accumulation was lost).
  bool file_sets_global_batch = false;
  bool file_sets_dp = false;  // else dp fills the cluster, the flags' cluster too
  bool file_sets_precision = false;
  std::int64_t file_accumulation = 1;
  if (from_file) {
    const nlohmann::json document = take(read_document(plan_file, "--plan"));
    const auto parallel = document.find("parallel");
    file_sets_global_batch = parallel != document.end() &&
                             (!parallel->is_object() || parallel->contains("global_batch"));
    file_sets_dp = parallel != document.end() && parallel->is_object() && parallel->contains("dp");
    file_sets_precision = document.contains("precision");
    plan = take(plan_from_json(document, plan_name, &catalog));
    file_accumulation = std::max(plan.parallel.gradient_accumulation(), 1);
    apply_over_document(plan, cluster_options, model_options, catalog);
  } else {
    plan.cluster = cluster_options.resolve(catalog);
    plan.workload = model_options.resolve(catalog);
  }
  if (flash_attention && no_flash_attention) {
    throw UsageError("--flash-attention and --no-flash-attention contradict each other");
  }
  ParallelPlan& p = plan.parallel;
  const std::int64_t file_gpus = static_cast<std::int64_t>(p.tp) * p.pp * p.dp;
  const std::string file_layout = "tp " + std::to_string(p.tp) + " x pp " + std::to_string(p.pp) +
                                  " x dp " + std::to_string(p.dp);
  if (tp) p.tp = *tp;
  if (pp) p.pp = *pp;
  if (!pp && !from_file && p.pp < 1) p.pp = 1;
  if (virtual_stages) {
    p.virtual_stages = *virtual_stages;
    p.schedule =
        *virtual_stages > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
  }
  if (sequence_parallel) p.sequence_parallel = true;
  if (zero_stage) p.zero_stage = *zero_stage;
  if (micro_batch) p.micro_batch = *micro_batch;
  if (dp) {
    p.dp = *dp;
  } else if (from_file && file_sets_dp && (tp || pp)) {
    // Flags over a plan document change what they name: the plan keeps its
    // GPUs, and dp takes what tp x pp leave of them (filling the cluster
    // instead turned --tp 2 over a dp-4 plan on 32 GPUs into dp 16).
    const std::int64_t model_parallel = std::max<std::int64_t>(std::int64_t{p.tp} * p.pp, 1);
    if (file_gpus % model_parallel != 0) {
      throw CliError(plan_name + " runs on " + std::to_string(file_gpus) + " GPUs (" + file_layout +
                     "), which tp " + std::to_string(p.tp) + " x pp " + std::to_string(p.pp) +
                     " does not divide: give --dp");
    }
    p.dp = static_cast<int>(file_gpus / model_parallel);
  } else if (!from_file || !file_sets_dp) {
    const int gpus = plan.cluster.total_gpus();
    const int model_parallel = std::max(p.tp * p.pp, 1);
    p.dp = (gpus >= model_parallel && gpus % model_parallel == 0) ? gpus / model_parallel : 1;
  }
  if (global_batch) {
    p.global_batch = *global_batch;
  } else if (!file_sets_global_batch) {
    const std::int64_t global = file_accumulation * samples_per_step(p);
    if (global > std::numeric_limits<int>::max()) {
      throw CliError(
          plan_name + ": gradient_accumulation x dp x micro-batch = " + std::to_string(global) +
          " sequences per step: more than " + std::to_string(std::numeric_limits<int>::max()));
    }
    p.global_batch = static_cast<int>(global);
  }
  if (!recompute.empty()) p.recompute = *recompute_from_string(recompute);
  if (flash_attention) p.flash_attention = true;
  if (no_flash_attention) p.flash_attention = false;
  if (blocking_tp_allreduce) p.async_tp_allreduce = false;
  if (whole_vocab) p.vocab_parallel = false;
  if (no_overlap_grad_reduce) p.overlap_grad_reduce = false;
  if (!precision.empty()) {
    plan.precision = PrecisionPlan::for_compute(*precision_from_string(precision));
  } else if (!file_sets_precision && plan.cluster.gpu &&
             plan.cluster.gpu->peak.of(plan.precision.compute) <= 0) {
    // The default (bf16) on a GPU without it, a V100: the rule broken named
    // /precision/compute, which no one gave.
    std::string has;
    for (Precision q :
         {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16, Precision::fp8}) {
      if (plan.cluster.gpu->peak.of(q) > 0)
        has += (has.empty() ? "" : ", ") + std::string(to_string(q));
    }
    const std::string wanted(to_string(plan.precision.compute));
    throw UsageError("--precision: the " + shown_name(*plan.cluster.gpu) +
                     (calibrated_without(*plan.cluster.gpu, plan.precision.compute)
                          ? " was calibrated without " + wanted
                          : " has no " + wanted + " path") +
                     ", the precision a plan takes when none is given: give one it has (" + has +
                     ")" +
                     (calibrated_without(*plan.cluster.gpu, plan.precision.compute)
                          ? ", or calibrate again with --precisions " + wanted + " to measure it"
                          : ""));
  }
  if (fp32_main_grad) {
    if (plan.precision.inference) throw CliError("--fp32-main-grad applies to training plans only");
    plan.precision.fp32_main_grad = true;
  }
  return plan;
}

PlanFilePrediction plan_file_prediction(const PresetCatalog& catalog, const std::string& plan_file,
                                        int ranks) {
  PlanOptions given;
  given.plan_file = plan_file;
  PlanFilePrediction out;
  out.plan = given.resolve(catalog, ClusterOptions{}, ModelOptions{});
  out.step = take(calib::predict_plan(out.plan, document_name(plan_file), ranks));
  return out;
}

}  // namespace cs::cli
