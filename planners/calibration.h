#pragma once
// Calibration: what a device and its links really reach, fitted from a trace
// store, and the presets that carry it to the planner.
//
// One fitting code path reads any store: a calibration store (GEMM, memory,
// operation and all-reduce sweeps of `clusterscope calibrate`), a run store
// (the kernels and collectives of a real training run), or a store imported
// from sweep JSON lines (core/import_sweeps.h). Each fit is the planner's own cost formula with its
// parameters solved for (weighted least squares on relative error), so the
// planner predicts the measured points back:
//
// - GEMMs: t = F / (peak_p · eff_p) + ramp + bytes / memory_rate + launch,
//   one eff_p per precision and one ramp for all (planners/cost_model.cpp);
// - memory: t = bytes / memory_rate (streaming kernels);
// - loops (a CPU-engine device): t = elements · ns per kind of operation,
//   the attention core at FLOPs / rate (core/hardware.h LoopCosts);
// - collectives: t = ring_steps(n) · α + bus_factor(n) · S / B on one tier
//   (planners/collectives.h).
//
// Every fit reports its quality: R² of the times, the RMS and worst relative
// error, and each point's measured and fitted time.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/calibration_meta.h"
#include "core/hardware.h"
#include "core/presets.h"
#include "core/result.h"

namespace cs::trace {
class TraceReader;
}

