// clusterscope presets [gpus|links|models|clusters] [--json]

#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/context.h"
#include "app/cli/text_table.h"
#include "core/format.h"
#include "core/json_text.h"
#include "core/model_json.h"

namespace cs::cli {

namespace {

struct PresetsOptions {
  std::string what;
  bool json = false;
};

std::string tflops(double flops) { return flops > 0 ? format_fixed(flops / 1e12, 1) : "-"; }

void print_gpus(const PresetCatalog& c) {
  TextTable t({"name", "GPU", "memory", "mem BW", "FP32", "TF32", "BF16", "FP16", "FP8", "INT8",
               "TDP"});
  for (std::size_t i = 2; i <= 10; ++i) t.right_align(i);
  bool loop_device = false;
  for (const GpuSpec& g : c.gpus()) {
    // A CPU-engine preset's rate times GEMM operands only; 1e6 GB/s there
    // means none showed (docs/calibration.md), not a petabyte a second.
    const bool loops = g.efficiency.loops.any();
    loop_device = loop_device || loops;
    const std::string bandwidth =
        loops && g.memory_bandwidth >= 1e15
            ? "-"
            : format_rate(g.memory_bandwidth, "B/s") + (loops ? " *" : "");
    t.add({g.name, g.display_name, format_bytes(g.memory_bytes), bandwidth, tflops(g.peak.fp32),
           tflops(g.peak.tf32), tflops(g.peak.bf16), tflops(g.peak.fp16), tflops(g.peak.fp8),
           tflops(g.peak.int8), format_fixed(g.tdp_watts, 0) + " W"});
  }
  t.print(std::cout);
  std::cout << "Peak rates are dense TFLOP/s (TOP/s for INT8); - means no such path.\n";
  if (loop_device) {
    std::cout << "* CPU-engine presets: the rate their GEMMs' operands move at (- none showed); "
                 "their other work has its own costs per element.\n";
  }
}

void print_links(const PresetCatalog& c) {
  TextTable t({"name", "link", "type", "per direction", "latency", "efficiency"});
  for (std::size_t i = 3; i <= 5; ++i) t.right_align(i);
  for (const Link& l : c.links()) {
    t.add({l.name, l.display_name, std::string(to_string(l.kind)),
           format_rate(l.bandwidth * 8, "b/s") + " (" + format_rate(l.bandwidth, "B/s") + ")",
           format_seconds(l.latency), format_fixed(l.efficiency * 100, 0) + " %"});
  }
  t.print(std::cout);
}

void print_models(const PresetCatalog& c) {
  TextTable t({"name", "model", "parameters", "layers", "hidden", "heads", "kv", "ffn", "seq",
               "vocab"});
  for (std::size_t i = 2; i <= 9; ++i) t.right_align(i);
  for (const Workload& w : c.models()) {
    if (w.kind == WorkloadKind::transformer) {
      const TransformerShape& s = w.transformer;
      t.add({w.name, w.display_name, format_count(parameter_count(w)), std::to_string(s.layers),
             std::to_string(s.hidden), std::to_string(s.heads), std::to_string(s.kv_heads),
             std::to_string(s.ffn_hidden), std::to_string(s.seq_len), std::to_string(s.vocab)});
    } else {
      t.add({w.name, w.display_name, format_count(parameter_count(w)), "-", "-", "-", "-", "-",
             "-", "-"});
    }
  }
  t.print(std::cout);
}

void print_clusters(const PresetCatalog& c) {
  TextTable t({"name", "cluster", "nodes", "GPUs", "GPU", "inside a node", "between nodes"});
  t.right_align(2);
  t.right_align(3);
  for (const Cluster& cl : c.clusters()) {
    t.add({cl.name, cl.display_name, std::to_string(cl.nodes), std::to_string(cl.total_gpus()),
           cl.gpu ? cl.gpu->name : "none", cl.gpus_per_node > 1 ? cl.intra_node.name : "-",
           cl.inter_node ? std::to_string(cl.nics_per_node) + " x " + cl.inter_node->name : "-"});
  }
  t.add({std::string(kThisMachine), "This machine, detected when used", "1", "?", "?", "?", "-"});
  t.print(std::cout);
}

template <class T>
nlohmann::json json_list(const std::vector<T>& items) {
  nlohmann::json out = nlohmann::json::array();
  for (const T& item : items) out.push_back(to_json(item));
  return out;
}

void run(const PresetsOptions& o, Context& ctx) {
  const PresetCatalog& c = ctx.catalog_even_without_user_presets();
  const bool all = o.what.empty();
  if (o.json) {
    nlohmann::json j;
    if (all || o.what == "gpus") j["gpus"] = json_list(c.gpus());
    if (all || o.what == "links") j["links"] = json_list(c.links());
    if (all || o.what == "models") j["models"] = json_list(c.models());
    if (all || o.what == "clusters") {
      // As the text lists it (a script enumerating --cluster values missed
      // it): detected now, so that it reads as any cluster does.
      j["clusters"] = json_list(c.clusters());
      if (auto here = c.cluster(std::string(kThisMachine))) j["clusters"].push_back(to_json(*here));
    }
    // One kind asked for: the list itself.
    std::cout << json_text((all ? j : j.begin().value()), 2) << '\n';
    return;
  }
  auto section = [&](const char* title, auto print) {
    if (all) std::cout << title << '\n';
    print(c);
    if (all) std::cout << '\n';
  };
  if (all || o.what == "gpus") section("GPUs", print_gpus);
  if (all || o.what == "links") section("Links", print_links);
  if (all || o.what == "models") section("Models", print_models);
  if (all || o.what == "clusters") section("Clusters", print_clusters);
  if (!o.json) {
    std::cout << "Presets from " << c.directory().string() << "\n";
    // The user's own (calibrated, learnt) over them, where they come from.
    for (const std::filesystem::path& f : c.user_files()) {
      std::cout << "  and " << f.string();
      // Its GPU of a shipped name stands in every cluster of that GPU.
      const std::vector<std::string> replaced = c.replaced_by(f);
      for (std::size_t i = 0; i < replaced.size(); ++i)
        std::cout << (i == 0 ? ", in place of the shipped " : ", ") << replaced[i];
      std::cout << "\n";
    }
  }
}

}  // namespace

void register_presets(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<PresetsOptions>();
  CLI::App* cmd = app.add_subcommand("presets", "List the GPU, link, model and cluster presets");
  cmd->add_option("kind", o->what, "Which presets: gpus, links, models or clusters (default all)")
      ->check(CLI::IsMember({"gpus", "links", "models", "clusters"}));
  add_json_flag(*cmd, o->json);
  cmd->callback([o, &ctx] { run(*o, ctx); });
}

}  // namespace cs::cli
