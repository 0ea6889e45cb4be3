#include "core/model_json.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/enum_tables.h"
#include "core/file_beside.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/presets.h"

namespace cs {

using nlohmann::json;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kTera = 1e12;
constexpr double kMicro = 1e-6;
constexpr double kGbitToBytes = 1e9 / 8.0;

// Bounds of a figure in a document (in the document's own unit), far past
// any real device, link or model: a typo (1e30, a subnormal 1e-310) is
// refused, naming the key, instead of printing "inf days" or "-nan %", and
// the shape's products stay well inside 64 bits.
struct Limits {
  Range tflops{1e-6, 1e6};            // 1 MFLOP/s to 1 EFLOP/s
  Range tflops_or_0{0, 1e6, false, 1e-6};  // 0: the device has no such path; else >= 1e-6
  Range memory_gib{1.0 / 1024, 1e6};  // 1 MiB to about 1 PiB
  Range memory_gb_s{1e-3, 1e6};       // 1 MB/s to 1 PB/s
  Range link_gbps{1e-3, 1e7};         // 1 Mbit/s to 10 Pbit/s
  Range link_gbps_or_0{0, 1e7, false, 1e-3};  // 0: not measured; else >= 1e-3
  Range microseconds{0, 1e7};         // up to 10 s
  Range nanoseconds{0, 1e12};         // up to 1000 s
  Range gflop{0, 1e9};
  // 0: not measured; else >= 1e-6 (1 kFLOP/s): attention divided by 2.3e-308 took inf days.
  Range gflops{0, 1e9, false, 1e-6};
  Range factor{0, 100};
  Range watts{0, 1e6};
  Range price{0, 1e6};  // USD per GPU-hour
  Range parameters{1, 1e16};
  Range bytes{1, 1e15};
  // The share of a peak that kernels, links or cores reach: the planner
  // divides work by it, so a share of 1e-300 took "inf days" to train.
  Range efficiency{1e-6, 1};
  Range efficiency_or_0{0, 1, false, 1e-6};  // 0: not given (gemm_max_by_precision)
  // A float's scale: beyond 1e38 it is infinity, and every scaled loss too.
  Range loss_scale{0, 1e38, true};
  // 0: none; else a count of at least one (1e-300 tokens trained "1 step, 0.00 FLOP").
  Range tokens{0, 1e18, false, 1};
  Range samples{0, 1e15, false, 1};
};
const Limits kLimits;

using DocNames = Named<DocumentKind>;
constexpr auto kDocumentKindNames = enum_names<DocumentKind>(
    DocNames{DocumentKind::gpu, "gpu"}, DocNames{DocumentKind::link, "link"},
    DocNames{DocumentKind::cluster, "cluster"}, DocNames{DocumentKind::workload, "workload"},
    DocNames{DocumentKind::parallel_plan, "parallel_plan"},
    DocNames{DocumentKind::precision_plan, "precision_plan"}, DocNames{DocumentKind::plan, "plan"});

// "kind", when present, must name the kind being read.
void check_kind(ObjectReader& r, DocumentKind expected) {
  const json* k = r.field("kind");
  if (!k) return;
  if (!k->is_string() || k->get<std::string>() != kDocumentKindNames.name(expected)) {
    r.diagnostics().add(r.pointer("kind"),
                        "must be \"" + std::string(kDocumentKindNames.name(expected)) + "\"");
  }
}

// A display name, as every view prints it (the name when absent).
void read_display_name(ObjectReader& r, std::string& out, const std::string& name) {
  r.label("display_name", out);
  if (out.empty()) out = name;
}

// Scaled number: JSON holds `value * 1/scale`, the model holds SI units.
void scaled(ObjectReader& r, std::string_view key, double& out, double scale, Range range,
            bool required = false) {
  double v = out / scale;
  const bool present = r.has(key);
  r.number(key, v, range, required);
  if (present) out = v * scale;
}

// --- readers into an existing value (so that nested documents share diagnostics)

// [{"parameters": 65536, "ns": 2.5}, ...], parameter counts increasing.
void read_optimizer_by_size(const json& j, const std::string& ptr, Diagnostics& d,
                            std::vector<OptimizerPoint>& out) {
  if (!j.is_array()) {
    d.add(ptr, "must be an array of {\"parameters\", \"ns\"} points");
    return;
  }
  out.clear();
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string where = json_pointer_append(ptr, std::to_string(i));
    ObjectReader r(j[i], where, d);
    OptimizerPoint point;
    r.number("parameters", point.parameters, kLimits.parameters, true);
    r.number("ns", point.ns, kLimits.nanoseconds, true);
    r.finish();
    if (!out.empty() && point.parameters <= out.back().parameters) {
      d.add(json_pointer_append(where, "parameters"),
            "must be larger than the point before it (points in increasing parameter count)");
    }
    out.push_back(point);
  }
}

// [{"bytes": 3470000, "bandwidth_gbps": 36}, ...], sizes increasing.
void read_link_by_size(const json& j, const std::string& ptr, Diagnostics& d,
                       std::vector<LinkPoint>& out) {
  if (!j.is_array()) {
    d.add(ptr, "must be an array of {\"bytes\", \"bandwidth_gbps\"} points");
    return;
  }
  out.clear();
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string where = json_pointer_append(ptr, std::to_string(i));
    ObjectReader r(j[i], where, d);
    LinkPoint point;
    r.number("bytes", point.bytes, kLimits.bytes, true);
    scaled(r, "bandwidth_gbps", point.bandwidth, kGbitToBytes, kLimits.link_gbps, true);
    r.finish();
    if (!out.empty() && point.bytes <= out.back().bytes) {
      d.add(json_pointer_append(where, "bytes"),
            "must be larger than the point before it (points in increasing size)");
    }
    out.push_back(point);
  }
}

