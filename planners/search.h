#pragma once
// The search over plans: every valid combination of data, tensor and pipeline
// parallelism, virtual stages, sequence parallelism, ZeRO stage, micro-batch,
// recomputation, precision and fused attention for a cluster, a model and a
// global batch (or several), pruned by memory first, ranked by an objective,
// with the Pareto fronts of throughput against memory per GPU and against GPU
// count. Optionally over cluster sizes ("how many nodes to train this in 30
// days"). Runs on worker threads; a GUI calls it from its own worker thread
// and stops it through the stop token.

#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "core/plans.h"
#include "core/result.h"
#include "planners/estimate.h"

namespace cs::plan {

enum class Objective {
  throughput,       // most tokens (samples) per second
  cost,             // cheapest run to train the workload (needs a price, else GPU-hours)
  time_to_train,    // shortest run to train the workload
  memory_headroom,  // most free GPU memory, then throughput
  gpus,  // fewest GPUs (with node_counts and max_days: the smallest cluster that makes it)
};
std::string_view to_string(Objective objective);
std::optional<Objective> objective_from_string(std::string_view text);

// What to try. Empty lists mean "every value that makes sense here".
struct SearchSpace {
  std::vector<int> global_batches;    // sequences (samples) per step; required, one or more
  // Default: every training precision the GPU computes in, but fp16 where
  // bf16 is as fast (the same estimate, and loss scaling besides).
  std::vector<Precision> precisions;
  std::vector<Recompute> recomputes;  // default: none, selective, full
  std::vector<int> zero_stages;       // default: 0, 1, 2, 3
  std::vector<int> micro_batches;     // default: powers of two up to max_micro_batch
  int max_micro_batch = 64;
  int max_virtual_stages = 8;               // interleaved chunks per pipeline rank tried up to this
  bool try_sequence_parallel = true;        // both on and off (on needs tp >= 2)
  bool try_without_flash_attention = true;  // both fused and unfused attention
  bool fp32_main_grad = false;   // Megatron's fp32 gradient accumulation, for every candidate
  bool use_all_gpus = true;      // dp x tp x pp == GPUs; false: also fewer GPUs
  std::vector<int> node_counts;  // cluster sizes to try; default: the cluster's own
};

// The most candidates one search lists: past it the listing alone took
// gigabytes (tens of node counts and batches, micro-batches up to 2^20) and
// ended in std::bad_alloc; the search is refused, saying how to narrow it.
inline constexpr long long kMaxSearchCandidates = 50'000'000;

struct SearchLimits {
  int top_k = 10;
  double min_headroom_bytes = 0;  // keep plans with at least this much GPU memory free
  double max_days = 0;            // keep plans that train the workload within this; 0: no limit
  double max_cost_usd = 0;        // 0: no limit
  int threads = 0;                // 0: every hardware thread
  long long max_candidates = kMaxSearchCandidates;
};

struct SearchProgress {
  std::int64_t evaluated = 0;  // candidates looked at so far
  std::int64_t total = 0;      // candidates in the space
  std::int64_t fitting = 0;    // of those, valid and fitting in memory
  double best_score = 0;       // best objective value so far (see RankedPlan::score)
  double elapsed_seconds = 0;
};

struct SearchControl {
  // Called on the thread that called search(), about every 50 ms and once at the end.
  std::function<void(const SearchProgress&)> on_progress;
  std::stop_token stop;  // request_stop() ends the search early; the result says cancelled
};

struct RankedPlan {
  int nodes = 0;  // cluster size this plan was estimated on
  ParallelPlan parallel;
  PrecisionPlan precision;
  Estimate estimate;
  double score = 0;  // objective value, larger is better (negated for costs and times)
};

struct SearchResult {
  std::vector<RankedPlan> best;  // top_k by the objective, best first
  std::vector<RankedPlan>
      pareto_memory;  // no other plan is faster with less memory; by memory ascending
  std::vector<RankedPlan> pareto_gpus;  // no other plan is faster on fewer GPUs; by GPUs ascending
  std::int64_t candidates = 0;          // combinations enumerated
  std::int64_t valid = 0;               // passing check_plan's rules
  std::int64_t fitting = 0;             // valid and fitting in memory (these are timed)
  // Of the valid plans, the least any needs per GPU, and the GPU's memory:
  // how far "no plan fits" is from fitting (0 when no plan was valid).
  double smallest_memory_bytes = 0;
  double gpu_memory_bytes = 0;
  std::int64_t kept = 0;                // fitting and within the limits
  double seconds = 0;                   // wall-clock time of the search
  int threads = 0;
  bool cancelled = false;
};

// What a list of plans of several compute precisions needs said beside its
// MFU: each plan's is of its own precision's dense peak (an FP8 plan's of a
// peak twice the 16-bit one), so MFUs across precisions do not compare.
// "" when the plans share one precision. `rate`: "tokens/s" or "samples/s".
std::string mfu_across_precisions_note(const std::vector<RankedPlan>& plans, std::string_view rate);

// Searches the space. The cluster's GPU must be known; the workload's
// parameters must be valid (as the JSON readers check). Errors name what is
// missing ("search: give at least one global batch").
Result<SearchResult> search(const Cluster& cluster, const Workload& workload,
                            const SearchSpace& space, Objective objective,
                            const SearchLimits& limits, const SearchControl& control = {});

}  // namespace cs::plan
