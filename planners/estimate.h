#pragma once
// The estimate of one plan: memory per GPU by part, step time by part,
// throughput, MFU, and the time, GPU-hours, cost and energy to train; plus
// every reason a plan cannot run, and the valid values of each plan control.
// Pure functions of a cs::Plan: no I/O, no globals, safe on any thread.
// docs/planner.md gives every formula with its source.
//
// Units: bytes, seconds, FLOP, FLOP/s, watts, USD (SI, as in core/hardware.h).

#include <string>
#include <vector>

#include "core/plans.h"
#include "core/problem.h"
#include "core/result.h"

namespace cs::plan {

// Memory of one GPU in bytes. "Model state" (weights + gradients + optimizer
// state) follows the ZeRO paper's accounting; activations follow Korthikanti
// et al. 2022 (Table 2) times the micro-batches in flight of the schedule.
struct MemoryBreakdown {
  double weights = 0;    // working copy (+ FP8 weight casts and amax history, INT8/INT4 scales)
  double gradients = 0;  // gradient buffers (Megatron's fp32 main gradient when chosen)
  double optimizer_state = 0;        // fp32 master weights + optimizer moments
  double activations = 0;            // kept for backward, all micro-batches in flight
  double activation_workspace = 0;   // transient: one layer recomputed, attention scores, logits
  double communication_buffers = 0;  // NCCL channels, PP send/recv, ZeRO-2 buckets, ZeRO-3 gathers
  double framework_reserve = 0;      // CUDA context, cuBLAS workspaces, allocator pools
  double fragmentation = 0;          // caching-allocator slack over what is allocated
  // Informative, already counted above: the shares held for the embedding
  // and the LM head (0 on a stage without them), in weights + gradients +
  // optimizer_state, and in activations (dropout mask, final norm, logits).
  double embedding_model_state = 0;
  double embedding_activations = 0;
  // Informative too, counted in communication_buffers: what NCCL allocates
  // itself for its channels, a set per communicator (not the framework's
  // tensors, as the framework reserve is not).
  double nccl_channels = 0;

  double model_state() const { return weights + gradients + optimizer_state; }
  double total() const;  // the sum of the parts (kMemoryParts)
};

// The parts of MemoryBreakdown (the embedding's shares, counted in them,
// are not parts), in the order total() adds them and `clusterscope plan`
// lists them. (The app's bar groups some, with its own translated labels.)
struct MemoryPart {
  const char* json_key;  // under "memory" in to_json(Estimate)
  const char* label;     // `clusterscope plan`'s row, memory_problem's wording
  double MemoryBreakdown::*bytes;
  // A plan's controls shrink it (memory_problem names the largest of
  // these); the CUDA context and allocator slack stay whatever the plan.
  bool plan_shrinks = true;
};
inline constexpr MemoryPart kMemoryParts[] = {
    {"weights_bytes", "weights", &MemoryBreakdown::weights},
    {"gradients_bytes", "gradients", &MemoryBreakdown::gradients},
    {"optimizer_state_bytes", "optimizer state", &MemoryBreakdown::optimizer_state},
    {"activations_bytes", "activations", &MemoryBreakdown::activations},
    {"activation_workspace_bytes", "activation workspace", &MemoryBreakdown::activation_workspace},
    {"communication_buffers_bytes", "communication buffers",
     &MemoryBreakdown::communication_buffers},
    {"framework_reserve_bytes", "framework reserve", &MemoryBreakdown::framework_reserve, false},
    {"fragmentation_bytes", "fragmentation", &MemoryBreakdown::fragmentation, false},
};

// A new member of MemoryBreakdown is either a part here or counted in them.
static_assert(sizeof(MemoryBreakdown) ==
              (sizeof(kMemoryParts) / sizeof(kMemoryParts[0]) + 3) * sizeof(double));

inline double MemoryBreakdown::total() const {
  double sum = 0;
  for (const MemoryPart& part : kMemoryParts)
    sum += this->*part.bytes;
  return sum;
}

// Seconds of one optimizer step on the critical path (the slowest pipeline
// stage); the parts add up to step(). Communication parts are what is left
// exposed after overlap; CommunicationDetail has the totals.
struct TimeBreakdown {
  double forward = 0;           // forward compute, all micro-batches
  double backward = 0;          // backward compute (data and weight gradients)
  double recompute = 0;         // forward work repeated in backward (selective or full)
  double optimizer = 0;         // optimizer update (memory-bound)
  double tp_communication = 0;  // tensor-parallel all-reduce / all-gather / reduce-scatter, exposed
  double pp_communication = 0;  // pipeline send/recv and the tied-embedding gradient sync
  double pipeline_bubble = 0;   // fill and drain: (p-1)/v of a stage's micro-batch work
  double dp_communication = 0;  // data-parallel gradient reduction (and ZeRO-1/2 gathers), exposed
  double zero_gather = 0;       // ZeRO-3 parameter all-gathers, exposed
  // Ranks waiting in collectives for slower ones: only where ranks share
  // cores (the CPU engine), the time the share costs; the model has all
  // ranks of a group equally fast otherwise.
  double collective_wait = 0;
  // Compute waiting for a core (the CPU engine, where its threads outnumber
  // the cores: ranks sharing cores, or a communication thread overlapping
  // backward): the time the compute above would take on more cores; a
  // trace measures it as its ops' time off CPU ("descheduled").
  double descheduled = 0;