void read_gpu(const json& j, const std::string& ptr, Diagnostics& d, GpuSpec& g) {
  ObjectReader r(j, ptr, d);
  if (!r.is_object()) return;
  check_kind(r, DocumentKind::gpu);
  r.name("name", g.name);
  read_display_name(r, g.display_name, g.name);
  r.text("vendor", g.vendor);
  r.text("architecture", g.architecture);
  scaled(r, "memory_gib", g.memory_bytes, kGiB, kLimits.memory_gib, true);
  scaled(r, "memory_bandwidth_gb_s", g.memory_bandwidth, kGB, kLimits.memory_gb_s, true);
  if (const json* p = r.field("peak_tflops", true)) {
    ObjectReader pr(*p, r.pointer("peak_tflops"), d);
    scaled(pr, "fp32", g.peak.fp32, kTera, kLimits.tflops, true);
    scaled(pr, "tf32", g.peak.tf32, kTera, kLimits.tflops_or_0);
    scaled(pr, "bf16", g.peak.bf16, kTera, kLimits.tflops_or_0);
    scaled(pr, "fp16", g.peak.fp16, kTera, kLimits.tflops_or_0);
    scaled(pr, "fp8", g.peak.fp8, kTera, kLimits.tflops_or_0);
    scaled(pr, "int8", g.peak.int8, kTera, kLimits.tflops_or_0);
    pr.finish();
  }
  r.number("tdp_watts", g.tdp_watts, kLimits.watts);
  if (const json* e = r.field("efficiency")) {
    ObjectReader er(*e, r.pointer("efficiency"), d);
    er.number("gemm_max", g.efficiency.gemm_max, kLimits.efficiency);
    er.number("gemm_half_gflop", g.efficiency.gemm_half_gflop, kLimits.gflop);
    er.number("memory_max", g.efficiency.memory_max, kLimits.efficiency);
    er.number("kernel_launch_us", g.efficiency.kernel_launch_us, kLimits.microseconds);
    er.number("gemm_memory_overlap", g.efficiency.gemm_memory_overlap, Range::between(0, 1));
    if (const json* by = er.field("gemm_max_by_precision")) {
      ObjectReader br(*by, er.pointer("gemm_max_by_precision"), d);
      PeakRates& f = g.efficiency.gemm_max_by_precision;
      for (auto [key, value] :
           {std::pair{"fp32", &f.fp32}, std::pair{"tf32", &f.tf32}, std::pair{"bf16", &f.bf16},
            std::pair{"fp16", &f.fp16}, std::pair{"fp8", &f.fp8}, std::pair{"int8", &f.int8}}) {
        br.number(key, *value, kLimits.efficiency_or_0);
      }
      br.finish();
    }
    er.number("host_dispatch_us", g.efficiency.host_dispatch_us, kLimits.microseconds);
    if (const json* l = er.field("loops")) {
      ObjectReader lr(*l, er.pointer("loops"), d);
      LoopCosts& c = g.efficiency.loops;
      lr.number("norm_ns", c.norm_ns, kLimits.nanoseconds);
      lr.number("norm_backward_ns", c.norm_backward_ns, kLimits.nanoseconds);
      lr.number("activation_ns", c.activation_ns, kLimits.nanoseconds);
      lr.number("activation_backward_ns", c.activation_backward_ns, kLimits.nanoseconds);
      lr.number("elementwise_ns", c.elementwise_ns, kLimits.nanoseconds);
      lr.number("softmax_ns", c.softmax_ns, kLimits.nanoseconds);
      lr.number("optimizer_ns", c.optimizer_ns, kLimits.nanoseconds);
      if (const json* sizes = lr.field("optimizer_by_size")) {
        read_optimizer_by_size(*sizes, lr.pointer("optimizer_by_size"), d, c.optimizer_by_size);
      }
      lr.number("attention_gflops", c.attention_gflops, kLimits.gflops);
      lr.number("attention_backward_gflops", c.attention_backward_gflops, kLimits.gflops);
      if (lr.has("attention_precision")) {
        Precision p = Precision::fp32;
        lr.choice("attention_precision", p, kPrecisionNames);
        c.attention_precision = p;
      }
      lr.finish();
    }
    er.number("overlap_slowdown", g.efficiency.overlap_slowdown, kLimits.factor);
    er.number("core_share", g.efficiency.core_share, kLimits.efficiency);
    er.integer("blas_threads", g.efficiency.blas_threads, Range::between(0, 4096));
    er.number("collective_core_share", g.efficiency.collective_core_share, kLimits.efficiency);
    er.number("shared_wait_in_transfer", g.efficiency.shared_wait_in_transfer, Range::between(0, 1));
    er.number("shared_wait_in_tp_transfer", g.efficiency.shared_wait_in_tp_transfer,
              Range::between(0, 1));
    er.finish();
  }
  r.text_list("device_names", g.device_names);
  r.text("board_link", g.board_link);
  scaled(r, "host_link_gbps", g.host_link_bandwidth, kGbitToBytes, kLimits.link_gbps_or_0, false);
  r.text("source", g.source);
  r.finish();
}

void read_link(const json& j, const std::string& ptr, Diagnostics& d, Link& l) {
  ObjectReader r(j, ptr, d);
  if (!r.is_object()) return;
  check_kind(r, DocumentKind::link);
  r.name("name", l.name);
  read_display_name(r, l.display_name, l.name);
  r.choice("type", l.kind, kLinkKindNames, true);
  scaled(r, "bandwidth_gbps", l.bandwidth, kGbitToBytes, kLimits.link_gbps, true);
  scaled(r, "latency_us", l.latency, kMicro, kLimits.microseconds, true);
  r.number("efficiency", l.efficiency, kLimits.efficiency);
  scaled(r, "cold_bandwidth_gbps", l.cold_bandwidth, kGbitToBytes, kLimits.link_gbps_or_0, false);
  scaled(r, "cold_latency_us", l.cold_latency, kMicro, kLimits.microseconds, false);
  if (const json* sizes = r.field("cold_by_size", false))
    read_link_by_size(*sizes, r.pointer("cold_by_size"), d, l.cold_by_size);
  r.text("source", l.source);
  r.finish();
}

