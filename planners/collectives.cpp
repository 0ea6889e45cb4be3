#include "planners/collectives.h"

#include <algorithm>
#include <cmath>

namespace cs::plan {

double bus_bandwidth_factor(CollectiveOp op, int ranks) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  switch (op) {
    case CollectiveOp::all_reduce:
      return 2 * (n - 1) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      return (n - 1) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
      return 1;
  }
  return 0;
}

std::optional<CollectiveOp> collective_op(std::string_view name) {
  if (name == "all_reduce") return CollectiveOp::all_reduce;
  if (name == "all_gather") return CollectiveOp::all_gather;
  if (name == "reduce_scatter") return CollectiveOp::reduce_scatter;
  if (name == "broadcast") return CollectiveOp::broadcast;
  if (name == "reduce") return CollectiveOp::reduce;
  if (name == "all_to_all") return CollectiveOp::all_to_all;
  return std::nullopt;
}

double bytes_per_rank(CollectiveOp op, int ranks, double bytes) {
  return bus_bandwidth_factor(op, ranks) * bytes;
}

int ring_steps(CollectiveOp op, int ranks) {
  if (ranks <= 1) return 0;
  return op == CollectiveOp::all_reduce ? 2 * (ranks - 1) : ranks - 1;
}

Tier tier_of(const Link& link, double bandwidth_per_rank) {
  return {bandwidth_per_rank, link.efficiency, link.latency};
}

double Tier::rate(double bytes) const {
  return bandwidth_at(by_size, bytes, bandwidth) * efficiency;
}

double ring_seconds(CollectiveOp op, int ranks, double bytes, const Tier& tier) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double rate = tier.rate(bytes);
  if (rate <= 0) return 0;
  return ring_steps(op, ranks) * tier.latency + bytes_per_rank(op, ranks, bytes) / rate;
}

AcrossNodes across_nodes(CollectiveOp op, double bytes, const GroupPlacement& g,
                         const Tier& intra) {
  // Inside the node: each of the g ranks ends up with (or starts from) 1/g
  // of the data; across nodes each rank handles its 1/g share on its NIC.
  AcrossNodes out;
  const double g_ranks = g.per_node;
  const double intra_rate = intra.rate(bytes);
  const double n = g.nodes;
  const double ring_latency = (op == CollectiveOp::all_reduce ? 2 : 1) * (n - 1);
  const double tree_latency = (op == CollectiveOp::all_reduce ? 2 : 1) * std::ceil(std::log2(n));
  out.network_steps = std::min(ring_latency, tree_latency);
  const bool in_node = g.per_node > 1 && intra_rate > 0;
  switch (op) {
    case CollectiveOp::all_reduce:
      if (in_node) {
        out.node_seconds =
            2 * ((g_ranks - 1) / g_ranks * bytes / intra_rate + (g_ranks - 1) * intra.latency);
      }
      out.network_bytes = 2 * (n - 1) / n * bytes / g_ranks;
      break;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      if (in_node) {
        out.node_seconds =
            (g_ranks - 1) / g_ranks * bytes / intra_rate + (g_ranks - 1) * intra.latency;
      }
      // Each rank's node-local share crosses to the other nodes.
      out.network_bytes = (n - 1) / n * bytes / g_ranks;
      break;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
      if (in_node) out.node_seconds = bytes / intra_rate + (g_ranks - 1) * intra.latency;
      out.network_bytes = bytes / g_ranks;
      break;
  }
  return out;
}

double group_seconds(CollectiveOp op, double bytes, const GroupPlacement& g, const Tier& intra,
                     const Tier& inter) {
  if (g.size() <= 1 || bytes <= 0) return 0;
  if (g.nodes <= 1) return ring_seconds(op, g.per_node, bytes, intra);
  const AcrossNodes terms = across_nodes(op, bytes, g, intra);
  const double inter_rate = inter.rate(bytes);
  const double network_seconds = inter_rate > 0 ? terms.network_bytes / inter_rate : 0;
  return terms.node_seconds + network_seconds + terms.network_steps * inter.latency;
}

}  // namespace cs::plan