  double step() const;  // the sum of the parts (kTimeParts)
};

// The parts of TimeBreakdown, in the order step() adds them and
// `clusterscope plan` lists them: the one list of what a step is made of.
// (The app's bar has its own translated short labels and colours; a run
// store's prediction splits compute by kind, as traces measure it.)
struct TimePart {
  const char* json_key;  // under "time" in to_json(Estimate)
  const char* label;     // `clusterscope plan`'s row
  double TimeBreakdown::*seconds;
  bool listed_when_zero = true;  // false: shown only when the plan has it
};
inline constexpr TimePart kTimeParts[] = {
    {"forward_seconds", "forward", &TimeBreakdown::forward},
    {"backward_seconds", "backward", &TimeBreakdown::backward},
    {"recompute_seconds", "recomputation", &TimeBreakdown::recompute},
    {"optimizer_seconds", "optimizer", &TimeBreakdown::optimizer},
    {"tp_communication_seconds", "tensor-parallel communication", &TimeBreakdown::tp_communication},
    {"pp_communication_seconds", "pipeline send/receive", &TimeBreakdown::pp_communication},
    {"pipeline_bubble_seconds", "pipeline bubble", &TimeBreakdown::pipeline_bubble},
    {"dp_communication_seconds", "data-parallel communication", &TimeBreakdown::dp_communication},
    {"zero_gather_seconds", "ZeRO-3 parameter gathers", &TimeBreakdown::zero_gather},
    // Only ranks that share cores wait (the CPU engine).
    {"collective_wait_seconds", "waiting in collectives (shared cores)",
     &TimeBreakdown::collective_wait, false},
    {"descheduled_seconds", "compute waiting for a core (shared cores)",
     &TimeBreakdown::descheduled, false},
};

// A new member of TimeBreakdown needs its row here.
static_assert(sizeof(TimeBreakdown) == sizeof(kTimeParts) / sizeof(kTimeParts[0]) * sizeof(double));

inline double TimeBreakdown::step() const {
  double sum = 0;
  for (const TimePart& part : kTimeParts)
    sum += this->*part.seconds;
  return sum;
}

// The compute of one step on the critical path (forward + backward +
// recompute of TimeBreakdown) split by kind of operation, as traces name
// them; the kinds add up to that compute.
struct ComputeByKind {
  double gemm = 0;         // linear layers (and the LM head)
  double attention = 0;    // the attention core (scores, softmax, weighted sum)
  double norm = 0;         // layer norms
  double activation = 0;   // GELU / SwiGLU
  double elementwise = 0;  // residual adds, dropout, embedding lookup, casts
  double loss = 0;         // cross-entropy over the logits