// A field that is either a preset name (string) or an inline object.
template <class T, class ReadInline, class Find>
void preset_or_inline(ObjectReader& r, std::string_view key, bool required, T& out,
                      const PresetCatalog* catalog, std::string_view what,
                      const std::vector<std::string>& names, ReadInline read_inline, Find find) {
  const json* v = r.field(key, required);
  if (!v) return;
  const std::string ptr = r.pointer(key);
  if (v->is_string()) {
    const std::string name = v->get<std::string>();
    if (!catalog) {
      // A project, say, holds its GPUs and links whole: it opens the same
      // wherever the presets differ.
      r.diagnostics().add(ptr, "names the preset \"" + cut_for_message(name) +
                                   "\", but this document must give it whole (an object), not "
                                   "by a preset's name");
    } else if (const T* found = find(name)) {
      out = *found;
    } else {
      r.diagnostics().add(ptr, catalog->unknown_name_message(what, name, names));
    }
  } else {
    read_inline(*v, ptr, r.diagnostics(), out);
  }
}

void read_cluster(const json& j, const std::string& ptr, Diagnostics& d, Cluster& c,
                  const PresetCatalog* catalog) {
  ObjectReader r(j, ptr, d);
  if (!r.is_object()) return;
  check_kind(r, DocumentKind::cluster);
  r.name("name", c.name);
  read_display_name(r, c.display_name, c.name);
  r.integer("nodes", c.nodes, Range::between(1, Cluster::kMaxNodes), true);
  r.integer("gpus_per_node", c.gpus_per_node, Range::between(0, Cluster::kMaxGpusPerNode), true);

  // A count refused above (out of range) still says the nodes have GPUs:
  // their "gpu" is read, not refused as well.
  const nlohmann::json* gpus_per_node = r.field("gpus_per_node");
  const bool has_gpus = c.gpus_per_node > 0 || (gpus_per_node && gpus_per_node->is_number() &&
                                                gpus_per_node->get<double>() > 0);
  const std::vector<std::string> no_names;
  if (has_gpus) {
    GpuSpec gpu;
    preset_or_inline(
        r, "gpu", true, gpu, catalog, "GPU preset", catalog ? catalog->gpu_names() : no_names,
        read_gpu, [&](const std::string& n) { return catalog->find_gpu(n); });
    c.gpu = gpu;
  } else if (r.field("gpu")) {
    d.add(r.pointer("gpu"), "must be absent when gpus_per_node is 0");
  }

  const auto link_names = catalog ? catalog->link_names() : no_names;
  auto find_link = [&](const std::string& n) { return catalog->find_link(n); };
  preset_or_inline(r, "intra_node", c.gpus_per_node > 1, c.intra_node, catalog, "link preset",
                   link_names, read_link, find_link);
  if (r.has("inter_node") || c.nodes > 1) {
    Link inter;
    preset_or_inline(r, "inter_node", c.nodes > 1, inter, catalog, "link preset", link_names,
                     read_link, find_link);
    c.inter_node = inter;
    c.nics_per_node = c.gpus_per_node > 0 ? c.gpus_per_node : 1;  // one NIC per GPU (DGX)
  } else {
    r.field("inter_node");
  }
  r.integer("nics_per_node", c.nics_per_node,
            Range::between(c.inter_node ? 1 : 0, Cluster::kMaxNicsPerNode));
  r.number("price_per_gpu_hour", c.price_per_gpu_hour, kLimits.price);
  r.number("power_per_gpu_watts", c.power_per_gpu_watts, kLimits.watts);
  r.integer("cpu_cores_per_node", c.cpu_cores_per_node, Range::between(0, 1 << 20));
  scaled(r, "host_memory_gib", c.host_memory_bytes, kGiB, Range::between(0, 1e9));
  r.text("source", c.source);
  r.finish();
}

void read_workload(const json& j, const std::string& ptr, Diagnostics& d, Workload& w) {
  ObjectReader r(j, ptr, d);
  if (!r.is_object()) return;
  check_kind(r, DocumentKind::workload);
  r.name("name", w.name);
  read_display_name(r, w.display_name, w.name);
  r.choice("type", w.kind, kWorkloadKindNames);
  r.choice("optimizer", w.optimizer, kOptimizerNames);
  r.text("source", w.source);

  if (w.kind == WorkloadKind::transformer) {
    TransformerShape& s = w.transformer;
    r.integer("layers", s.layers, Range::between(1, kMaxLayers), true);
    r.integer("hidden", s.hidden, Range::between(1, kMaxWidth), true);
    r.integer("heads", s.heads, Range::between(1, kMaxWidth), true);
    s.kv_heads = s.heads;
    r.integer("kv_heads", s.kv_heads, Range::between(1, kMaxWidth));
    r.boolean("gated_mlp", s.gated_mlp);
    s.ffn_hidden = 4 * s.hidden;
    r.integer("ffn_hidden", s.ffn_hidden, Range::between(1, kMaxLength), s.gated_mlp);
    r.integer("seq_len", s.seq_len, Range::between(1, kMaxLength), true);
    r.integer("vocab", s.vocab, Range::between(1, kMaxLength), true);
    r.boolean("tied_embeddings", s.tied_embeddings);
    r.boolean("bias", s.bias);
    r.boolean("dropout", s.dropout);
    r.choice("norm", s.norm, kNormNames);
    r.choice("positions", s.positions, kPositionNames);
    scaled(r, "training_tokens", w.training_tokens, 1.0, kLimits.tokens);
    if (s.heads > 0 && s.hidden > 0 && s.hidden % s.heads != 0) {
      d.add(r.pointer("hidden"), "must be divisible by heads (" + std::to_string(s.heads) + ")");
    }
    if (s.kv_heads > 0 && s.heads % s.kv_heads != 0) {
      d.add(r.pointer("kv_heads"), "must divide heads (" + std::to_string(s.heads) + ")");
    }
  } else {
    GenericModel& g = w.generic;
    r.number("parameters", g.parameters, kLimits.parameters, true);
    r.number("forward_flops_per_sample", g.forward_flops_per_sample, Range::between(1, 1e21), true);
    r.number("activation_bytes_per_sample", g.activation_bytes_per_sample, Range::between(0, 1e18));
    r.integer("weight_layers", g.weight_layers, Range::between(0, kMaxLength));
    r.text("input", g.input);
    r.number("dataset_samples", w.dataset_samples, kLimits.samples);
    r.number("epochs", w.epochs, Range::between(1e-6, 1e6));
  }
  r.finish();
}

