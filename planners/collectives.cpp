#include "planners/collectives.h"

#include <algorithm>
#include <cmath>

namespace cs::plan {

std::optional<trace::Collective> collective_op(std::string_view name) {
  const std::optional<trace::Collective> c = trace::collective_from_string(name);
  if (!c || !trace::is_group_collective(*c)) return std::nullopt;
  return c;
}

double bytes_per_rank(trace::Collective op, int ranks, double bytes) {
  if (ranks <= 1 || !trace::is_group_collective(op)) return 0;
  return trace::bus_bandwidth_factor(op, ranks) * bytes;
}

int ring_steps(trace::Collective op, int ranks) {
  if (ranks <= 1 || !trace::is_group_collective(op)) return 0;
  return op == trace::Collective::all_reduce ? 2 * (ranks - 1) : ranks - 1;
}

Tier tier_of(const Link& link, double bandwidth_per_rank) {
  return {bandwidth_per_rank, link.efficiency, link.latency};
}

double Tier::rate(double bytes) const {
  return bandwidth_at(by_size, bytes, bandwidth) * efficiency;
}

double ring_seconds(trace::Collective op, int ranks, double bytes, const Tier& tier) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double rate = tier.rate(bytes);
  if (rate <= 0) return 0;
  return ring_steps(op, ranks) * tier.latency + bytes_per_rank(op, ranks, bytes) / rate;
}

AcrossNodes across_nodes(trace::Collective op, double bytes, const GroupPlacement& g,
                         const Tier& intra) {
  // Inside the node: each of the g ranks ends up with (or starts from) 1/g
  // of the data; across nodes each rank handles its 1/g share on its NIC.
  AcrossNodes out;
  if (!trace::is_group_collective(op)) return out;
  const double g_ranks = g.per_node;
  const double intra_rate = intra.rate(bytes);
  const double n = g.nodes;
  const double ring_latency = (op == trace::Collective::all_reduce ? 2 : 1) * (n - 1);
  const double tree_latency =
      (op == trace::Collective::all_reduce ? 2 : 1) * std::ceil(std::log2(n));
  out.network_steps = std::min(ring_latency, tree_latency);
  const bool in_node = g.per_node > 1 && intra_rate > 0;
  switch (op) {
    case trace::Collective::all_reduce:
      if (in_node) {
        out.node_seconds =
            2 * ((g_ranks - 1) / g_ranks * bytes / intra_rate + (g_ranks - 1) * intra.latency);
      }
      out.network_bytes = 2 * (n - 1) / n * bytes / g_ranks;
      break;
    case trace::Collective::all_to_all:
      // No aggregation inside the node: each rank sends the off-node part
      // of its buffer, (n-1)/n, on its own NIC share. Its in-node part,
      // (per_node-1)/size of the buffer on `intra`, goes at the same time
      // and is the shorter one, so it adds nothing.
      out.network_bytes = (n - 1) / n * bytes;
      break;
    case trace::Collective::all_gather:
    case trace::Collective::reduce_scatter:
      if (in_node) {
        out.node_seconds =
            (g_ranks - 1) / g_ranks * bytes / intra_rate + (g_ranks - 1) * intra.latency;
      }
      // Each rank's node-local share crosses to the other nodes.
      out.network_bytes = (n - 1) / n * bytes / g_ranks;
      break;
    case trace::Collective::broadcast:
    case trace::Collective::reduce:
      if (in_node) out.node_seconds = bytes / intra_rate + (g_ranks - 1) * intra.latency;
      out.network_bytes = bytes / g_ranks;
      break;
    default:  // not a group collective: returned above
      break;
  }
  return out;
}

double group_seconds(trace::Collective op, double bytes, const GroupPlacement& g, const Tier& intra,
                     const Tier& inter) {
  if (g.size() <= 1 || bytes <= 0) return 0;
  if (g.nodes <= 1) return ring_seconds(op, g.per_node, bytes, intra);
  const AcrossNodes terms = across_nodes(op, bytes, g, intra);
  const double inter_rate = inter.rate(bytes);
  const double network_seconds = inter_rate > 0 ? terms.network_bytes / inter_rate : 0;
  return terms.node_seconds + network_seconds + terms.network_steps * inter.latency;
}

}  // namespace cs::plan
