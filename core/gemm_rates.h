#pragma once
// How fast the operations that carry their work ran: each operation with
// FLOPs (the engines' GEMMs, a PyTorch profile's aten::mm and kin), grouped
// by name and precision, all ranks and steps together, with its achieved
// FLOP/s and, on a GPU of a known preset, that rate against the GPU's
// datasheet peak for the precision (PyTorch's key_averages with
// with_flops; the GEMM rows of Nsight Systems' kernel summary).
//
// An operation's time: on a GPU rank the GPU time of the kernels it
// launched (LaunchedKernels: the host operation timed by its kernels, the
// CUDA engine's own bias and cast kernels left out); on a rank with no GPU
// stream (the CPU engine) its own duration. An operation on a GPU rank
// that launched no kernel has no GPU time: it is left out, and counted.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/trace_reader.h"

namespace cs {
class PresetCatalog;
}

namespace cs::trace {

struct GemmRate {
  std::string name;
  std::string precision;     // "bf16", ...: the event's type, else the run's; "" unknown
  bool kernel_time = false;  // timed by the GPU kernels it launched, else by its own duration
  std::string gpu;           // the GPU preset its ranks' device matched ("h200"); "" none
  std::int64_t count = 0;
  double flops = 0;          // all of them together
  std::int64_t time_ns = 0;  // all of them together
  double share = 0;          // of the time of every row (0..1)
  double peak_flops = 0;     // the preset's dense peak for the precision; 0: none known
  double flops_per_second() const {
    return time_ns > 0 ? flops / (static_cast<double>(time_ns) * 1e-9) : 0;
  }
  // The achieved rate as a percentage of the peak; none without a peak.
  std::optional<double> percent_of_peak() const;
};

struct GemmRates {
  std::vector<GemmRate> rows;  // by total time, descending
  // Operations with FLOPs on a GPU rank that launched no kernel (or whose
  // kernels were not recorded, but for a split-K reduction: Time::
  // work_recorded): no GPU time to rate them by, left out.
  std::int64_t without_kernels = 0;
  // fp32 operations rated as tf32: they launched a GEMM kernel on TF32
  // tensor cores (LaunchedKernels::Time::computed_in).
  std::int64_t tf32_by_kernels = 0;
  bool presets = false;  // peaks were looked up (gemm_rates was given presets)
  bool windowed = false;  // of a window's operations, not all steps
};

// The operations that count in `window` (counts_in_window; all without
// one). `presets`: where the peaks come from (a GPU preset whose
// device_names match the rank's device); none without it.
Result<GemmRates> gemm_rates(const TraceReader& reader, const std::optional<TimeRange>& window,
                             const PresetCatalog* presets);

// One operation with FLOPs timed as the table times it: the run view's
// details of the operation a user picked. On a GPU rank its kernels are
// those launched by the calls within its span (and not by an operation
// nested in it), found on the rank's streams from its start on.
struct OperationRate {
  GemmRate rate;    // count 1; 0 where a GPU rank's operation launched no recorded kernel
                    // (Time::work_recorded)
  int kernels = 0;  // the kernels recorded (GPU ranks)
};
Result<OperationRate> gemm_rate_of(const TraceReader& reader, const StoredEvent& op,
                                   const PresetCatalog* presets);

// What `trace stats` and the report say with the table, the same in both:
// its title and caption (which time the rows hold), the note under it (the
// operations left out, the peak), and the one line that stands for it
// where no operation carries FLOPs.
std::string gemm_rates_title(const GemmRates& rates);
std::string gemm_rates_caption(const GemmRates& rates);
std::vector<std::string> gemm_rates_notes(const GemmRates& rates);
std::string gemm_rates_absent(const GemmRates& rates);

}  // namespace cs::trace