// The dp that fills `gpus` with what tp x pp leave of them; 1 where they do
// not divide (or there are no GPUs).
int filling_dp(std::int64_t gpus, int tp, int pp) {
  const std::int64_t model_parallel = std::int64_t{std::max(tp, 1)} * std::max(pp, 1);
  return gpus >= model_parallel && gpus % model_parallel == 0
             ? static_cast<int>(gpus / model_parallel)
             : 1;
}

// fill_gpus > 0: a plan's cluster has that many GPUs, and dp left out fills them.
void read_parallel(const json& j, const std::string& ptr, Diagnostics& d, ParallelPlan& p,
                   ParallelRules rules = ParallelRules::check, std::int64_t fill_gpus = 0) {
  ObjectReader r(j, ptr, d);
  if (!r.is_object()) return;
  const std::size_t problems_before = d.problems().size();
  check_kind(r, DocumentKind::parallel_plan);
  r.integer("dp", p.dp, Range::at_least(1));
  r.integer("tp", p.tp, Range::at_least(1));
  r.integer("pp", p.pp, Range::at_least(1));
  // Before the default global batch, which counts dp, and the rules.
  if (fill_gpus > 0 && !r.has("dp")) p.dp = filling_dp(fill_gpus, p.tp, p.pp);
  r.integer("virtual_stages", p.virtual_stages, Range::between(1, kMaxLayers));
  r.boolean("sequence_parallel", p.sequence_parallel);
  r.integer("zero_stage", p.zero_stage, Range::between(0, 3));
  r.integer("micro_batch", p.micro_batch, Range::at_least(1));
  const bool has_global = r.has("global_batch");
  const bool has_accumulation = r.has("gradient_accumulation");
  int accumulation = 1;
  r.integer("gradient_accumulation", accumulation, Range::at_least(1));
  if (has_global) {
    r.integer("global_batch", p.global_batch, Range::at_least(1));
  } else {
    r.field("global_batch");
    const std::int64_t global = accumulation * p.samples_per_micro_step();
    if (global > std::numeric_limits<int>::max()) {
      d.add(r.pointer("global_batch"), "gradient_accumulation x dp x micro_batch = " +
                                           std::to_string(global) + ": more than " +
                                           std::to_string(std::numeric_limits<int>::max()));
    } else {
      p.global_batch = static_cast<int>(global);
    }
  }
  if (has_global && has_accumulation && p.gradient_accumulation() != accumulation) {
    const std::int64_t per_step = p.samples_per_micro_step();
    if (per_step > 0 && p.global_batch % per_step == 0) {
      d.add(r.pointer("gradient_accumulation"), "must equal global_batch / (dp x micro_batch) = " +
                                                    std::to_string(p.gradient_accumulation()));
    } else {
      // No accumulation would do (DeepSpeed's train_batch_size = micro
      // batch x accumulation x dp): the rule at the global batch, with
      // the figure these give. It read "= 0", the quotient cut to an int.
      d.add(r.pointer("global_batch"),
            "must equal dp x micro_batch x gradient_accumulation = " + std::to_string(p.dp) +
                " x " + std::to_string(p.micro_batch) + " x " + std::to_string(accumulation) +
                " = " + std::to_string(per_step * accumulation) + " (got " +
                std::to_string(p.global_batch) + ")");
    }
  }
  if (r.has("virtual_stages") && p.virtual_stages > 1 && !r.has("schedule")) {
    p.schedule = PipelineSchedule::interleaved;
  }
  r.choice("recompute", p.recompute, kRecomputeNames);
  r.choice("schedule", p.schedule, kScheduleNames);
  r.boolean("flash_attention", p.flash_attention);
  r.boolean("async_tp_allreduce", p.async_tp_allreduce);
  r.boolean("vocab_parallel", p.vocab_parallel);
  r.boolean("fp32_attention_scores", p.fp32_attention_scores);
  r.boolean("overlap_grad_reduce", p.overlap_grad_reduce);
  r.number("bucket_mib", p.bucket_mib, Range::between(1.0 / 1024, 1 << 20));
  r.finish();
  // A value refused above was left at its default: the relations between
  // them would be about the default (a global batch past 32 bits also read
  // "must be a multiple of dp x micro_batch = 2 (got 1)").
  const bool read_whole = d.problems().size() == problems_before;
  const std::vector<Problem> problems = rules == ParallelRules::check && read_whole
                                            ? check_parallel_plan(p)
                                            : check_parallel_degrees(p);
  for (const Problem& problem : problems) d.add(ptr + problem.pointer, problem.message);
}

void read_precision(const json& j, const std::string& ptr, Diagnostics& d, PrecisionPlan& p) {
  if (j.is_string()) {  // "bf16": the usual plan for that compute type
    if (auto c = kPrecisionNames.parse(j.get<std::string>())) {
      p = PrecisionPlan::for_compute(*c);
    } else {
      d.add(ptr, "must be one of " + kPrecisionNames.choices());
    }
    return;
  }
  ObjectReader r(j, ptr, d);
  if (!r.is_object()) return;
  check_kind(r, DocumentKind::precision_plan);
  Precision compute = p.compute;
  r.choice("compute", compute, kPrecisionNames);
  p = PrecisionPlan::for_compute(compute);
  r.choice("weights", p.weights, kPrecisionNames);
  r.boolean("master_weights", p.master_weights);
  r.choice("gradients", p.gradients, kPrecisionNames);
  r.boolean("fp32_main_grad", p.fp32_main_grad);
  r.choice("optimizer_state", p.optimizer_state, kPrecisionNames);
  r.choice("loss_scaling", p.loss_scaling, kLossScalingNames);
  r.number("initial_loss_scale", p.initial_loss_scale, kLimits.loss_scale);
  r.boolean("inference", p.inference);
  if (const json* f = r.field("fp8")) {
    if (compute != Precision::fp8) d.add(r.pointer("fp8"), "applies only when compute is fp8");
    ObjectReader fr(*f, r.pointer("fp8"), d);
    fr.choice("format", p.fp8.format, kFp8FormatNames);
    fr.choice("recipe", p.fp8.recipe, kFp8RecipeNames);
    fr.integer("amax_history", p.fp8.amax_history, Range::at_least(1));
    fr.boolean("saved_inputs_fp8", p.fp8.saved_inputs_fp8);
    fr.boolean("backward_fp8", p.fp8.backward_fp8);
    fr.finish();
  }
  const bool integer_weights = p.weights == Precision::int8 || p.weights == Precision::int4;
  if (const json* q = r.field("quantization")) {
    if (!integer_weights) d.add(r.pointer("quantization"), "applies only to int8 or int4 weights");
    ObjectReader qr(*q, r.pointer("quantization"), d);
    qr.boolean("symmetric", p.quant.symmetric);
    qr.boolean("per_channel", p.quant.per_channel);
    qr.finish();
  }
  r.finish();
  if ((compute == Precision::int8 || compute == Precision::int4) && !p.inference) {
    d.add(r.pointer("inference"), "must be true: int8 and int4 plans are for inference only");
  }
  if (integer_weights && !p.inference) {
    d.add(r.pointer("weights"), "int8 or int4 weights need \"inference\": true");
  }
}

