// clusterscope describe CLUSTER [--gpu ... --nodes ... --gpus-per-node ...] [--json]

#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/text_table.h"
#include "core/format.h"
#include "core/json_text.h"
#include "core/model_json.h"

namespace cs::cli {

namespace {

struct DescribeOptions {
  ClusterOptions cluster;
  bool json = false;
};

nlohmann::json totals_json(const ClusterTotals& t, bool capped) {
  nlohmann::json peak;
  for (Precision p : kAllPrecisions) {
    if (p == Precision::int4) continue;
    peak[std::string(to_string(p))] = t.peak.of(p) / 1e12;
  }
  return {{"gpus", t.gpus},
          {"peak_tflops", peak},
          {"gpu_memory_bytes", t.gpu_memory_bytes},
          {"per_gpu_intra_node_bytes_per_s", t.per_gpu_intra_bandwidth},
          {"per_gpu_inter_node_bytes_per_s", t.per_gpu_inter_bandwidth},
          {"per_gpu_inter_node_capped_by_host_link", capped},
          {"bisection_bytes_per_s", t.bisection_bandwidth},
          {"power_watts", t.power_watts},
          {"price_per_hour_usd", t.price_per_hour}};
}

void print_text(const Cluster& c, const ClusterTotals& t) {
  if (c.display_name.empty() || c.display_name == c.name) {
    std::cout << c.name << '\n';
  } else {
    std::cout << c.display_name << " (" << c.name << ")\n";
  }
  if (!c.gpu) {
    std::cout << "  " << c.nodes << (c.nodes == 1 ? " node" : " nodes") << ", no GPU";
    if (c.cpu_cores_per_node > 0) std::cout << "; " << c.cpu_cores_per_node << " CPU cores";
    if (c.host_memory_bytes > 0) std::cout << ", " << format_bytes(c.host_memory_bytes) << " memory";
    std::cout << " (the CPU engine runs here)\n";
    if (!c.source.empty()) std::cout << "  " << c.source << '\n';
    return;
  }
  std::cout << "  " << c.nodes << (c.nodes == 1 ? " node" : " nodes") << " x " << c.gpus_per_node
            << (c.gpus_per_node == 1 ? " GPU" : " GPUs") << " = " << t.gpus << " x "
            << c.gpu->display_name << '\n';
  std::cout << "  GPU memory: " << format_bytes(c.gpu->memory_bytes) << " per GPU, "
            << format_bytes(t.gpu_memory_bytes) << " in all\n\n";

  TextTable peaks({"precision", "per GPU", "cluster"});
  peaks.right_align(1);
  peaks.right_align(2);
  for (Precision p : kAllPrecisions) {
    if (p == Precision::int4) continue;
    const double per_gpu = c.gpu->peak.of(p);
    const char* unit = (p == Precision::int8) ? "OP/s" : "FLOP/s";
    peaks.add({std::string(to_string(p)), per_gpu > 0 ? format_rate(per_gpu, unit) : "-",
               per_gpu > 0 ? format_rate(t.peak.of(p), unit) : "-"});
  }
  peaks.print(std::cout);
  std::cout << "  (dense peaks)\n\n";

  auto bw = [](double bytes_per_s) {
    return format_rate(bytes_per_s, "B/s") + " (" + format_rate(bytes_per_s * 8, "b/s") + ")";
  };
  if (c.gpus_per_node > 1) {
    std::cout << "  Inside a node:  " << c.intra_node.display_name << ", "
              << bw(t.per_gpu_intra_bandwidth) << " per GPU per direction, "
              << format_seconds(c.intra_node.latency) << " latency\n";
  }
  if (c.inter_node) {
    std::cout << "  Between nodes:  " << c.nics_per_node << " x " << c.inter_node->display_name
              << ", " << bw(t.per_gpu_inter_bandwidth) << " per GPU per direction"
              << (nic_share_capped_by_host_link(c) ? " (all its PCIe link to the host carries)"
                                                   : "")
              << ", " << format_seconds(c.inter_node->latency) << " latency\n";
  }
  if (t.bisection_bandwidth > 0) {
    std::cout << "  Bisection:      " << bw(t.bisection_bandwidth) << " per direction"
              << (c.nodes > 1 ? " (non-blocking fat tree)" : "") << '\n';
  }
  // None known (a calibrated CPU's): said nothing of, as plan's energy; it
  // read "0.00 W".
  if (t.power_watts > 0)
    std::cout << "  Power:          " << format_rate(t.power_watts, "W") << " (GPUs)\n";
  if (t.price_per_hour > 0) {
    std::cout << "  Price:          $" << format_fixed(c.price_per_gpu_hour, 2) << " per GPU-hour, $"
              << format_fixed(t.price_per_hour, 2) << " per hour\n";
  }
}

void run(const DescribeOptions& o, Context& ctx) {
  const Cluster c = o.cluster.resolve(ctx.catalog());
  const ClusterTotals t = totals(c);
  if (o.json) {
    std::cout << json_text(
                     nlohmann::json{{"cluster", to_json(c)},
                                    {"totals", totals_json(t, nic_share_capped_by_host_link(c))}},
                     2)
              << '\n';
  } else {
    print_text(c, t);
  }
}

}  // namespace

void register_describe(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<DescribeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "describe", "Show a cluster's totals: GPUs, peak throughput per precision, memory and bandwidths");
  o->cluster.add_to(*cmd, /*positional=*/true);
  add_json_flag(*cmd, o->json);
  cmd->callback([o, &ctx] { run(*o, ctx); });
}

}  // namespace cs::cli
