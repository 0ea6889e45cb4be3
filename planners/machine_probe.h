#pragma once
// What the planner predicts for the machine probe (core/machine_probe.h):
// the probe's layer GEMM and all-reduce timed by the cost model's own
// formulas on a cluster, so that a run's probe says how far the machine it
// ran on stands from the machine the prediction assumed.

#include "core/hardware.h"
#include "core/machine_probe.h"

namespace cs::plan {

// The all-reduce's group fills the cluster's nodes in rank order.
MachineProbe predict_machine_probe(const Cluster& cluster, const MachineProbeShape& shape);

}  // namespace cs::plan