void read_plan(const json& j, const std::string& ptr, Diagnostics& d, Plan& plan,
               const PresetCatalog* catalog, ParallelRules rules = ParallelRules::check) {
  ObjectReader r(j, ptr, d);
  if (!r.is_object()) return;
  check_kind(r, DocumentKind::plan);
  const std::vector<std::string> no_names;
  if (const json* c = r.field("cluster", true)) {
    if (c->is_string()) {
      if (!catalog) {
        d.add(r.pointer("cluster"),
              "names a preset, but this document must give the cluster whole (an object), not "
              "by a preset's name");
      } else if (auto cl = catalog->cluster(c->get<std::string>())) {
        plan.cluster = std::move(cl).value();
      } else {
        d.add(r.pointer("cluster"), cl.message());
      }
    } else {
      read_cluster(*c, r.pointer("cluster"), d, plan.cluster, catalog);
    }
  }
  preset_or_inline(
      r, "workload", true, plan.workload, catalog, "model preset",
      catalog ? catalog->model_names() : no_names, read_workload,
      [&](const std::string& n) { return catalog->find_model(n); });
  // dp left out fills the cluster with what tp x pp leave of its GPUs, as
  // `clusterscope plan` does without --dp (it planned 1 of 8 GPUs).
  if (const json* p = r.field("parallel")) {
    read_parallel(*p, r.pointer("parallel"), d, plan.parallel, rules, plan.cluster.total_gpus());
  } else {
    // No parallel section: one micro-batch a replica, as the section's own default.
    plan.parallel.dp = filling_dp(plan.cluster.total_gpus(), plan.parallel.tp, plan.parallel.pp);
    plan.parallel.global_batch = static_cast<int>(plan.parallel.samples_per_micro_step());
  }
  if (const json* p = r.field("precision")) {
    read_precision(*p, r.pointer("precision"), d, plan.precision);
  }
  r.finish();
}

template <class T, class Read>
Result<T> read_document(const json& j, std::string_view document, Read read,
                        const std::string& root = {}) {
  Diagnostics d;
  T value{};
  read(j, root, d, value);
  if (!d.empty()) return d.to_error(document);
  return value;
}

json peak_json(const PeakRates& p) {
  return {{"fp32", p.fp32 / kTera}, {"tf32", p.tf32 / kTera}, {"bf16", p.bf16 / kTera},
          {"fp16", p.fp16 / kTera}, {"fp8", p.fp8 / kTera},   {"int8", p.int8 / kTera}};
}

}  // namespace

const Range& training_tokens_range() {
  return kLimits.tokens;
}

const Range& price_per_gpu_hour_range() {
  return kLimits.price;
}

std::string_view to_string(DocumentKind kind) { return kDocumentKindNames.name(kind); }

Result<GpuSpec> gpu_from_json(const json& j, std::string_view document) {
  return read_document<GpuSpec>(j, document, read_gpu);
}
Result<Link> link_from_json(const json& j, std::string_view document) {
  return read_document<Link>(j, document, read_link);
}
Result<Cluster> cluster_from_json(const json& j, std::string_view document,
                                  const PresetCatalog* catalog) {
  return read_document<Cluster>(j, document, [&](const json& v, const std::string& p,
                                                 Diagnostics& d, Cluster& c) {
    read_cluster(v, p, d, c, catalog);
  });
}
Result<Workload> workload_from_json(const json& j, std::string_view document) {
  return read_document<Workload>(j, document, read_workload);
}
Result<ParallelPlan> parallel_plan_from_json(const json& j, std::string_view document,
                                             ParallelRules rules) {
  return read_document<ParallelPlan>(
      j, document,
      [rules](const json& v, const std::string& p, Diagnostics& d, ParallelPlan& out) {
        read_parallel(v, p, d, out, rules);
      });
}
Result<PrecisionPlan> precision_plan_from_json(const json& j, std::string_view document) {
  return read_document<PrecisionPlan>(j, document, read_precision);
}
Result<Plan> plan_from_json(const json& j, std::string_view document,
                            const PresetCatalog* catalog, ParallelRules rules) {
  return read_document<Plan>(j, document, [&](const json& v, const std::string& p,
                                              Diagnostics& d, Plan& plan) {
    read_plan(v, p, d, plan, catalog, rules);
  });
}

std::vector<Problem> check_parallel_degrees(const ParallelPlan& p) {
  std::vector<Problem> problems;
  if (p.dp < 1) problems.push_back({"/dp", "must be >= 1"});
  if (p.tp < 1) problems.push_back({"/tp", "must be >= 1"});
  if (p.pp < 1) problems.push_back({"/pp", "must be >= 1"});
  if (p.micro_batch < 1) problems.push_back({"/micro_batch", "must be >= 1"});
  if (p.zero_stage < 0 || p.zero_stage > 3) {
    problems.push_back({"/zero_stage", "must be between 0 and 3"});
  }
  if (p.virtual_stages < 1) problems.push_back({"/virtual_stages", "must be >= 1"});
  return problems;
}