  double total() const { return gemm + attention + norm + activation + elementwise + loss; }
};

// Communication per step before overlap, and how it was hidden.
struct CommunicationDetail {
  double tp_seconds = 0;        // all tensor-parallel collectives of one step
  double pp_seconds = 0;        // all pipeline transfers of one step
  double dp_seconds = 0;        // gradient reduction (all buckets) + ZeRO parameter gathers
  double dp_overlapped = 0;     // the part of dp_seconds hidden behind backward
  double dp_bytes_per_gpu = 0;  // gradient bytes each GPU reduces per step, every exchange
  std::int64_t dp_buckets = 0;
  double zero3_seconds = 0;  // ZeRO-3 gathers before overlap
};

struct Throughput {
  double tokens_per_second = 0;     // whole cluster (samples x sequence length)
  // A generic model has no tokens: its tokens_per_second is its samples'
  // rate, for the search's ranking, and no view shows it as tokens.
  bool has_tokens = false;
  double samples_per_second = 0;    // sequences (transformers) or samples (generic models)
  double model_flops_per_step = 0;  // 72 B s L h^2 (1 + s/6h + V/12Lh) for GPT, 6-factor for others
  double hardware_flops_per_step = 0;  // what the GPUs execute, recomputation included
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;  // model FLOPs utilisation against the dense peak of the compute precision
  double hfu = 0;  // hardware FLOPs utilisation
};

struct TrainingCost {
  double steps = 0;  // optimizer steps to process the workload's tokens (or epochs)
  double seconds = 0;
  double gpu_hours = 0;
  double cost_usd = 0;    // 0 when the cluster has no price
  double energy_kwh = 0;  // GPU board power x time
  double flops = 0;       // model FLOPs of the whole run
  double flops_6pd = 0;   // 6 x parameters x tokens (Kaplan et al. 2020), for comparison; 0 where
                          // it does not hold (inference, generic models such as CNNs)
};

// The seed article's simple model T = S*N/B + L*(N-1) beside the ring
// all-reduce 2(N-1)/N * S/B + 2(N-1)*L, for this plan's data-parallel
// gradients on its slowest tier. Zero when dp == 1.
struct SeedCommunication {
  double gradient_bytes = 0;  // S per GPU
  int ranks = 0;              // N
  double bandwidth = 0;       // B, bytes/s of the slowest tier per GPU
  double latency = 0;         // L, seconds
  double simple_seconds = 0;
  double ring_seconds = 0;
};

// INT8 / INT4 weight plans: what the quantisation costs in precision.
struct QuantizationSummary {
  int bits = 0;                   // 0: the plan does not quantise weights
  int levels = 0;                 // 2^bits; 2^bits - 1 symmetric (no -2^(bits-1))
  double relative_max_error = 0;  // half a step, as a fraction of the quantised range
  double relative_rms_error = 0;  // step / sqrt(12), same unit
  double weight_bytes_saved = 0;  // on the most loaded GPU (parameters_per_gpu), against bf16
};

struct Estimate {
  // The plan's shape, as the estimate read it.
  int gpus = 0;                   // dp x tp x pp
  int micro_batches = 0;          // per replica per step (gradient accumulation)
  int layers_per_stage = 0;       // transformer layers per pipeline stage (0 for generic models)
  double parameters = 0;          // whole model
  double parameters_per_gpu = 0;  // on the most loaded GPU, before ZeRO sharding

