#include "core/hardware.h"

#include <algorithm>
#include <cmath>

#include "core/enum_tables.h"


namespace cs {

namespace {

// `value` of the points (`key` increasing) at `x`, interpolated in log(key),
// the ends held; `otherwise` without points.
template <class Point, class Key, class Value>
double interpolated_in_log(const std::vector<Point>& c, double x, Key key, Value value,
                           double otherwise) {
  if (c.empty()) return otherwise;
  if (x <= key(c.front())) return value(c.front());
  if (x >= key(c.back())) return value(c.back());
  std::size_t i = 1;
  while (key(c[i]) < x) ++i;
  const double t = std::log(x / key(c[i - 1])) / std::log(key(c[i]) / key(c[i - 1]));
  return value(c[i - 1]) + t * (value(c[i]) - value(c[i - 1]));
}

}  // namespace

double LoopCosts::optimizer_ns_at(double parameters) const {
  return interpolated_in_log(
      optimizer_by_size, parameters, [](const OptimizerPoint& p) { return p.parameters; },
      [](const OptimizerPoint& p) { return p.ns; }, optimizer_ns);
}

double bandwidth_at(const std::vector<LinkPoint>& by_size, double bytes, double otherwise) {
  return interpolated_in_log(
      by_size, bytes, [](const LinkPoint& p) { return p.bytes; },
      [](const LinkPoint& p) { return p.bandwidth; }, otherwise);
}

double Link::cold_bandwidth_at(double bytes) const {
  return bandwidth_at(cold_by_size, bytes, cold_bandwidth);
}

double PeakRates::of(Precision p) const {
  switch (p) {
    case Precision::fp32: return fp32;
    case Precision::tf32: return tf32;
    case Precision::bf16: return bf16;
    case Precision::fp16: return fp16;
    case Precision::fp8: return fp8;
    case Precision::int8:
    case Precision::int4: return int8;
  }
  return 0;
}

std::string_view to_string(LinkKind kind) { return kLinkKindNames.name(kind); }

std::optional<LinkKind> link_kind_from_string(std::string_view text) {
  return kLinkKindNames.parse(text);
}

double gpu_power_watts(const Cluster& cluster) {
  if (cluster.power_per_gpu_watts > 0) return cluster.power_per_gpu_watts;
  return cluster.gpu ? cluster.gpu->tdp_watts : 0.0;
}

namespace {

double uncapped_nic_share(const Cluster& cluster) {
  if (!cluster.inter_node) return 0;
  // A node without GPUs runs one rank a node's NICs (the CPU engine).
  return cluster.inter_node->bandwidth * std::max(cluster.nics_per_node, 1) /
         std::max(cluster.gpus_per_node, 1);
}

}  // namespace

double per_gpu_nic_bandwidth(const Cluster& cluster) {
  const double share = uncapped_nic_share(cluster);
  const double host = cluster.gpu ? cluster.gpu->host_link_bandwidth : 0;
  return host > 0 && share > host ? host : share;
}

bool nic_share_capped_by_host_link(const Cluster& cluster) {
  return per_gpu_nic_bandwidth(cluster) < uncapped_nic_share(cluster);
}

ClusterTotals totals(const Cluster& cluster) {
  ClusterTotals t;
  t.gpus = cluster.total_gpus();
  if (cluster.gpu && t.gpus > 0) {
    const PeakRates& p = cluster.gpu->peak;
    t.peak = {p.fp32 * t.gpus, p.tf32 * t.gpus, p.bf16 * t.gpus,
              p.fp16 * t.gpus, p.fp8 * t.gpus,  p.int8 * t.gpus};
    t.gpu_memory_bytes = cluster.gpu->memory_bytes * t.gpus;
  }
  if (cluster.gpus_per_node > 1) t.per_gpu_intra_bandwidth = cluster.intra_node.bandwidth;
  if (cluster.gpus_per_node > 0) t.per_gpu_inter_bandwidth = per_gpu_nic_bandwidth(cluster);
  // Worst cut into two equal halves. Inside one node the switch (NVSwitch or
  // a PCIe switch) is taken as non-blocking; between nodes a non-blocking fat
  // tree, so the cut crosses half of the nodes' NICs (as much of them as the
  // GPUs' host links can fill). GPUs wired to each other directly (Infinity
  // Fabric: one link a peer, the link's bandwidth counting all n - 1 of a
  // GPU's, as the planner reads it) have only the links between the halves
  // crossing the cut: 4 x 4 of an 8-GPU MI300X board's, 1.02 TB/s, where
  // half the GPUs' whole bandwidth said 1.79.
  if (cluster.nodes > 1 && cluster.inter_node) {
    t.bisection_bandwidth =
        (cluster.nodes / 2.0) * std::max(cluster.gpus_per_node, 1) * per_gpu_nic_bandwidth(cluster);
  } else if (cluster.gpus_per_node > 1 && cluster.intra_node.kind == LinkKind::infinity_fabric) {
    const int n = cluster.gpus_per_node;
    const double crossing_links = static_cast<double>(n / 2) * (n - n / 2);
    t.bisection_bandwidth = crossing_links * cluster.intra_node.bandwidth / (n - 1);
  } else if (cluster.gpus_per_node > 1) {
    t.bisection_bandwidth = (cluster.gpus_per_node / 2.0) * cluster.intra_node.bandwidth;
  }
  t.power_watts = gpu_power_watts(cluster) * t.gpus;
  t.price_per_hour = cluster.price_per_gpu_hour * t.gpus;
  return t;
}

bool calibrated_without(const GpuSpec& gpu, Precision p) {
  return gpu.architecture == "cpu" && gpu.name.starts_with("calibrated-") && gpu.peak.of(p) <= 0 &&
         (p == Precision::fp32 || p == Precision::tf32 || p == Precision::bf16);
}

}  // namespace cs