std::vector<Problem> check_parallel_plan(const ParallelPlan& p) {
  std::vector<Problem> problems = check_parallel_degrees(p);
  if (!problems.empty()) return problems;  // the relations below assume sane degrees

  const std::int64_t per_step = p.samples_per_micro_step();
  if (p.global_batch < per_step || p.global_batch % per_step != 0) {
    problems.push_back({"/global_batch", "must be a multiple of dp x micro_batch = " +
                                             std::to_string(per_step) + " (got " +
                                             std::to_string(p.global_batch) + ")"});
  }
  if (p.schedule == PipelineSchedule::interleaved) {
    // At the chunks where they ask for this schedule (virtual_stages > 1,
    // or --virtual-stages): "/schedule" named a key such a plan does not have.
    if (p.pp < 2 && p.virtual_stages > 1) {
      problems.push_back({"/virtual_stages", "the interleaved schedule (" +
                                                 std::to_string(p.virtual_stages) +
                                                 " chunks per pipeline rank) needs pp >= 2 (got " +
                                                 std::to_string(p.pp) + ")"});
    } else if (p.pp < 2) {
      problems.push_back({"/schedule", "interleaved needs pp >= 2"});
    }
    if (p.virtual_stages < 2) {
      problems.push_back({"/virtual_stages", "must be >= 2 for the interleaved schedule"});
    }
  } else if (p.virtual_stages > 1) {
    problems.push_back({"/virtual_stages", "must be 1 unless the schedule is interleaved"});
  }
  if (p.sequence_parallel && p.tp < 2) {
    problems.push_back({"/sequence_parallel", "needs tp >= 2 (it splits the tensor-parallel group's "
                                              "layer norms and dropouts)"});
  }
  if (!(p.bucket_mib > 0)) problems.push_back({"/bucket_mib", "must be > 0"});
  return problems;
}

json to_json(const GpuSpec& g) {
  json j = {{"kind", "gpu"},
            {"name", g.name},
            {"display_name", g.display_name},
            {"vendor", g.vendor},
            {"architecture", g.architecture},
            {"memory_gib", g.memory_bytes / kGiB},
            {"memory_bandwidth_gb_s", g.memory_bandwidth / kGB},
            {"peak_tflops", peak_json(g.peak)},
            {"tdp_watts", g.tdp_watts},
            {"efficiency",
             {{"gemm_max", g.efficiency.gemm_max},
              {"gemm_half_gflop", g.efficiency.gemm_half_gflop},
              {"memory_max", g.efficiency.memory_max},
              {"kernel_launch_us", g.efficiency.kernel_launch_us}}},
            {"device_names", g.device_names},
            {"board_link", g.board_link},
            {"source", g.source}};
  // The optional refinements only when set, so datasheet presets read as before.
  const GpuEfficiency& e = g.efficiency;
  json& ej = j["efficiency"];
  const PeakRates& by = e.gemm_max_by_precision;
  if (by.fp32 > 0 || by.tf32 > 0 || by.bf16 > 0 || by.fp16 > 0 || by.fp8 > 0 || by.int8 > 0) {
    json f = json::object();
    for (auto [key, value] :
         {std::pair{"fp32", by.fp32}, std::pair{"tf32", by.tf32}, std::pair{"bf16", by.bf16},
          std::pair{"fp16", by.fp16}, std::pair{"fp8", by.fp8}, std::pair{"int8", by.int8}}) {
      if (value > 0) f[key] = value;
    }
    ej["gemm_max_by_precision"] = f;
  }
  if (g.host_link_bandwidth > 0) j["host_link_gbps"] = g.host_link_bandwidth / kGbitToBytes;
  if (e.gemm_memory_overlap > 0) ej["gemm_memory_overlap"] = e.gemm_memory_overlap;
  if (e.host_dispatch_us != GpuEfficiency{}.host_dispatch_us)
    ej["host_dispatch_us"] = e.host_dispatch_us;
  if (e.loops.any()) {
    const LoopCosts& c = e.loops;
    ej["loops"] = {{"norm_ns", c.norm_ns},
                   {"norm_backward_ns", c.norm_backward_ns},
                   {"activation_ns", c.activation_ns},
                   {"activation_backward_ns", c.activation_backward_ns},
                   {"elementwise_ns", c.elementwise_ns},
                   {"softmax_ns", c.softmax_ns},
                   {"optimizer_ns", c.optimizer_ns},
                   {"attention_gflops", c.attention_gflops},
                   {"attention_backward_gflops", c.attention_backward_gflops}};
    if (c.attention_precision)
      ej["loops"]["attention_precision"] = to_string(*c.attention_precision);
    if (!c.optimizer_by_size.empty()) {
      json sizes = json::array();
      for (const OptimizerPoint& point : c.optimizer_by_size)
        sizes.push_back({{"parameters", point.parameters}, {"ns", point.ns}});
      ej["loops"]["optimizer_by_size"] = sizes;
    }
  }
  if (e.overlap_slowdown > 0) ej["overlap_slowdown"] = e.overlap_slowdown;
  if (e.core_share < 1) ej["core_share"] = e.core_share;
  if (e.blas_threads > 0) ej["blas_threads"] = e.blas_threads;
  if (e.collective_core_share > 0) ej["collective_core_share"] = e.collective_core_share;
  if (e.shared_wait_in_transfer > 0) ej["shared_wait_in_transfer"] = e.shared_wait_in_transfer;
  if (e.shared_wait_in_tp_transfer > 0)
    ej["shared_wait_in_tp_transfer"] = e.shared_wait_in_tp_transfer;
  return j;
}

json to_json(const Link& l) {
  json j = {{"kind", "link"},
            {"name", l.name},
            {"display_name", l.display_name},
            {"type", to_string(l.kind)},
            {"bandwidth_gbps", l.bandwidth / kGbitToBytes},
            {"latency_us", l.latency / kMicro},
            {"efficiency", l.efficiency},
            {"source", l.source}};
  if (l.cold_bandwidth > 0) {
    j["cold_bandwidth_gbps"] = l.cold_bandwidth / kGbitToBytes;
    j["cold_latency_us"] = l.cold_latency / kMicro;
  }
  if (!l.cold_by_size.empty()) {
    json sizes = json::array();
    for (const LinkPoint& point : l.cold_by_size)
      sizes.push_back({{"bytes", point.bytes}, {"bandwidth_gbps", point.bandwidth / kGbitToBytes}});
    j["cold_by_size"] = sizes;
  }
  return j;
}