namespace cs::plan {

struct FitPoint {
  std::string label;         // "gemm 512 fp32", "layernorm x65536", "all_reduce 4 MiB / 2 ranks"
  double size = 0;           // FLOPs, bytes or elements
  double measured_s = 0;     // mean time of one operation
  double predicted_s = 0;    // the fitted model's time
  std::int64_t samples = 0;  // operations averaged
  double error() const { return measured_s > 0 ? predicted_s / measured_s - 1 : 0; }
};

struct FitQuality {
  double r2 = 0;         // coefficient of determination of the times (1: exact)
  double rms_error = 0;  // root mean square of the relative errors
  double max_error = 0;  // the largest |relative error|
  std::vector<FitPoint> points;
};

// A GEMM efficiency curve at one precision.
struct GemmCurve {
  Precision precision = Precision::fp32;
  double peak = 0;        // FLOP/s the efficiency is against (datasheet, or the measured asymptote)
  double efficiency = 0;  // gemm_max at this precision
  FitQuality quality;
};

// One kind of loop operation (LoopCosts): ns per element, or GFLOP/s for attention.
struct LoopFit {
  std::string kind;  // "norm", "norm_backward", "activation", ..., "attention"
  double value = 0;  // ns per element, or GFLOP/s for the attention kinds
  FitQuality quality;
  // An optimizer pass where the planner goes by parameter count
  // (LoopCosts::optimizer_by_size): its own ns per parameter at each count.
  // `value` (the largest count's) and `quality` (that one rate against the
  // counts) then serve only presets without counts.
  std::vector<OptimizerPoint> by_count;
};

// alpha-beta of one link tier on the planner's ring model.
struct LinkFit {
  double latency = 0;    // seconds per ring step
  double bandwidth = 0;  // bytes/s of bus bandwidth
  // Per message size, the bus bandwidth that with `latency` gives the time
  // measured (Link::cold_by_size): where the sizes are all of one group size
  // and the bytes, not the latency, make most of their time.
  std::vector<LinkPoint> by_size;
  std::vector<int> group_sizes;
  FitQuality quality;
};

// What one rank (one GPU, or one CPU-engine rank's share of the cores)
// reached while `ranks` ranks ran on the machine.
struct DeviceFit {
  int ranks = 1;
  int threads = 0;              // BLAS threads per rank (CPU engine), 0 when unknown
  std::vector<GemmCurve> gemm;  // by precision measured
  double ramp = 0;              // seconds: the GEMM ramp shared by every precision
  // CPU: the rate GEMMs stream their operands at (the bytes term of the
  // GEMM formula, fitted with it); GPUs use the memory rate.
  std::optional<double> gemm_operand_rate;
  // GPUs: how much of a GEMM's traffic its kernels hide under their compute
  // (GpuEfficiency::gemm_memory_overlap), fitted with the rates.
  double gemm_memory_overlap = 0;
  double launch = 0;                  // seconds: fixed cost per operation
  std::optional<double> memory_rate;  // bytes/s of streaming kernels
  FitQuality memory_quality;
  std::vector<LoopFit> loops;
  LoopCosts loop_costs;  // the loops as the GPU preset field
  std::optional<LinkFit> link;
  // The same link met with its buffers out of the caches (the cold sweep, a
  // CPU-engine run's gradient reductions): Link::cold_*.
  std::optional<LinkFit> cold_link;
  // CPU engine: the share of a core each thread gets when the ranks' BLAS
  // threads outnumber the cores (cores / (ranks x threads), at most 1; from
  // the core count, not measured). The fitted times are medians, the speed
  // of a thread while it runs; the preset carries the share
  // (GpuEfficiency::core_share) and the planner slows compute by it.
  double core_share = 1;
};

struct Calibration {
  std::string host;
  std::string engine;  // "cpu" or "cuda"
  std::string device;  // "CPU (host)", "NVIDIA H200"
  double host_memory_bytes = 0;
  int cpu_cores = 0;
  std::vector<DeviceFit> devices;  // by rank count
  std::vector<std::string> notes;  // what could not be fitted, and why
};

// The fits of a configuration that explain its times worse than their mean
// would (R² < 0 over 3 points or more): measurements that disagree with
// each other (other work on the machine, a slow mode). One note each, for
// the user to calibrate again before planning with them.
std::vector<std::string> poor_fit_notes(const DeviceFit& fit);
// An RMS error of a fit past which poor_fit_notes says it is off its points.
inline constexpr double kPoorFitRmsError = 0.5;

struct FitOptions {
  // The device's datasheet (a GPU preset): efficiencies are against its
  // peaks. Without one (the CPU engine) the peak of each precision is the
  // measured asymptote and the efficiency 1.
  std::optional<GpuSpec> datasheet;
  // A run's collectives often come in one or two sizes that do not show the
  // bandwidth term; with the bus bandwidth known (the link being refined),
  // its latency alone is then fitted.
  std::optional<double> link_bandwidth;
  std::optional<double> cold_link_bandwidth;  // ... and its cold bus bandwidth
};

// Fits every configuration the store holds. A calibration store says what
// it holds in its meta "calibration" (core/calibration_meta.h); any other
// store is one configuration of its world size.
Result<Calibration> fit_store(const trace::TraceReader& store, const FitOptions& options = {});
// Several stores fitted together: the configurations of equal rank and
// thread counts pool their operations, so runs of one configuration (two
// model sizes, say) are fitted jointly, each quantity once over all of them.
Result<Calibration> fit_stores(const std::vector<const trace::TraceReader*>& stores,
                               const FitOptions& options = {});

// The planner's link model fitted to measured collectives: every sample one
// operation of `bytes` over `ranks` ranks on one tier, its mean time.
struct CollectiveSample {
  std::string collective;  // all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all
  double bytes = 0;        // nccl-tests' size: the whole buffer
  int ranks = 0;
  double seconds = 0;
  std::int64_t samples = 1;
};
Result<LinkFit> fit_link(const std::vector<CollectiveSample>& samples);
// The latency alone, the bus bandwidth given: t = steps · α + bytes / B.
Result<LinkFit> fit_link_latency(const std::vector<CollectiveSample>& samples, double bandwidth);

// The alpha-beta fit underneath: t = offset + steps · α + bytes / B, where
// `offset` is time a known part of the path takes (the tier inside a node,
// when fitting the network between nodes).
struct AlphaBetaPoint {
  std::string label;
  double steps = 0;    // latency steps
  double bytes = 0;    // bytes each rank sends
  double seconds = 0;  // measured
  double offset = 0;   // seconds already accounted for
  double size = 0;     // the operation's size, for the residuals
  std::int64_t samples = 1;
};
Result<LinkFit> fit_alpha_beta(const std::vector<AlphaBetaPoint>& points);

// Presets: per configuration a device ("GPU"), a link and a one-node cluster
// of `ranks` of them, named by calibrated_name. The GPU engine starts from
// the datasheet's GPU; the CPU engine's device is one rank's share of the
// cores.
PresetBundle calibrated_presets(const Calibration& calibration,
                                const std::optional<GpuSpec>& datasheet = {},
                                std::string_view source = "clusterscope calibrate");
// The optimizer's points of `run` with those of `base` not within a factor
// of 2 of any of them, in increasing parameter count.
std::vector<OptimizerPoint> merge_optimizer_points(const std::vector<OptimizerPoint>& base,
                                                   const std::vector<OptimizerPoint>& run);
// "2.51 ns at 65.5 k parameters, ..., 1.23 ns at 4.19 M parameters"; "" without points.
std::string optimizer_by_size_text(const LoopCosts& loops);
// The same of one pass's own costs (LoopFit::by_count).
std::string by_count_text(const std::vector<OptimizerPoint>& by_count);
// "3.47 MB at 4.50 GB/s, 19.6 MB at 3.40 GB/s" (bus bandwidth); "" without points.
std::string bandwidth_by_size_text(const std::vector<LinkPoint>& by_size);

// "calibrated-<host>-cpu<ranks>" (links "...-mpi<ranks>"), or "calibrated-<host>-cuda".
std::string calibrated_name(std::string_view host, std::string_view engine, int ranks,
                            std::string_view what = "cluster");

// The name a preset refined by runs on `host` is saved under: `base` itself
// where it already is that host's (a calibrated_name of the host, or
// ...-learnt-<host>), else "<base>-learnt-<host>": a shipped preset, the
// user's own, another host's. A shipped GPU learnt under its own name changed
// every plan naming it, and two hosts learning into their own files defined
// it twice, which left the presets folder unreadable.
std::string learnt_name(std::string_view base, std::string_view host);

// A device refined by what a run measured: every quantity the run fitted
// replaces the base's (GEMM efficiencies at the precisions it ran, loop
// costs, memory rate); the rest stays. The optimizer's points by parameter
// count replace the base's within a factor of 2 of theirs and join the rest.
GpuSpec refine_device(const GpuSpec& base, const DeviceFit& run, std::string_view source);
// `cold`: the run's gradient reductions, refining the link's cold figures.
Link refine_link(const Link& base, const std::optional<LinkFit>& run,
                 const std::optional<LinkFit>& cold, std::string_view source);

}  // namespace cs::plan