  MemoryBreakdown memory;       // the most loaded GPU
  MemoryBreakdown first_stage;  // pipeline stage 0 (embedding)
  MemoryBreakdown last_stage;   // stage pp-1 (LM head); equal to first_stage when pp == 1
  int most_loaded_stage = 0;
  // The pipeline stage whose period sets the pace, whose compute and
  // communication the time parts are: 0, pp - 1, or 1 for any middle stage
  // (they cost the same); 0 without a pipeline.
  int pacing_stage = 0;
  int pipeline_stages = 1;
  int ranks_per_stage = 1;     // dp x tp: Megatron's order puts stage s at ranks [s, s + 1) x this
  double memory_capacity = 0;  // bytes per GPU
  double headroom_bytes = 0;   // capacity - memory.total(); negative when it does not fit
  bool fits = false;

  TimeBreakdown time;
  ComputeByKind compute_by_kind;
  CommunicationDetail communication;
  Throughput throughput;
  TrainingCost training;
  SeedCommunication seed_communication;
  QuantizationSummary quantization;

  double bubble_fraction = 0;  // (p-1)/(v m), Narayanan et al. 2021
  bool inference = false;  // forward-only plan (INT8/INT4 weights): a "step" is one forward pass
  std::vector<std::string> notes;  // assumptions worth telling (e.g. "uses 64 of 1024 GPUs")
};

// Every reason the plan cannot run, each at the plan document's JSON pointer
// of the control to change ("/parallel/tp", "/precision/compute", ...), with a
// message that names the parameter and the rule. Memory is not checked here
// (see estimate(...).fits and memory_problem()); empty when the plan is valid.
std::vector<Problem> check_plan(const Plan& plan);

// The estimate of a valid plan. A plan with problems gives an Error listing
// them one per line ("/parallel/tp: must divide the 96 heads (got 5)"). A plan
// that does not fit in memory still gives its estimate, with fits == false.
Result<Estimate> estimate(const Plan& plan);

// "Out of memory" as a Problem at "/parallel", naming the largest parts and
// what would shrink them; a Problem with an empty message when it fits.
Problem memory_problem(const Plan& plan, const Estimate& estimate);

// The controls of a plan, for a GUI that marks each one.
enum class Control {
  tp,
  pp,
  dp,
  virtual_stages,
  sequence_parallel,
  zero_stage,
  micro_batch,
  global_batch,
  recompute,
  precision,
  flash_attention,
  overlap_grad_reduce,
};
std::string_view to_string(Control control);
std::string_view json_pointer(Control control);  // "/parallel/tp", "/precision/compute", ...

// One value a control could take, tried with every other control unchanged.
struct ControlOption {
  int value = 0;       // the integer, the enum value (Recompute, Precision), or 0/1 for flags
  std::string label;   // "8", "selective", "bf16", "on"
  bool valid = false;  // check_plan finds no problem with it other than the plan's own elsewhere
  bool fits = false;  // valid and fits in GPU memory (false, unknown, while the plan has a problem)
  std::string reason;  // why not: the first problem, or the memory shortfall; "" when it fits
};

// The values worth offering for a control on this cluster and model (divisors
// of the GPU count, heads, layers and batch; the precisions the GPU has; ...),
// each checked. Costs one estimate per value (microseconds).
std::vector<ControlOption> control_options(const Plan& plan, Control control);

// A control's change, as its options try it and the app applies it (one
// home, so that the figures offered are those of the plan picked): a new
// tp or pp keeps the plan's GPU count, dp taking what is left where that
// divides (as Megatron-LM derives it); tp 1 turns sequence parallelism off
// and pp 1 the virtual stages, which need more; virtual stages pick their schedule; a precision is
// set_compute_precision.
void set_control(ParallelPlan& parallel, PrecisionPlan& precision, Control control, int value);

// The precision control's change: the usual plan for `compute`, the fp32
// main gradient kept for training; an inference plan keeps no activations for
// backward and no optimizer state to shard, so it goes without recomputation
// and ZeRO.
void set_compute_precision(ParallelPlan& parallel, PrecisionPlan& precision, Precision compute);

}  // namespace cs::plan