json to_json(const Cluster& c) {
  json j = {{"kind", "cluster"},
            {"name", c.name},
            {"display_name", c.display_name},
            {"nodes", c.nodes},
            {"gpus_per_node", c.gpus_per_node},
            {"nics_per_node", c.nics_per_node},
            {"price_per_gpu_hour", c.price_per_gpu_hour},
            {"power_per_gpu_watts", c.power_per_gpu_watts},
            {"cpu_cores_per_node", c.cpu_cores_per_node},
            {"host_memory_gib", c.host_memory_bytes / kGiB},
            {"source", c.source}};
  if (c.gpu) j["gpu"] = to_json(*c.gpu);
  if (!c.intra_node.name.empty()) j["intra_node"] = to_json(c.intra_node);
  if (c.inter_node) j["inter_node"] = to_json(*c.inter_node);
  return j;
}

json to_json(const Workload& w) {
  json j = {{"kind", "workload"},
            {"name", w.name},
            {"display_name", w.display_name},
            {"type", kWorkloadKindNames.name(w.kind)},
            {"optimizer", to_string(w.optimizer)},
            {"source", w.source}};
  if (w.kind == WorkloadKind::transformer) {
    const TransformerShape& s = w.transformer;
    j.update({{"layers", s.layers},
              {"hidden", s.hidden},
              {"heads", s.heads},
              {"kv_heads", s.kv_heads},
              {"ffn_hidden", s.ffn_hidden},
              {"gated_mlp", s.gated_mlp},
              {"seq_len", s.seq_len},
              {"vocab", s.vocab},
              {"tied_embeddings", s.tied_embeddings},
              {"bias", s.bias},
              {"dropout", s.dropout},
              {"norm", to_string(s.norm)},
              {"positions", to_string(s.positions)},
              {"training_tokens", w.training_tokens}});
  } else {
    const GenericModel& g = w.generic;
    j.update({{"parameters", g.parameters},
              {"forward_flops_per_sample", g.forward_flops_per_sample},
              {"activation_bytes_per_sample", g.activation_bytes_per_sample},
              {"weight_layers", g.weight_layers},
              {"input", g.input},
              {"dataset_samples", w.dataset_samples},
              {"epochs", w.epochs}});
  }
  return j;
}

json to_json(const ParallelPlan& p) {
  json j = {{"kind", "parallel_plan"},
          {"dp", p.dp},
          {"tp", p.tp},
          {"pp", p.pp},
          {"virtual_stages", p.virtual_stages},
          {"sequence_parallel", p.sequence_parallel},
          {"zero_stage", p.zero_stage},
          {"micro_batch", p.micro_batch},
          {"global_batch", p.global_batch},
          {"recompute", to_string(p.recompute)},
          {"schedule", to_string(p.schedule)},
          {"flash_attention", p.flash_attention},
          {"bucket_mib", p.bucket_mib}};
  if (!p.async_tp_allreduce) j["async_tp_allreduce"] = false;
  if (!p.vocab_parallel) j["vocab_parallel"] = false;
  if (p.fp32_attention_scores) j["fp32_attention_scores"] = true;
  if (!p.overlap_grad_reduce) j["overlap_grad_reduce"] = false;
  return j;
}

json to_json(const PrecisionPlan& p) {
  json j = {{"kind", "precision_plan"},
            {"compute", to_string(p.compute)},
            {"weights", to_string(p.weights)},
            {"master_weights", p.master_weights},
            {"gradients", to_string(p.gradients)},
            {"fp32_main_grad", p.fp32_main_grad},
            {"optimizer_state", to_string(p.optimizer_state)},
            {"loss_scaling", to_string(p.loss_scaling)},
            {"initial_loss_scale", p.initial_loss_scale},
            {"inference", p.inference}};
  if (p.compute == Precision::fp8) {
    j["fp8"] = {{"format", to_string(p.fp8.format)},
                {"recipe", to_string(p.fp8.recipe)},
                {"amax_history", p.fp8.amax_history},
                {"saved_inputs_fp8", p.fp8.saved_inputs_fp8},
                {"backward_fp8", p.fp8.backward_fp8}};
  }
  if (p.weights == Precision::int8 || p.weights == Precision::int4) {
    j["quantization"] = {{"symmetric", p.quant.symmetric}, {"per_channel", p.quant.per_channel}};
  }
  return j;
}

json to_json(const Plan& p) {
  json parallel = to_json(p.parallel);
  parallel.erase("kind");
  json precision = to_json(p.precision);
  precision.erase("kind");
  json cluster = to_json(p.cluster);
  cluster.erase("kind");
  json workload = to_json(p.workload);
  workload.erase("kind");
  return {{"kind", "plan"},
          {"cluster", cluster},
          {"workload", workload},
          {"parallel", parallel},
          {"precision", precision}};
}

