#include "core/hardware.h"

#include <cmath>

#include "core/enum_tables.h"


namespace cs {

double LoopCosts::optimizer_ns_at(double parameters) const {
  const std::vector<OptimizerPoint>& c = optimizer_by_size;
  if (c.empty()) return optimizer_ns;
  if (parameters <= c.front().parameters) return c.front().ns;
  if (parameters >= c.back().parameters) return c.back().ns;
  std::size_t i = 1;
  while (c[i].parameters < parameters) ++i;
  const double t = std::log(parameters / c[i - 1].parameters) /
                   std::log(c[i].parameters / c[i - 1].parameters);
  return c[i - 1].ns + t * (c[i].ns - c[i - 1].ns);
}

double Link::cold_bandwidth_at(double bytes) const {
  return bandwidth_at(cold_by_size, bytes, cold_bandwidth);
}

double bandwidth_at(const std::vector<LinkPoint>& c, double bytes, double otherwise) {
  if (c.empty()) return otherwise;
  if (bytes <= c.front().bytes) return c.front().bandwidth;
  if (bytes >= c.back().bytes) return c.back().bandwidth;
  std::size_t i = 1;
  while (c[i].bytes < bytes) ++i;
  const double t = std::log(bytes / c[i - 1].bytes) / std::log(c[i].bytes / c[i - 1].bytes);
  return c[i - 1].bandwidth + t * (c[i].bandwidth - c[i - 1].bandwidth);
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
  if (cluster.inter_node && cluster.gpus_per_node > 0) {
    t.per_gpu_inter_bandwidth =
        cluster.inter_node->bandwidth * cluster.nics_per_node / cluster.gpus_per_node;
  }
  // Worst cut into two equal halves. Inside one node the switch (NVSwitch or
  // a PCIe switch) is taken as non-blocking; between nodes a non-blocking fat
  // tree, so the cut crosses half of the nodes' NICs.
  if (cluster.nodes > 1 && cluster.inter_node) {
    t.bisection_bandwidth =
        (cluster.nodes / 2.0) * cluster.nics_per_node * cluster.inter_node->bandwidth;
  } else if (cluster.gpus_per_node > 1) {
    t.bisection_bandwidth = (cluster.gpus_per_node / 2.0) * cluster.intra_node.bandwidth;
  }
  t.power_watts = gpu_power_watts(cluster) * t.gpus;
  t.price_per_hour = cluster.price_per_gpu_hour * t.gpus;
  return t;
}

}  // namespace cs
