#pragma once
// The cost of collectives, as tiny pure functions: bytes each rank moves and
// the bus-bandwidth factors of nccl-tests (doc/PERFORMANCE.md), and the
// alpha-beta time of a ring on one link tier or hierarchically across two
// (inside a node, then between nodes).

#include <optional>
#include <string_view>

#include "core/hardware.h"
#include "core/trace_types.h"

namespace cs::plan {

// The collectives are core's (trace::Collective); the planner prices the
// group collectives (trace::is_group_collective) and gives the others no cost.

// "all_reduce", "all_gather", ... (the trace store's and nccl-tests' names):
// a group collective, or nullopt (an unknown name, point-to-point, a barrier).
std::optional<trace::Collective> collective_op(std::string_view name);

// Bytes each rank sends for a collective over `bytes` (the full buffer: the
// all-reduced tensor, or the gathered result): trace::bus_bandwidth_factor x
// bytes, except that a group of one rank sends nothing (where busbw's
// convention gives broadcast and reduce a factor of 1).
double bytes_per_rank(trace::Collective op, int ranks, double bytes);

// Latency steps of a ring: 2(n-1) for all-reduce, n-1 for the others.
int ring_steps(trace::Collective op, int ranks);

// One tier of links: bandwidth per direction per rank (bytes/s), the share of
// it collectives reach, and the alpha of one message.
struct Tier {
  double bandwidth = 0;
  double efficiency = 1;
  double latency = 0;
  std::vector<LinkPoint> by_size;  // the bandwidth per message size (Link::cold_by_size)

  // bytes/s a collective over a `bytes` message reaches: by_size's bandwidth
  // at that size (bandwidth_at), else bandwidth, times efficiency.
  double rate(double bytes) const;
};
Tier tier_of(const Link& link, double bandwidth_per_rank);

// Ring time on one tier: steps x alpha + bytes_per_rank / (bandwidth x efficiency).
double ring_seconds(trace::Collective op, int ranks, double bytes, const Tier& tier);

// Where a group's ranks sit: `per_node` ranks in each of `nodes` nodes.
struct GroupPlacement {
  int per_node = 1;
  int nodes = 1;
  int size() const { return per_node * nodes; }
};

// Hierarchical collective: inside each node on `intra`, between nodes on
// `inter` (the per-rank share of the node's NICs), as NCCL does for
// multi-node groups: reduce-scatter in the node, all-reduce of 1/per_node of
// the data across nodes, all-gather in the node; an all-to-all sends its
// off-node part straight from every rank. Latency is the lesser of a ring's
// and a tree's (2 log2 nodes) across nodes.
double group_seconds(trace::Collective op, double bytes, const GroupPlacement& group,
                     const Tier& intra, const Tier& inter);

// group_seconds across nodes, in the terms its network part is linear in:
// time = node_seconds + network_bytes / network rate + network_steps x
// network alpha. The nccl-tests fit of a network tier (nccl_tests.h) fits
// exactly these, so that it calibrates the model the planner uses.
struct AcrossNodes {
  double node_seconds = 0;   // inside each node, on `intra`
  double network_bytes = 0;  // each rank's bytes on the network
  double network_steps = 0;  // network latency steps: the lesser of a ring's and a tree's
};
AcrossNodes across_nodes(trace::Collective op, double bytes, const GroupPlacement& group,
                         const Tier& intra);

}  // namespace cs::plan