namespace {
Result<DocumentKind> detect_kind_at(const json& j, std::string_view document,
                                    const std::string& root) {
  const std::string where = std::string(document) + ": " + (root.empty() ? "/" : root) + ": ";
  if (!j.is_object()) return Error{where + "must be an object"};
  if (auto k = j.find("kind"); k != j.end()) {
    if (k->is_string()) {
      if (auto kind = kDocumentKindNames.parse(k->get<std::string>())) return *kind;
    }
    return Error{std::string(document) + ": " + root + "/kind: must be one of " +
                 kDocumentKindNames.choices()};
  }
  auto has = [&](const char* key) { return j.contains(key); };
  if (has("parallel") || (has("cluster") && has("workload"))) return DocumentKind::plan;
  if (has("gpus_per_node") || has("nodes")) return DocumentKind::cluster;
  if (has("peak_tflops") || has("memory_gib")) return DocumentKind::gpu;
  if (has("bandwidth_gbps") || has("latency_us")) return DocumentKind::link;
  if (has("layers") || has("hidden") || has("parameters")) return DocumentKind::workload;
  if (has("compute") || has("master_weights") || has("loss_scaling")) {
    return DocumentKind::precision_plan;
  }
  if (has("dp") || has("tp") || has("pp") || has("micro_batch") || has("global_batch") ||
      has("zero_stage")) {
    return DocumentKind::parallel_plan;
  }
  return Error{where + "cannot tell what this document is; add \"kind\": one of " +
               kDocumentKindNames.choices()};
}

// AnyDocument's alternatives follow DocumentKind's order.
Result<AnyDocument> read_any(const json& j, std::string_view document,
                             const PresetCatalog* catalog, const std::string& root) {
  auto kind = detect_kind_at(j, document, root);
  if (!kind) return kind.error();
  auto wrap = [](auto result) -> Result<AnyDocument> {
    if (!result) return result.error();
    return AnyDocument(std::move(result).value());
  };
  auto with_catalog = [&](auto read) {
    return [read, catalog](const json& v, const std::string& p, Diagnostics& d, auto& out) {
      read(v, p, d, out, catalog);
    };
  };
  switch (*kind) {
    case DocumentKind::gpu: return wrap(read_document<GpuSpec>(j, document, read_gpu, root));
    case DocumentKind::link: return wrap(read_document<Link>(j, document, read_link, root));
    case DocumentKind::cluster:
      return wrap(read_document<Cluster>(j, document, with_catalog(read_cluster), root));
    case DocumentKind::workload:
      return wrap(read_document<Workload>(j, document, read_workload, root));
    case DocumentKind::parallel_plan:
      return wrap(read_document<ParallelPlan>(
          j, document,
          [](const json& v, const std::string& p, Diagnostics& d, ParallelPlan& out) {
            read_parallel(v, p, d, out);
          },
          root));
    case DocumentKind::precision_plan:
      return wrap(read_document<PrecisionPlan>(j, document, read_precision, root));
    case DocumentKind::plan:
      return wrap(read_document<Plan>(
          j, document,
          [catalog](const json& v, const std::string& p, Diagnostics& d, Plan& out) {
            read_plan(v, p, d, out, catalog);
          },
          root));
  }
  return Error{std::string(document) + ": unknown document kind"};
}
}  // namespace

Result<DocumentKind> detect_kind(const json& j, std::string_view document) {
  return detect_kind_at(j, document, {});
}

Result<AnyDocument> document_from_json(const json& j, std::string_view document,
                                       const PresetCatalog* catalog) {
  return read_any(j, document, catalog, {});
}

Result<std::vector<DocumentKind>> validate_file(const std::string& path,
                                                const PresetCatalog* catalog) {
  auto j = read_json_file(path);
  if (!j) return j.error();
  return validate_json(*j, path, catalog);
}

Result<std::vector<DocumentKind>> validate_json(const json& document, const std::string& path,
                                                const PresetCatalog* catalog) {
  const json* j = &document;
  std::vector<DocumentKind> kinds;
  std::string errors;
  // The first documents' problems, then a count: a list of millions of
  // invalid entries printed each one (20 GB for a 120 MB file).
  constexpr std::size_t kDocumentsReported = 20;
  std::size_t invalid = 0;
  auto check = [&](const json& doc, const std::string& root) {
    auto parsed = read_any(doc, path, catalog, root);
    if (parsed) {
      kinds.push_back(static_cast<DocumentKind>(parsed->index()));
    } else if (++invalid <= kDocumentsReported) {
      if (!errors.empty()) errors += '\n';
      errors += parsed.message();
    }
  };
  if (j->is_array()) {
    if (j->empty()) return Error{path + ": /: the list holds no documents"};
    for (std::size_t i = 0; i < j->size(); ++i) check((*j)[i], "/" + std::to_string(i));
  } else {
    check(*j, {});
  }
  if (invalid > kDocumentsReported) {
    errors += "\n" + path + ": ... and " + std::to_string(invalid - kDocumentsReported) +
              " more invalid documents of the list (" + std::to_string(invalid) + " of " +
              std::to_string(j->size()) + ")";
  }
  if (!errors.empty()) return Error{errors};
  return kinds;
}

Status write_json_file(const std::string& path, const json& j) {
  FileBeside file(path);
  {
    std::ofstream out(file.writing(),
                      std::ios::binary | (file.stream() ? std::ios::app : std::ios::trunc));
    if (!out) {
      return Error{path + ": cannot write (cannot create " + file.writing() +
                   ": " + std::strerror(errno) + ")"};
    }
    out << json_text(j, 2) << '\n';
    out.close();
    if (!out) return Error{path + ": cannot write (disk full?)"};
  }
  return file.commit();
}

namespace {

// Reads `path` into `j`: a file of one document of kind `wanted`, or a plan.
Result<DocumentKind> read_part_document(const std::string& path, DocumentKind wanted, json& j) {
  const std::string noun(to_string(wanted));
  auto read = read_json_file(path);
  if (!read) return read.error();
  j = std::move(read).value();
  if (j.is_array()) {
    return Error{path + ": a list of " + std::to_string(j.size()) +
                 " documents (a preset file?): open a file of one " + noun + ", or of one plan"};
  }
  auto kind = detect_kind(j, path);
  if (!kind) return kind.error();
  if (*kind != wanted && *kind != DocumentKind::plan) {
    return Error{path + ": a " + std::string(to_string(*kind)) + " document, not a " + noun +
                 " (nor a plan with one)"};
  }
  return *kind;
}

}  // namespace

Result<Cluster> cluster_from_file(const std::string& path, const PresetCatalog& catalog) {
  json j;
  auto kind = read_part_document(path, DocumentKind::cluster, j);
  if (!kind) return kind.error();
  if (*kind == DocumentKind::cluster) return cluster_from_json(j, path, &catalog);
  auto plan = plan_from_json(j, path, &catalog, ParallelRules::leave_to_caller);
  if (!plan) return plan.error();
  return plan->cluster;
}

Result<Workload> workload_from_file(const std::string& path, const PresetCatalog& catalog) {
  json j;
  auto kind = read_part_document(path, DocumentKind::workload, j);
  if (!kind) return kind.error();
  if (*kind == DocumentKind::workload) return workload_from_json(j, path);
  auto plan = plan_from_json(j, path, &catalog, ParallelRules::leave_to_caller);
  if (!plan) return plan.error();
  return plan->workload;
}

}  // namespace cs
