#include "core/trace_analysis.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <span>
#include <thread>
#include <unordered_map>

#include "core/format.h"
#include "core/json_reader.h"
#include "core/median.h"
#include "core/trace_reader_internal.h"

namespace cs::trace {

bool counts_in_window(std::int64_t start_ns, std::int64_t end_ns, TimeRange window) {
  const bool before = end_ns < window.start_ns || (end_ns == window.start_ns && start_ns < end_ns);
  return !before && start_ns < window.end_ns;
}

namespace {

constexpr std::int64_t kMinTime = std::numeric_limits<std::int64_t>::min() / 4;
constexpr std::int64_t kMaxTime = kTraceTimeLimitNs;

// Activity classes of the sweep, one bit each.
enum Bit : unsigned { kCompute = 1, kComm = 2, kMemory = 4, kSync = 8, kOther = 16 };
constexpr int kMasks = 32;

unsigned bit_of(Category c) {
  switch (c) {
    case Category::compute:
      return kCompute;
    case Category::communication:
      return kComm;
    case Category::memory:
      return kMemory;
    case Category::synchronization:
      return kSync;
    case Category::other:
      return kOther;
  }
  return kOther;
}
int bit_index(unsigned bit) {
  return std::countr_zero(bit);
}

bool is_device_work(EventKind k) {
  return k == EventKind::kernel || k == EventKind::memcpy || k == EventKind::memset ||
         k == EventKind::collective || k == EventKind::p2p;
}

struct RankLanes {
  std::vector<LaneId> device;
  std::vector<LaneId> host;   // where launches (API calls) are
  std::vector<LaneId> steps;  // LaneKind::steps
  std::vector<LaneId> annotations;  // LaneKind::annotation, host-side
  bool gpu = true;
  // Events on the host and device lanes: what the analysis's per-event
  // vectors reserve (fresh pages as a vector doubles cost a third of the
  // time on a virtual machine's page faults; reserved, only those written
  // are touched).
  std::int64_t host_events = 0, device_events = 0;
};

RankLanes rank_lanes(const TraceReader& r, std::int32_t rank) {
  RankLanes out;
  for (const LaneInfo& l : r.lanes()) {
    if (l.rank != rank) continue;
    // The planner's predicted step (plan --timeline) reads as the GPU work it predicts.
    if (l.kind == LaneKind::gpu_stream || l.kind == LaneKind::predicted) {
      out.device.push_back(l.id);
      out.device_events += l.event_count;
    }
    if (l.kind == LaneKind::cpu_thread) {
      out.host.push_back(l.id);
      out.host_events += l.event_count;
    }
    if (l.kind == LaneKind::steps) out.steps.push_back(l.id);
    // Host ranges only, as Nsight Systems' nvtx_sum: a GPU-side projection of
    // a range is another measure of it (nvtx_gpu_proj_sum), not more instances.
    if (l.kind == LaneKind::annotation && !gpu_side_annotations(l)) out.annotations.push_back(l.id);
  }
  if (out.device.empty()) {
    // The CPU engine: its compute thread and communication lanes do the work.
    out.gpu = false;
    for (const LaneInfo& l : r.lanes()) {
      if (l.rank == rank && (l.kind == LaneKind::cpu_thread || l.kind == LaneKind::communication)) {
        out.device.push_back(l.id);
        out.device_events += l.event_count;
      }
    }
  }
  return out;
}

Result<std::vector<StepWindow>> step_windows(const TraceReader& r, std::int32_t rank,
                                             const RankLanes& lanes) {
  std::vector<StepWindow> out;
  auto rows = r.steps(rank);
  if (!rows) return rows.error();
  for (const StepMetrics& m : *rows)
    out.push_back({m.step, m.start_ns, m.end_ns});
  if (out.empty() && !lanes.steps.empty()) {
    Status s = r.for_each_event(lanes.steps, kMinTime, kMaxTime, [&](const StoredEvent& e) {
      if (e.event.kind == EventKind::step) {
        out.push_back({e.event.step >= 0 ? e.event.step : static_cast<std::int32_t>(out.size()),
                       e.event.start_ns, e.event.end_ns});
      }
      return true;
    });
    if (!s) return s.error();
  }
  std::sort(out.begin(), out.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.start < b.start; });
  return out;
}

// Time per activity mask, and idle time by cause, inside one window.
struct Accumulator {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t by_mask[kMasks] = {};
  std::int64_t host_wait = 0;
  std::int64_t kernel_wait = 0;
  std::int64_t idle_other = 0;
  std::int64_t events = 0;

  Breakdown finish() const {
    Breakdown b;
    b.window_start_ns = start;
    b.window_end_ns = end;
    b.span_ns = std::max<std::int64_t>(0, end - start);
    for (int m = 1; m < kMasks; ++m) {
      const std::int64_t t = by_mask[m];
      b.busy_ns += t;
      if (m & kCompute) b.compute_ns += t;
      if (m & kComm) b.communication_ns += t;
      if ((m & kComm) && (m & kCompute)) b.overlap_ns += t;
      if (m & kMemory) b.memory_ns += t;
      if ((m & kMemory) && !(m & (kCompute | kComm))) b.exposed_memory_ns += t;
      if ((m & kSync) && !(m & (kCompute | kComm | kMemory))) b.exposed_synchronization_ns += t;
    }
    b.exposed_communication_ns = b.communication_ns - b.overlap_ns;
    b.other_busy_ns = b.busy_ns - b.compute_ns - b.exposed_communication_ns - b.exposed_memory_ns -
                      b.exposed_synchronization_ns;
    b.idle_ns = b.span_ns - b.busy_ns;
    b.idle_host_wait_ns = host_wait;
    b.idle_kernel_wait_ns = kernel_wait;
    // Idle time the sweep did not see (a step window reaching past the first
    // or last device event) counts as other.
    b.idle_other_ns = b.idle_ns - host_wait - kernel_wait;
    b.events = events;
    return b;
  }
};

enum class IdleCause { none, host_wait, kernel_wait, other };

// Walks device events in start order and hands out elementary intervals
// (constant set of active classes) to the total and to the step windows.
class Sweep {
 public:
  Sweep(std::int64_t window_start, std::int64_t window_end, std::vector<StepWindow> steps)
      : steps_(std::move(steps)) {
    total_.start = window_start;
    total_.end = window_end;
    step_acc_.resize(steps_.size());
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      step_acc_[i].start = steps_[i].start;
      step_acc_[i].end = steps_[i].end;
    }
  }

  void interval(std::int64_t a, std::int64_t b, unsigned mask, IdleCause cause) {
    if (b <= a) return;
    add(total_, a, b, mask, cause);
    while (next_step_ < steps_.size() && steps_[next_step_].end <= a)
      ++next_step_;
    for (std::size_t i = next_step_; i < steps_.size() && steps_[i].start < b; ++i)
      add(step_acc_[i], a, b, mask, cause);
  }

  void count_event(std::int64_t start) {
    if (start >= total_.start && start < total_.end) ++total_.events;
    for (std::size_t i = next_step_; i < steps_.size() && steps_[i].start <= start; ++i) {
      if (start < steps_[i].end) ++step_acc_[i].events;
    }
  }

  void set_total_window(std::int64_t start, std::int64_t end) {
    total_.start = start;
    total_.end = std::max(start, end);
  }
  const Accumulator& total() const { return total_; }
  const std::vector<Accumulator>& steps() const { return step_acc_; }
  const std::vector<StepWindow>& windows() const { return steps_; }

 private:
  static void add(Accumulator& acc, std::int64_t a, std::int64_t b, unsigned mask,
                  IdleCause cause) {
    const std::int64_t lo = std::max(a, acc.start), hi = std::min(b, acc.end);
    if (hi <= lo) return;
    acc.by_mask[mask] += hi - lo;
    if (cause == IdleCause::host_wait) acc.host_wait += hi - lo;
    if (cause == IdleCause::kernel_wait) acc.kernel_wait += hi - lo;
  }

  std::vector<StepWindow> steps_;
  Accumulator total_;
  std::vector<Accumulator> step_acc_;
  std::size_t next_step_ = 0;
};

struct NameStats {
  EventKind kind = EventKind::kernel;
  Category category = Category::compute;
  std::vector<std::int64_t> durations;
};

struct CollectiveKey {
  Collective collective = Collective::none;
  std::uint32_t name = 0;  // only when the collective is unknown
  DataType dtype = DataType::none;
  std::int64_t bytes = 0;
  std::int32_t ranks = 0;
  auto operator<=>(const CollectiveKey&) const = default;
};

// What one rank's scan collects beyond its breakdown, for run-wide summaries
// and the straggler search.
struct RankRaw {
  std::unordered_map<std::uint32_t, NameStats> kernels;
  std::unordered_map<std::uint32_t, NameStats> api_calls;  // runtime and driver calls, by name
  std::unordered_map<std::uint32_t, NameStats> annotations;  // ranges, by name
  std::unordered_map<std::uint32_t, NameStats> memory_ops;   // copies and sets, by name
  std::unordered_map<std::uint32_t, std::vector<std::int64_t>> memory_bytes;  // of those
  std::map<CollectiveKey, std::vector<std::int64_t>> collectives;
  // The same calls by communicator (Communicators), in order: the transfers
  // match the n-th call of each rank of one communicator.
  std::map<std::pair<CollectiveKey, int>, std::vector<std::int64_t>> communicator_calls;
  // Start times of the collectives (not point-to-point) that started in the
  // window, each with its index among the same collective's calls of its
  // step on this rank (counted over the whole step, so that a call just
  // before the window does not shift the pairing of the rest).
  struct CallOrder {
    std::int32_t step = -1;  // the step last started at the call's start; -1 before the first
    CollectiveKey key;
    int communicator = 0;
    auto operator<=>(const CallOrder&) const = default;
  };
  std::map<CallOrder, std::vector<std::pair<std::size_t, std::int64_t>>> comm_starts;
  std::map<CallOrder, std::size_t> calls_counted;  // each CallOrder's calls so far
  std::vector<std::int64_t> step_durations;
};

// Reorders the durations (their median is taken in place: a copy of
// millions of them doubled the analysis's peak memory).
template <class Stats>
void fill_duration_stats(Stats& s, std::span<std::int64_t> durations) {
  s.count = static_cast<std::int64_t>(durations.size());
  if (durations.empty()) return;
  s.min_ns = *std::min_element(durations.begin(), durations.end());
  s.max_ns = *std::max_element(durations.begin(), durations.end());
  s.total_ns = 0;
  for (std::int64_t d : durations)
    s.total_ns += d;
  s.mean_ns = static_cast<double>(s.total_ns) / static_cast<double>(s.count);
  if (s.count > 1) {
    double squares = 0;
    for (std::int64_t d : durations)
      squares += (static_cast<double>(d) - s.mean_ns) * (static_cast<double>(d) - s.mean_ns);
    s.stddev_ns = std::sqrt(squares / static_cast<double>(s.count - 1));
  }
  s.median_ns = median_in_place(durations);
}

// The values (durations, sizes) a table's statistics may reorder: the
// name's own where the caller is done with them (`consume`; freed after),
// else a copy in `scratch`, one buffer for every name of the table (a fresh
// copy per name cost a tenth of the analysis's time in page faults).
std::span<std::int64_t> values_to_reorder(std::vector<std::int64_t>& values, bool consume,
                                          std::vector<std::int64_t>& scratch) {
  if (consume) return values;
  scratch.assign(values.begin(), values.end());
  return scratch;
}

// `consume`: the durations are not needed after (moved, not copied).
std::vector<KernelStats> kernel_stats(const TraceReader& r,
                                      std::unordered_map<std::uint32_t, NameStats>& by_name,
                                      bool consume) {
  std::vector<KernelStats> out;
  std::int64_t all = 0;
  std::vector<std::int64_t> scratch;
  for (auto& [name, stats] : by_name) {
    KernelStats k;
    k.name = r.string(StringId{name});
    k.kind = stats.kind;
    k.category = stats.category;
    fill_duration_stats(k, values_to_reorder(stats.durations, consume, scratch));
    if (consume) std::vector<std::int64_t>().swap(stats.durations);
    all += k.total_ns;
    out.push_back(std::move(k));
  }
  for (KernelStats& k : out)
    k.share = all > 0 ? static_cast<double>(k.total_ns) / static_cast<double>(all) : 0;
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

// Copies and sets by name, timed as kernel_stats times them, with their bytes.
// `consume` as kernel_stats'.
std::vector<MemoryOpStats> memory_op_stats(
    const TraceReader& r, std::unordered_map<std::uint32_t, NameStats>& by_name,
    std::unordered_map<std::uint32_t, std::vector<std::int64_t>>& bytes_by_name, bool consume) {
  std::vector<MemoryOpStats> out;
  std::int64_t all = 0;
  std::vector<std::int64_t> scratch;
  for (auto& [name, stats] : by_name) {
    MemoryOpStats m;
    m.time.name = r.string(StringId{name});
    m.time.kind = stats.kind;
    m.time.category = stats.category;
    fill_duration_stats(m.time, values_to_reorder(stats.durations, consume, scratch));
    if (consume) std::vector<std::int64_t>().swap(stats.durations);
    all += m.time.total_ns;
    std::vector<std::int64_t>& sizes = bytes_by_name[name];
    const std::span<std::int64_t> bytes = values_to_reorder(sizes, consume, scratch);
    if (!bytes.empty()) {
      for (std::int64_t b : bytes)
        m.total_bytes = saturating_add(m.total_bytes, b);
      m.min_bytes = *std::min_element(bytes.begin(), bytes.end());
      m.max_bytes = *std::max_element(bytes.begin(), bytes.end());
      m.mean_bytes = static_cast<double>(m.total_bytes) / static_cast<double>(bytes.size());
      m.median_bytes = median_in_place(bytes);
    }
    if (consume) std::vector<std::int64_t>().swap(sizes);
    if (m.time.total_ns > 0)
      m.throughput_gbps = static_cast<double>(m.total_bytes) / static_cast<double>(m.time.total_ns);
    out.push_back(std::move(m));
  }
  for (MemoryOpStats& m : out)
    m.time.share = all > 0 ? static_cast<double>(m.time.total_ns) / static_cast<double>(all) : 0;
  std::sort(out.begin(), out.end(), [](const MemoryOpStats& a, const MemoryOpStats& b) {
    return a.time.total_ns != b.time.total_ns ? a.time.total_ns > b.time.total_ns
                                              : a.time.name < b.time.name;
  });
  return out;
}

using CollectiveDurations = std::map<CollectiveKey, std::vector<std::int64_t>>;

// Each collective's transfers: the n-th call of each rank that made it (a
// rank's scan is in start order) is one call, where each made as many
// (shortest_of_each_call). Sends and receives are left out: a pair's two
// sides are different collectives, and the same one on other ranks is
// another pair's.
CollectiveDurations transfer_durations(const std::vector<RankRaw>& raws) {
  std::map<std::pair<CollectiveKey, int>, std::vector<std::vector<double>>> by_communicator;
  for (const RankRaw& raw : raws) {
    for (const auto& [key, durations] : raw.communicator_calls) {
      if (!is_point_to_point(key.first.collective))
        by_communicator[key].emplace_back(durations.begin(), durations.end());
    }
  }
  // A collective whose calls pair in some communicators and not in others
  // (a rank's events lost) gets no transfer: those it has would be a part.
  std::map<CollectiveKey, bool> unpaired;
  for (const auto& [key, ranks] : by_communicator) {
    const std::size_t count = ranks.front().size();
    if (ranks.size() < 2 || std::any_of(ranks.begin(), ranks.end(),
                                        [&](const auto& calls) { return calls.size() != count; }))
      unpaired[key.first] = true;
  }
  CollectiveDurations out;
  for (const auto& [key, ranks] : by_communicator) {
    if (unpaired.contains(key.first)) continue;
    std::vector<std::int64_t>& transfers = out[key.first];
    for (double d : shortest_of_each_call(ranks))
      transfers.push_back(static_cast<std::int64_t>(d));
  }
  return out;
}

std::vector<CollectiveStats> collective_stats(const TraceReader& r, CollectiveDurations& groups,
                                              const CollectiveDurations& transfer = {}) {
  std::vector<CollectiveStats> out;
  for (auto& [key, durations] : groups) {
    CollectiveStats c;
    c.collective = key.collective;
    c.name = key.collective != Collective::none ? std::string(to_string(key.collective))
                                                : r.string(StringId{key.name});
    c.dtype = key.dtype;
    c.bytes = key.bytes;
    c.ranks = key.ranks;
    fill_duration_stats(c, durations);  // the caller's copy
    if (c.bytes > 0 && c.mean_ns > 0) {
      c.algbw_gbps = static_cast<double>(c.bytes) / c.mean_ns;  // bytes per ns = GB/s
      const double factor = bus_bandwidth_factor(c.collective, c.ranks);
      c.busbw_gbps = c.algbw_gbps * factor;
      if (const auto found = transfer.find(key); found != transfer.end()) {
        c.transfer_median_ns = median(found->second);
        if (c.transfer_median_ns > 0)
          c.transfer_busbw_gbps = static_cast<double>(c.bytes) / c.transfer_median_ns * factor;
      }
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const CollectiveStats& a, const CollectiveStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

// A runtime or driver call of the rank that has a correlation id.
struct Launch {
  std::int64_t correlation, start, end;
  bool asynchronous;  // its name says Async (cudaMemcpyAsync, cuMemsetD8Async, ...)
  bool operator<(const Launch& o) const {
    return correlation != o.correlation ? correlation < o.correlation : start < o.start;
  }
};

bool in_window(const store::ScanRow& row, std::int64_t lo, std::int64_t hi) {
  return counts_in_window(row.start, row.end, {lo, hi});
}

void add_duration(std::unordered_map<std::uint32_t, NameStats>& by_name,
                  const store::ScanRow& row) {
  NameStats& s = by_name[row.name];
  s.kind = row.kind;
  s.category = row.category;
  s.durations.push_back(row.end - row.start);
}

// The rank's calls with a correlation id, by id (the earliest first). The
// durations of its runtime and driver calls and of the annotation ranges on
// its threads (PyTorch's record_function) in [window_lo, window_hi), as the
// kernel table's window, go to `raw`, by name.
Result<std::vector<Launch>> launches(const TraceReader& r, const RankLanes& lanes,
                                     std::int64_t window_lo, std::int64_t window_hi, RankRaw& raw) {
  std::vector<Launch> out;
  if (lanes.host.empty() || !lanes.gpu) return out;
  out.reserve(static_cast<std::size_t>(lanes.host_events));
  auto scan = r.impl().scan(lanes.host, kMinTime, kMaxTime, store::ScanColumns::light);
  if (!scan) return scan.error();
  store::ScanRow row;
  std::unordered_map<std::uint32_t, bool> asynchronous;  // by name id
  // A synchronization named as a runtime or driver call (Kineto files
  // cudaStreamWaitEvent, cudaEventSynchronize... as synchronization) is a
  // call; CUPTI's own synchronization records ("Stream synchronize") are not.
  std::unordered_map<std::uint32_t, bool> api_named;  // by name id
  auto is_api_call = [&](const store::ScanRow& e) {
    if (e.kind == EventKind::api_call) return true;
    if (e.kind != EventKind::sync) return false;
    auto [it, added] = api_named.try_emplace(e.name, false);
    if (added) {
      const std::string name = r.string(StringId{e.name});
      it->second = name.starts_with("cuda") || (name.size() > 2 && name.starts_with("cu") &&
                                                std::isupper(static_cast<unsigned char>(name[2])));
    }
    return it->second;
  };
  while ((*scan)->next(row)) {
    if (is_api_call(row) && in_window(row, window_lo, window_hi)) add_duration(raw.api_calls, row);
    if (row.kind == EventKind::annotation && in_window(row, window_lo, window_hi))
      add_duration(raw.annotations, row);
    if ((row.kind != EventKind::api_call && row.kind != EventKind::sync) || row.correlation == 0)
      continue;
    auto [it, added] = asynchronous.try_emplace(row.name, false);
    if (added) it->second = r.string(StringId{row.name}).find("Async") != std::string::npos;
    out.push_back({row.correlation, row.start, row.end, it->second});
  }
  if (!(*scan)->status()) return (*scan)->status().error();
  std::sort(out.begin(), out.end());
  return out;
}

// The call that launched a device event: the earliest with its correlation
// id. Device events come in time order, and their ids nearly so (streams
// interleave): the search gallops out from the last one found, a few
// neighbouring entries instead of a binary search's cache misses over
// millions (it was a tenth of the analysis).
class LaunchLookup {
 public:
  explicit LaunchLookup(const std::vector<Launch>& calls) : calls_(calls) {}
  const Launch* of(std::int64_t correlation) {
    if (correlation == 0 || calls_.empty()) return nullptr;
    const std::size_t n = calls_.size();
    auto below = [&](std::size_t i) { return calls_[i].correlation < correlation; };
    // Every entry before `lo` is below; the one at `hi` is not (or hi is n):
    // the first not below is in [lo, hi].
    std::size_t lo = 0, hi = n;
    if (below(at_)) {
      lo = at_ + 1;
      hi = lo;
      for (std::size_t step = 1; hi < n && below(hi); step *= 2) {
        lo = hi + 1;
        hi = lo + step;
      }
      hi = std::min(hi, n);
    } else {
      lo = hi = at_;
      for (std::size_t step = 1; lo > 0; step *= 2) {
        const std::size_t probe = lo > step ? lo - step : 0;
        if (below(probe)) {
          lo = probe + 1;
          break;
        }
        lo = hi = probe;
      }
    }
    const auto it =
        std::partition_point(calls_.begin() + static_cast<std::ptrdiff_t>(lo),
                             calls_.begin() + static_cast<std::ptrdiff_t>(hi),
                             [&](const Launch& l) { return l.correlation < correlation; });
    if (it == calls_.end()) return nullptr;
    at_ = static_cast<std::size_t>(it - calls_.begin());
    return it->correlation == correlation ? &*it : nullptr;
  }

 private:
  const std::vector<Launch>& calls_;
  std::size_t at_ = 0;
};

// The value at fraction `q` of the sorted values (nearest rank), 0 for none.
double nearest_rank(std::vector<std::int64_t>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return static_cast<double>(v[std::clamp<std::size_t>(rank, 1, v.size()) - 1]);
}

Result<RankAnalysis> analyze_rank_raw(const TraceReader& r, std::int32_t rank,
                                      const AnalysisOptions& options, RankRaw* raw) {
  RankAnalysis out;
  out.rank = rank;
  const RankLanes lanes = rank_lanes(r, rank);
  out.gpu = lanes.gpu;
  if (lanes.device.empty()) return out;

  // Every step of the rank, in time order: the collectives are matched
  // across ranks within their step.
  auto all_steps = step_windows(r, rank, lanes);
  if (!all_steps) return all_steps.error();
  std::vector<StepWindow> windows;
  if (options.per_step) {
    windows = *all_steps;
    if (options.steps) {
      // The steps asked for, by number: a rank's step before them that
      // ended inside the window (a later rank's) is not one of them.
      std::erase_if(windows, [&](const StepWindow& s) {
        return s.step < options.steps->first || s.step > options.steps->last;
      });
    } else if (options.window) {
      // Only the steps the range reaches.
      std::erase_if(windows, [&](const StepWindow& s) {
        return s.end <= options.window->start_ns || s.start >= options.window->end_ns;
      });
    }
  }
  const Communicators communicators = Communicators::of(r);
  std::unordered_map<std::uint32_t, int> communicator_of_name;  // this rank's, by name id
  auto communicator_of = [&](const store::ScanRow& e) {
    auto [found, added] = communicator_of_name.try_emplace(e.name, 0);
    if (added) found->second = communicators.of_call(rank, r.string(StringId{e.name}));
    return found->second;
  };
  const int world = r.world_size();
  auto collective_key = [&](const store::ScanRow& e) {
    CollectiveKey key;
    key.collective = e.details.collective;
    key.dtype = e.details.dtype;
    key.bytes = e.details.bytes;
    // A send or receive joins two ranks, whatever its communicator's size.
    key.ranks = is_point_to_point(e.details.collective) ? 2
                : e.details.group_size > 0              ? e.details.group_size
                                                        : world;
    if (key.collective == Collective::none) key.name = e.name;
    return key;
  };
  std::size_t next_step = 0;  // the first step not started yet at the scan's time
  // Elementary intervals go straight to the accumulators; the device span
  // (first start to last end of device work) is known only at the end, and
  // no interval lies outside it.
  const std::int64_t window_lo = options.window ? options.window->start_ns : kMinTime;
  const std::int64_t window_hi = options.window ? options.window->end_ns : kMaxTime;
  Sweep sweep(window_lo, window_hi, windows);
  RankRaw local;
  RankRaw& sink = raw ? *raw : local;
  auto launch = launches(r, lanes, window_lo, window_hi, sink);
  if (!launch) return launch.error();
  for (auto& [name, calls] : sink.api_calls)  // held until the run's are gathered
    calls.durations.shrink_to_fit();
  LaunchLookup launch_lookup(*launch);
  struct StreamState {
    std::int64_t events = 0;
    std::int64_t first = 0;
    std::int64_t last_end = kMinTime;
    double queued_ns = 0;  // launched operations × their time waiting to start, inside the span
    std::deque<std::int64_t> pending_starts;  // of the launched operations not started yet
    StreamIdle idle;
  };
  // One per device lane, in lanes.device's order: the last one hit, else
  // looked up (a map lookup per event slowed the sweep; a search of every
  // lane per switch took minutes on a trace of 100000 streams).
  std::vector<StreamState> stream_state(lanes.device.size());
  std::unordered_map<std::uint32_t, std::size_t> stream_index;
  for (std::size_t i = 0; i < lanes.device.size(); ++i)
    stream_index.emplace(lanes.device[i].value, i);
  std::size_t last_stream = 0;
  auto state_of = [&](std::uint32_t lane) -> StreamState& {
    if (lanes.device[last_stream].value != lane) last_stream = stream_index.at(lane);
    return stream_state[last_stream];
  };

  struct Active {
    std::int64_t end;
    unsigned bit;
    bool operator>(const Active& o) const { return end > o.end; }
  };
  std::priority_queue<Active, std::vector<Active>, std::greater<>> active;
  int counts[5] = {};
  unsigned mask = 0;
  std::int64_t now = kMinTime;  // time attributed so far
  std::int64_t device_first = kMaxTime, device_last = kMinTime;
  std::vector<std::int64_t> call_durations, launch_delays;  // of the launches paired
  if (lanes.gpu) {
    call_durations.reserve(static_cast<std::size_t>(lanes.device_events));
    launch_delays.reserve(static_cast<std::size_t>(lanes.device_events));
  }
  // Which calls were counted as a launch, by index in *launch (a hash set of
  // their ids cost a fifth of the analysis).
  std::vector<char> launch_counted;
  auto retire_until = [&](std::int64_t t) {
    while (!active.empty() && active.top().end <= t) {
      const Active top = active.top();
      active.pop();
      sweep.interval(now, top.end, mask, IdleCause::none);
      now = std::max(now, top.end);
      if (--counts[bit_index(top.bit)] == 0) mask &= ~top.bit;
    }
  };

  auto scan = r.impl().scan(lanes.device, kMinTime, kMaxTime, store::ScanColumns::transfers);
  if (!scan) return scan.error();
  store::ScanRow e;
  while ((*scan)->next(e)) {
    // Ranges on the threads of a trace without GPU lanes (a CPU-only
    // PyTorch profile).
    if (e.kind == EventKind::annotation && !lanes.gpu && in_window(e, window_lo, window_hi))
      add_duration(sink.annotations, e);
    // The CPU engine's compute thread waiting for a collective's result
    // stands still as a GPU stream waiting on an event would: where nothing
    // else runs, that is exposed synchronization, not idle time.
    const bool engine_wait = !lanes.gpu && e.kind == EventKind::sync;
    if (!is_device_work(e.kind) && !engine_wait) continue;
    const std::int64_t duration = e.end - e.start;
    device_first = std::min(device_first, e.start);
    device_last = std::max(device_last, e.end);
    retire_until(e.start);
    if (e.start > now) {
      IdleCause cause = IdleCause::none;
      if (mask == 0 && now != kMinTime) {
        // A gap: nothing ran on the device between `now` and this start.
        cause = IdleCause::other;
        bool host_wait = false;
        if (const Launch* call = launch_lookup.of(e.correlation); call && call->start > now)
          host_wait = true;
        if (host_wait)
          cause = IdleCause::host_wait;
        else if (e.start - now < options.kernel_wait_ns)
          cause = IdleCause::kernel_wait;
      }
      if (now != kMinTime) sweep.interval(now, e.start, mask, cause);
      now = e.start;
    }
    const unsigned b = bit_of(e.category);
    if (counts[bit_index(b)]++ == 0) mask |= b;
    active.push({e.end, b});
    sweep.count_event(e.start);
    if (engine_wait) continue;  // no operation of the kernel and collective tables

    // The straggler search's calls: every collective of the rank counted
    // in its step, those that started in the window kept. Sends and receives
    // are left out, as from the transfers: the n-th on each rank pairs with a
    // different peer, so it is not the same operation and its start says
    // nothing of lateness.
    if (e.category == Category::communication && e.kind != EventKind::p2p &&
        !is_point_to_point(e.details.collective)) {
      while (next_step < all_steps->size() && (*all_steps)[next_step].start <= e.start)
        ++next_step;
      const RankRaw::CallOrder order{next_step > 0 ? (*all_steps)[next_step - 1].step : -1,
                                     collective_key(e), communicator_of(e)};
      const std::size_t index = sink.calls_counted[order]++;
      if (e.start >= window_lo && e.start < window_hi)
        sink.comm_starts[order].emplace_back(index, e.start);
    }

    // The kernel and collective tables of a range hold what ran in it (they
    // held the whole run's beside the range's breakdown). The range is
    // half-open: a kernel that ends where it starts ran before it.
    if (!in_window(e, window_lo, window_hi)) continue;
    const Launch* call = launch_lookup.of(e.correlation);
    {
      // This stream's gap before the event, and its busy time (events on one
      // CPU-engine lane may overlap: only what runs past the last end counts),
      // inside the window: a stream's span is no longer than the rank's.
      StreamState& st = state_of(e.lane);
      const std::int64_t start = std::max(e.start, window_lo);
      const std::int64_t end = std::min(e.end, window_hi);
      const bool first = st.events++ == 0;
      if (first) {
        st.first = start;
      } else if (start > st.last_end) {
        const std::int64_t gap = start - st.last_end;
        if (call && call->start > st.last_end)
          st.idle.idle_host_wait_ns += gap;
        else if (gap < options.kernel_wait_ns)
          st.idle.idle_kernel_wait_ns += gap;
        else
          st.idle.idle_other_ns += gap;
      }
      const std::int64_t from = first ? start : std::max(start, st.last_end);
      st.idle.busy_ns += std::max<std::int64_t>(0, end - from);
      st.last_end = std::max(st.last_end, end);
      if (call) {
        // Queued from its call's start to its own start. A stream runs its
        // work in launch order, so the queue just after this call holds
        // the launched operations that had not started by then.
        ++st.idle.launched;
        st.queued_ns += static_cast<double>(
            std::max<std::int64_t>(0, e.start - std::max(call->start, st.first)));
        st.pending_starts.push_back(e.start);
        while (!st.pending_starts.empty() && st.pending_starts.front() <= call->start)
          st.pending_starts.pop_front();
        st.idle.queue_max =
            std::max(st.idle.queue_max, static_cast<std::int64_t>(st.pending_starts.size()));
      }
    }
    // Kernels (NCCL's are stored as collectives) and asynchronous copies and
    // sets, with the call that launched them, as HTA pairs them. A synchronous
    // cudaMemcpy or cudaMemset is left out: its call lasts the whole copy, so
    // it is no launch overhead and its "delay" would be minus the copy.
    // A copy of a call not named *Async that starts while its call still
    // runs (a pageable host-to-device cudaMemcpy returns once its data is
    // staged, before the copy ends); a graph's copies carry
    // cudaGraphLaunch's id and start after it returned: launches.
    const bool copy_or_set = e.kind == EventKind::memcpy || e.kind == EventKind::memset;
    if (call && copy_or_set && !call->asynchronous && e.start < call->end) {
      ++out.launches.synchronous_left_out;
      call = nullptr;
    }
    // A CUDA graph's nodes all carry its cudaGraphLaunch's id: one launch,
    // timed by its first node (the later nodes' "delays" are the graph's
    // own run, 125 launches and 93 % over 100 us for 4 replays).
    if (call) {
      if (launch_counted.empty()) launch_counted.assign(launch->size(), 0);
      char& counted = launch_counted[static_cast<std::size_t>(call - launch->data())];
      if (counted) call = nullptr;
      counted = 1;
    }
    if (call) {
      const std::int64_t call_ns = call->end - call->start;
      const std::int64_t delay_ns = e.start - call->end;
      ++out.launches.launches;
      if (duration < call_ns) ++out.launches.short_kernels;
      if (call_ns > options.runtime_cutoff_ns) ++out.launches.runtime_outliers;
      if (delay_ns > options.launch_delay_cutoff_ns) ++out.launches.delay_outliers;
      call_durations.push_back(call_ns);
      launch_delays.push_back(delay_ns);
    }
    NameStats& k = sink.kernels[e.name];
    if (k.durations.empty()) {
      k.kind = e.kind;
      k.category = e.category;
    }
    k.durations.push_back(duration);
    if (copy_or_set) {
      add_duration(sink.memory_ops, e);
      sink.memory_bytes[e.name].push_back(e.details.bytes);
    }
    if (e.category == Category::communication) {
      const CollectiveKey key = collective_key(e);
      sink.collectives[key].push_back(duration);
      sink.communicator_calls[{key, communicator_of(e)}].push_back(duration);
    }
  }
  if (!(*scan)->status()) return (*scan)->status().error();
  if (!lanes.annotations.empty()) {
    // The annotation lanes' ranges (NVTX, the engines' phases), for the run's table.
    auto ranges = r.impl().scan(lanes.annotations, kMinTime, kMaxTime, store::ScanColumns::light);
    if (!ranges) return ranges.error();
    store::ScanRow row;
    while ((*ranges)->next(row))
      if (row.kind == EventKind::annotation && in_window(row, window_lo, window_hi))
        add_duration(sink.annotations, row);
    if (!(*ranges)->status()) return (*ranges)->status().error();
  }
  retire_until(kMaxTime);
  if (device_first > device_last) return out;  // no device work at all

  // Inside the window asked for even when the rank did nothing in it (a
  // range selected before a late rank's first kernel): then empty, at its edge.
  const std::int64_t total_start = std::clamp(device_first, window_lo, window_hi);
  const std::int64_t total_end = std::max(total_start, std::min(device_last, window_hi));
  sweep.set_total_window(total_start, total_end);
  out.total = sweep.total().finish();
  for (std::size_t i = 0; i < windows.size(); ++i) {
    out.steps.push_back({windows[i].step, sweep.steps()[i].finish()});
    const bool whole =
        options.steps || (windows[i].start >= window_lo && windows[i].end <= window_hi);
    if (whole) sink.step_durations.push_back(windows[i].end - windows[i].start);
  }
  for (std::size_t i = 0; i < lanes.device.size(); ++i) {
    const StreamState& st = stream_state[i];
    if (st.events == 0) continue;
    StreamIdle idle = st.idle;
    idle.lane = lanes.device[i];
    idle.events = st.events;
    idle.span_ns = st.last_end - st.first;
    if (st.idle.launched > 0 && idle.span_ns > 0)
      idle.queue_mean = st.queued_ns / static_cast<double>(idle.span_ns);
    if (const LaneInfo* l = r.lane(idle.lane)) idle.name = l->name;
    out.streams.push_back(std::move(idle));
  }
  std::sort(out.streams.begin(), out.streams.end(),
            [](const StreamIdle& a, const StreamIdle& b) { return a.lane.value < b.lane.value; });
  // A run's analysis gathers the rank's durations after: kept.
  out.kernels = kernel_stats(r, sink.kernels, /*consume=*/raw == nullptr);
  out.api_calls = kernel_stats(r, sink.api_calls, /*consume=*/raw == nullptr);
  out.annotations = kernel_stats(r, sink.annotations, /*consume=*/raw == nullptr);
  out.memory_ops =
      memory_op_stats(r, sink.memory_ops, sink.memory_bytes, /*consume=*/raw == nullptr);
  // nearest_rank sorts them: the largest is last, and the median then reorders nothing.
  out.launches.call_p95_ns = nearest_rank(call_durations, 0.95);
  out.launches.call_median_ns = median_in_place(std::span(call_durations));
  out.launches.delay_p95_ns = nearest_rank(launch_delays, 0.95);
  out.launches.delay_median_ns = median_in_place(std::span(launch_delays));
  if (!launch_delays.empty()) out.launches.delay_max_ns = static_cast<double>(launch_delays.back());
  {
    auto copy = sink.collectives;  // medians reorder; keep the raw lists for the run summary
    out.collectives = collective_stats(r, copy);
  }
  return out;
}

// What each rank's figure is held against. Three ranks or more: the median
// rank, and a rank must also stand 3 median absolute deviations out (a
// robust outlier test). Of two, the median is their mean and 3 deviations
// their whole difference, so neither could ever stand out: the slower (or
// later) is held against the other, by the threshold alone.
struct Reference {
  double middle = 0;
  double mad = 0;
  bool pair = false;
};
Reference reference_of(const std::vector<double>& values) {
  Reference r;
  r.pair = values.size() == 2;
  if (r.pair) {
    r.middle = std::min(values[0], values[1]);
    return r;
  }
  r.middle = median(values);
  std::vector<double> deviations;
  for (double v : values)
    deviations.push_back(std::fabs(v - r.middle));
  r.mad = median(std::move(deviations));
  return r;
}

StragglerReport stragglers_from(const std::vector<RankAnalysis>& ranks, std::vector<RankRaw>& raws,
                                const AnalysisOptions& options) {
  StragglerReport report;
  const std::size_t n = ranks.size();
  report.ranks.resize(n);
  std::vector<double> step_medians;
  for (std::size_t i = 0; i < n; ++i) {
    report.ranks[i].rank = ranks[i].rank;
    if (!raws[i].step_durations.empty()) {
      report.ranks[i].step_ns = median(raws[i].step_durations);
      step_medians.push_back(report.ranks[i].step_ns);
    }
  }
  if (n < 2) return report;
  const Reference step_ref = reference_of(step_medians);
  const bool step_pair = step_ref.pair;
  const double step_median = step_ref.middle;
  const double step_mad = step_ref.mad;

  // Lateness of each rank's collectives against the median start of the same
  // call over the ranks that made it: the n-th call of one collective, in one
  // step, on one communicator (RankRaw::CallOrder).
  std::vector<double> late_sum(n, 0.0);
  std::vector<std::int64_t> late_count(n, 0);
  std::map<std::pair<RankRaw::CallOrder, std::size_t>,
           std::vector<std::pair<std::size_t, std::int64_t>>>
      calls;  // each call's (rank index, start)
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& [order, starts] : raws[i].comm_starts)
      for (const auto& [index, start] : starts)
        calls[{order, index}].emplace_back(i, start);
  for (const auto& [call, present] : calls) {
    if (present.size() < 2) continue;
    // Counted from the earliest start: a start in nanoseconds since 1970
    // is past what a double holds to the nanosecond.
    std::int64_t earliest = present.front().second;
    for (const auto& [i, start] : present)
      earliest = std::min(earliest, start);
    std::vector<double> values;
    for (const auto& [i, start] : present)
      values.push_back(static_cast<double>(start - earliest));
    const double mid = reference_of(values).middle;  // of two, the earlier
    for (const auto& [i, start] : present) {
      late_sum[i] += static_cast<double>(start - earliest) - mid;
      ++late_count[i];
    }
  }
  std::vector<double> lateness;
  for (std::size_t i = 0; i < n; ++i) {
    RankStraggler& s = report.ranks[i];
    s.collectives = late_count[i];
    s.late_start_ns = late_count[i] ? late_sum[i] / static_cast<double>(late_count[i]) : 0;
    if (late_count[i]) lateness.push_back(s.late_start_ns);
  }
  const Reference late_ref = reference_of(lateness);
  const bool late_pair = late_ref.pair;
  const double late_median = late_ref.middle;
  const double late_mad = late_ref.mad;
  std::vector<double> spans;
  for (const RankAnalysis& a : ranks)
    spans.push_back(static_cast<double>(a.total.span_ns));
  const double reference = step_median > 0 ? step_median : median(spans);

  auto is_late = [&](const RankStraggler& s) {
    return s.collectives > 0 && reference > 0 &&
           s.late_start_ns > options.straggler_late_fraction * reference &&
           s.late_start_ns - late_median > 3 * late_mad;
  };
  // Of two ranks, the one that joins their collectives late keeps the other
  // waiting inside its steps: the other's longer step is that wait, not a
  // slower rank.
  const bool one_of_two_late =
      late_pair && std::any_of(report.ranks.begin(), report.ranks.end(), is_late);
  for (RankStraggler& s : report.ranks) {
    std::vector<std::string> reasons;
    const bool late = is_late(s);
    if (s.step_ns > 0 && step_median > 0) {
      s.step_excess = s.step_ns / step_median - 1;
      if (s.step_excess > options.straggler_step_excess && s.step_ns - step_median > 3 * step_mad &&
          (late || !one_of_two_late))
        reasons.push_back("median step " + format_seconds(s.step_ns * 1e-9) + ", " +
                          std::to_string(std::lround(s.step_excess * 100)) +
                          (step_pair ? "% above the other rank's" : "% above the median rank"));
    }
    if (late) {
      reasons.push_back("its collectives start " + format_seconds(s.late_start_ns * 1e-9) +
                        (late_pair ? " after the other rank's, on average"
                                   : " after the median rank's, on average"));
    }
    if (!reasons.empty()) {
      s.straggler = true;
      for (std::size_t i = 0; i < reasons.size(); ++i)
        s.reason += (i ? "; " : "") + reasons[i];
      report.stragglers.push_back(s.rank);
    }
  }
  return report;
}

// The run's probe against the prediction's. A missing or unreadable probe
// leaves the rest of the comparison as it is, with a note.
void compare_machine_probes(const TraceReader& reader, const PredictedStep& prediction,
                            PredictionComparison& out) {
  const auto recorded = reader.meta(std::string(kMachineProbeMetaKey));
  const bool predicted = prediction.machine_probe || !prediction.machine_probe_error.empty();
  if (!recorded && !predicted) return;
  if (!recorded) {
    out.machine_note =
        "the run recorded no machine probe (an older run, or the single-process CUDA mode)";
    return;
  }
  if (!predicted) {
    out.machine_note =
        "the prediction holds no machine probe (made by an older version, or from a plan alone)";
    return;
  }
  auto measured = machine_probe_from_json(*recorded, reader.path() + ": meta machine_probe");
  if (!measured) {
    out.machine_note = measured.message();
    return;
  }
  if (!prediction.machine_probe) {
    out.machine_note = prediction.machine_probe_error;
    return;
  }
  const MachineProbe& model = *prediction.machine_probe;
  const MachineProbeShape &a = measured->shape, &b = model.shape;
  if (a.width != b.width || a.precision != b.precision || a.ranks != b.ranks ||
      a.all_reduce_bytes != b.all_reduce_bytes) {
    out.machine_note = "the run's machine probe and the prediction's are not the same shape";
    return;
  }
  out.machine = MachineDrift{*measured, model};
}

}  // namespace

Result<std::vector<StepWindow>> job_step_windows(const TraceReader& r) {
  std::set<std::int32_t> ranks;
  for (const LaneInfo& l : r.lanes()) {
    if (l.kind == LaneKind::steps) ranks.insert(l.rank);
  }
  auto rows = r.steps();
  if (!rows) return rows.error();
  for (const StepMetrics& m : *rows)
    ranks.insert(m.rank);
  std::map<std::int32_t, StepWindow> by_step;
  for (std::int32_t rank : ranks) {
    auto windows = step_windows(r, rank, rank_lanes(r, rank));
    if (!windows) return windows.error();
    for (const StepWindow& w : *windows) {
      auto [it, fresh] = by_step.try_emplace(w.step, w);
      if (!fresh) {
        it->second.start = std::min(it->second.start, w.start);
        it->second.end = std::max(it->second.end, w.end);
      }
    }
  }
  std::vector<StepWindow> out;
  for (const auto& [step, w] : by_step)
    out.push_back(w);
  std::sort(out.begin(), out.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.start < b.start; });
  return out;
}

// The rank to hold against the prediction: one of the stage the planner
// timed, the pipeline's pacing one, which the prediction names (a first, a
// middle or the last stage's ranks), or else tells by its loss part (the last
// stage computes the loss; a first or middle stage, or a store with no loss
// kernels, does not); among those, the rank with the most compute. On a
// pipeline whose ranks share cores, the most compute alone can pick a first
// stage whose compute the scheduler slowed more than the last one's.
static const StepParts& critical_rank_parts(const std::vector<StepParts>& ranks,
                                            const PredictedStep& prediction) {
  // A prediction that names its pipeline's pacing stage: that stage's ranks.
  if (prediction.pipeline) {
    const StepParts* best = nullptr;
    for (const StepParts& r : ranks) {
      if (prediction.pipeline->holds(r.rank) && (!best || r.compute() > best->compute())) best = &r;
    }
    if (best) return *best;
  }
  const std::map<std::string, double>& predicted = prediction.breakdown;
  const auto loss = predicted.find("compute.loss");
  const bool predicted_loss = loss != predicted.end() && loss->second > 0;
  const bool any_match = std::any_of(ranks.begin(), ranks.end(), [&](const StepParts& r) {
    return (r.part("compute.loss") > 0) == predicted_loss;
  });
  const StepParts* best = nullptr;
  for (const StepParts& r : ranks) {
    if (any_match && (r.part("compute.loss") > 0) != predicted_loss) continue;
    if (!best || r.compute() > best->compute()) best = &r;
  }
  return *best;
}

// The prediction's breakdown against the critical rank's parts, and the verdict.
static Status compare_breakdown(const TraceReader& reader, const PredictedStep& prediction,
                                PredictionComparison& out) {
  const std::map<std::string, double>& predicted = prediction.breakdown;
  auto ranks = measure_rank_parts(reader);
  if (!ranks) return ranks.error();
  const StepParts* measured = &critical_rank_parts(*ranks, prediction);
  out.critical_rank = measured->rank;
  out.measured_step_median_s = measured->step_s;
  out.critical_steps = measured->steps;
  out.critical_warm_up = measured->warm_up;
  const auto recorded_steps = reader.steps();
  if ((recorded_steps && recorded_steps->empty()) || !(measured->step_s > 0)) {
    // A run stopped before its first step ended: no part to compare (its
    // whole trace was taken for one step, and a part blamed on the model).
    // Only engine runs carry a prediction, and they record every step.
    out.verdict = "the run recorded no complete step to hold against the plan's " +
                  format_seconds(out.predicted_step_s) + " per step";
    return {};
  }
  std::vector<std::string> names;
  for (const auto& [name, value] : measured->parts)
    names.push_back(name);
  for (const auto& [name, value] : predicted) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  double largest = -1;
  for (const std::string& name : names) {
    const auto p = predicted.find(name);
    const double m = measured->part(name);
    // Parts neither predicted nor measured say nothing.
    if (p == predicted.end() && m <= 0) continue;
    PredictedVsMeasured row{name, p == predicted.end() ? 0.0 : p->second, m};
    const double gap = std::fabs(*row.measured_s - row.predicted_s);
    if (gap > largest) {
      largest = gap;
      out.largest = static_cast<int>(out.breakdown.size());
    }
    out.breakdown.push_back(row);
  }
  if (out.largest < 0) return {};
  const PredictedVsMeasured& r = out.breakdown[static_cast<std::size_t>(out.largest)];
  const double total = out.measured_step_median_s - out.predicted_step_s;
  const double gap = *r.measured_s - r.predicted_s;
  auto s = [](double v) { return format_seconds(std::fabs(v)); };
  out.verdict = "the plan said " + s(out.predicted_step_s) + " per step, the run took " +
                s(out.measured_step_median_s);
  const std::string rated = gap > 0 ? "under-rated" : "over-rated";
  const std::string figures = " (" + s(r.predicted_s) + " predicted, " + s(*r.measured_s) +
                              " measured)";
  if ((gap > 0) == (total > 0) && std::fabs(gap) > 0 && std::fabs(gap) <= std::fabs(total)) {
    out.verdict += ", and " + s(gap) + " of the difference is " + describe_part(r.name) +
                   ", which the model " + rated + figures;
  } else if ((gap > 0) == (total > 0) && std::fabs(gap) > 0) {
    // The part alone is off by more than the step: the others made up for
    // some of it, and saying "12 ms of it" of a part 23 ms off hid that.
    const double others = total - gap;
    out.verdict += ", and all of the difference is " + describe_part(r.name) +
                   ", which the model " + rated + " by " + s(gap) + figures +
                   "; the other parts together took " + s(others) +
                   (others > 0 ? " more" : " less") + " than predicted";
  } else {
    out.verdict += "; the largest disagreement is " + describe_part(r.name) + ": " + s(gap) +
                   (gap > 0 ? " more" : " less") + " than the " + s(r.predicted_s) + " predicted";
  }
  return {};
}

Result<RankAnalysis> analyze_rank(const TraceReader& reader, std::int32_t rank,
                                  const AnalysisOptions& options) {
  return analyze_rank_raw(reader, rank, options, nullptr);
}

namespace {

// Each series' samples inside the window, its end included (the engines
// sample memory as a step ends); all of them without one.
Result<std::vector<CounterStats>> counter_stats(const TraceReader& reader,
                                                const std::optional<TimeRange>& window) {
  auto series = reader.counter_series();
  if (!series) return series.error();
  std::vector<CounterStats> out;
  for (const CounterSeries& c : *series) {
    auto samples = reader.counters(c.rank, c.name);
    if (!samples) return samples.error();
    CounterStats stats;
    stats.rank = c.rank;
    stats.name = reader.string(c.name);
    stats.bytes = counter_in_bytes(stats.name);
    for (const CounterSample& s : *samples) {
      if (window && (s.time_ns < window->start_ns || s.time_ns > window->end_ns)) continue;
      if (stats.samples == 0 || s.value < stats.least) stats.least = s.value;
      if (stats.samples == 0 || s.value > stats.greatest) {
        stats.greatest = s.value;
        stats.greatest_at_ns = s.time_ns;
      }
      stats.last = s.value;
      ++stats.samples;
    }
    if (stats.samples > 0) out.push_back(std::move(stats));
  }
  return out;
}

}  // namespace

Result<RunAnalysis> analyze_run(const TraceReader& reader, const AnalysisOptions& options) {
  RunAnalysis run;
  const auto& ranks = reader.ranks();
  std::vector<std::int32_t> ids;
  for (const RankInfo& r : ranks)
    ids.push_back(r.rank);
  // Ranks that appear only through lanes (a store without a ranks row).
  for (const LaneInfo& l : reader.lanes()) {
    if (std::find(ids.begin(), ids.end(), l.rank) == ids.end()) ids.push_back(l.rank);
  }
  std::sort(ids.begin(), ids.end());
  const std::size_t n = ids.size();
  std::vector<std::optional<RankAnalysis>> results(n);
  std::vector<RankRaw> raws(n);
  std::vector<std::string> errors(n);

  unsigned threads = options.threads > 0 ? static_cast<unsigned>(options.threads)
                                         : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(n));
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) {
      auto a = analyze_rank_raw(reader, ids[i], options, &raws[i]);
      if (!a) return a.error();
      results[i] = std::move(a).value();
    }
  } else {
    std::atomic<std::size_t> next{0};
    std::mutex damage_mutex;
    auto work = [&] {
      auto own = TraceReader::open(reader.path(), TraceReader::Options{false});
      for (std::size_t i; (i = next.fetch_add(1)) < n;) {
        if (!own) {
          errors[i] = own.message();
          continue;
        }
        auto a = analyze_rank_raw(**own, ids[i], options, &raws[i]);
        if (!a)
          errors[i] = a.message();
        else
          results[i] = std::move(a).value();
      }
      if (own) {
        if (Status damaged = (**own).damage(); !damaged) {
          std::lock_guard lock(damage_mutex);
          if (run.damage.empty()) run.damage = damaged.message();
        }
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back(work);
    for (auto& t : pool)
      t.join();
    for (const std::string& e : errors) {
      if (!e.empty()) return Error{e};
    }
  }
  for (auto& r : results)
    run.ranks.push_back(std::move(*r));

  std::unordered_map<std::uint32_t, NameStats> kernels, api_calls, annotations, memory_ops;
  std::unordered_map<std::uint32_t, std::vector<std::int64_t>> memory_bytes;
  CollectiveDurations collectives;
  const CollectiveDurations transfer = transfer_durations(raws);
  // Each name's durations of all ranks in one vector of the exact size (grown
  // by doubling, the copies took twice the memory), each rank's freed as
  // soon as it is in.
  auto gather = [&raws](std::unordered_map<std::uint32_t, NameStats> RankRaw::*field,
                        std::unordered_map<std::uint32_t, NameStats>& into) {
    std::unordered_map<std::uint32_t, std::size_t> sizes;
    for (RankRaw& raw : raws)
      for (const auto& [name, stats] : raw.*field)
        sizes[name] += stats.durations.size();
    for (const auto& [name, size] : sizes)
      into[name].durations.reserve(size);
    for (RankRaw& raw : raws) {
      for (auto& [name, stats] : raw.*field) {
        NameStats& k = into[name];
        if (k.durations.empty()) {
          k.kind = stats.kind;
          k.category = stats.category;
        }
        k.durations.insert(k.durations.end(), stats.durations.begin(), stats.durations.end());
        std::vector<std::int64_t>().swap(stats.durations);
      }
    }
  };
  gather(&RankRaw::kernels, kernels);
  gather(&RankRaw::api_calls, api_calls);
  gather(&RankRaw::annotations, annotations);
  gather(&RankRaw::memory_ops, memory_ops);
  for (RankRaw& raw : raws) {
    for (auto& [name, bytes] : raw.memory_bytes) {
      auto& all = memory_bytes[name];
      all.insert(all.end(), bytes.begin(), bytes.end());
    }
    for (auto& [key, durations] : raw.collectives) {
      auto& all = collectives[key];
      all.insert(all.end(), durations.begin(), durations.end());
    }
  }
  run.kernels = kernel_stats(reader, kernels, /*consume=*/true);
  run.api_calls = kernel_stats(reader, api_calls, /*consume=*/true);
  run.annotations = kernel_stats(reader, annotations, /*consume=*/true);
  run.memory_ops = memory_op_stats(reader, memory_ops, memory_bytes, /*consume=*/true);
  run.collectives = collective_stats(reader, collectives, transfer);
  auto counters = counter_stats(reader, options.window);
  if (!counters) return counters.error();
  run.counters = std::move(counters).value();
  if (options.gemm_rates) {
    auto gemms = gemm_rates(reader, options.window, options.presets);
    if (!gemms) return gemms.error();
    run.gemms = std::move(gemms).value();
  }
  run.stragglers = stragglers_from(run.ranks, raws, options);
  // The plan is held against whole steps; a window's figures are of part of them.
  if (!options.window) {
    std::optional<PredictedStep> prediction = options.prediction;
    if (!prediction) {
      // A recorded prediction that does not read is said, and the run's
      // own figures stand without it.
      const auto text = reader.meta(kPredictedStepMetaKey);
      if (text && !text->empty()) {
        auto read = read_predicted_step(*text, reader.path() + ": meta " + kPredictedStepMetaKey);
        if (read)
          prediction = std::move(read).value();
        else
          run.prediction_error = read.message();
      }
    }
    if (prediction) {
      auto compared = compare_with_prediction(reader, run.ranks, *prediction);
      if (!compared) return compared.error();
      run.prediction = std::move(compared).value();
    }
  }
  if (Status damaged = reader.damage(); !damaged && run.damage.empty())
    run.damage = damaged.message();
  return run;
}

Result<StragglerReport> find_stragglers(const TraceReader& reader,
                                        const std::vector<RankAnalysis>& ranks,
                                        const AnalysisOptions& options) {
  std::vector<RankRaw> raws(ranks.size());
  AnalysisOptions quick = options;
  quick.threads = 1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    auto a = analyze_rank_raw(reader, ranks[i].rank, quick, &raws[i]);
    if (!a) return a.error();
  }
  return stragglers_from(ranks, raws, options);
}

std::string memory_row_label(const MemoryVsMeasured& row) {
  if (row.part) {
    for (const MemoryPartName& part : kMemoryPartNames) {
      if (row.name == part.key) return part.label;
    }
    return row.name;
  }
  if (row.stage >= 0) {
    return "stage " + std::to_string(row.stage) + " (" +
           (row.name == "first stage" ? "first" : "last") + ")";
  }
  return row.name == "allocated" ? "allocated by the process" : "in use on the device";
}

std::string counter_value_text(const CounterStats& counter, double value) {
  return counter.bytes ? format_bytes(value) : number_text(value);
}

std::string memory_row_source(const MemoryVsMeasured& row) {
  if (!row.measured_bytes) return "no counter sampled it";
  return "\"" + row.counter + "\" of rank " + std::to_string(row.rank);
}

namespace {

// "GPU <n><suffix>", n a device number: the CUDA tracer's and the PyTorch
// importer's names, and no other counter that happens to end alike ("GPU 0
// shared memory used").
bool names_gpu_counter(std::string_view counter, std::string_view suffix) {
  if (!counter.starts_with("GPU ") || !counter.ends_with(suffix)) return false;
  const std::string_view device = counter.substr(4, counter.size() - 4 - suffix.size());
  return !device.empty() &&
         std::all_of(device.begin(), device.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The counters that measure each of the planner's two memory figures.
bool measures_allocated(std::string_view counter) {
  return counter == "memory in use (bytes)" ||
         names_gpu_counter(counter, " memory allocated (bytes)");
}
bool measures_device(std::string_view counter) {
  return names_gpu_counter(counter, " memory used");
}

Status compare_memory(const TraceReader& reader, const PredictedMemory& predicted,
                      const std::optional<PipelinePace>& pipeline, PredictionComparison& out) {
  auto series = reader.counter_series();
  if (!series) return series.error();
  // A row takes the largest sample of the series it is measured by; a
  // value that is not a finite size is no measurement of memory.
  auto take_largest = [](MemoryVsMeasured& row, const std::string& name, const CounterSeries& c) {
    if (!std::isfinite(c.high) || !(c.high > 0) ||
        (row.measured_bytes && *row.measured_bytes >= c.high))
      return;
    row.measured_bytes = c.high;
    row.counter = name;
    row.rank = c.rank;
  };
  MemoryVsMeasured allocated{"allocated", false, predicted.allocated_bytes, std::nullopt, {}, -1};
  MemoryVsMeasured device{"device", false, predicted.device_bytes, std::nullopt, {}, -1};
  for (const CounterSeries& c : *series) {
    const std::string& name = reader.string(c.name);
    if (measures_allocated(name)) take_largest(allocated, name, c);
    if (measures_device(name)) take_largest(device, name, c);
  }
  out.memory = {allocated};
  // The parts, of the rank whose whole was measured (so that they add up
  // to it), as the engines sample them; none where no part was sampled (an
  // older run, an imported profile).
  const bool parts_sampled = std::any_of(
      series->begin(), series->end(),
      [&](const CounterSeries& c) { return is_memory_part_counter(reader.string(c.name)); });
  for (const MemoryPartName& part : kMemoryPartNames) {
    if (!parts_sampled) break;
    const auto predicted_part = predicted.parts.find(part.key);
    if (predicted_part == predicted.parts.end()) continue;
    MemoryVsMeasured row{part.key, true, predicted_part->second, std::nullopt, {}, -1};
    const std::string counter = memory_part_counter(part.label);
    for (const CounterSeries& c : *series) {
      if (c.rank != allocated.rank || reader.string(c.name) != counter || !std::isfinite(c.high) ||
          c.high < 0)
        continue;
      row.measured_bytes = c.high;
      row.counter = counter;
      row.rank = c.rank;
    }
    out.memory.push_back(row);
  }
  // A pipeline's end stages, each against the largest sample of its ranks
  // (Megatron's order: stage s holds ranks [s, s + 1) x ranks_per_stage).
  if (pipeline && pipeline->ranks_per_stage > 0) {
    for (const auto& [key, stage] :
         {std::pair{"first", 0}, std::pair{"last", pipeline->stages - 1}}) {
      const auto predicted_stage = predicted.stages.find(key);
      if (predicted_stage == predicted.stages.end()) continue;
      MemoryVsMeasured row{
          std::string(key) + " stage", false, predicted_stage->second, std::nullopt, {}, -1, stage};
      for (const CounterSeries& c : *series) {
        const std::string& name = reader.string(c.name);
        if (c.rank / pipeline->ranks_per_stage == stage && measures_allocated(name))
          take_largest(row, name, c);
      }
      out.memory.push_back(row);
    }
  }
  out.memory.push_back(device);
  return {};
}

}  // namespace

Result<PredictionComparison> compare_with_prediction(const TraceReader& reader,
                                                     const std::vector<RankAnalysis>& ranks,
                                                     const PredictedStep& predicted) {
  PredictionComparison out;
  out.predicted_step_s = predicted.step_seconds;
  if (!predicted.breakdown.empty()) {
    if (Status s = compare_breakdown(reader, predicted, out); !s) return s.error();
  }
  compare_machine_probes(reader, predicted, out);
  if (predicted.memory) {
    if (Status s = compare_memory(reader, *predicted.memory, predicted.pipeline, out); !s)
      return s.error();
  } else if (!predicted.memory_error.empty()) {
    out.memory_note = "the prediction's memory is unreadable: " + predicted.memory_error;
  }

  // Mean over every (rank, step) of the measured quantities, in seconds.
  double step = 0, compute = 0, comm = 0, memory = 0, sync = 0, other = 0;
  int samples = 0;
  auto add = [&](const Breakdown& b) {
    step += static_cast<double>(b.span_ns);
    compute += static_cast<double>(b.compute_ns);
    comm += static_cast<double>(b.exposed_communication_ns);
    memory += static_cast<double>(b.exposed_memory_ns);
    sync += static_cast<double>(b.exposed_synchronization_ns);
    other += static_cast<double>(b.other_busy_ns + b.idle_ns);
    ++samples;
  };
  bool any_steps = false;
  for (const RankAnalysis& r : ranks)
    any_steps = any_steps || !r.steps.empty();
  // Each rank's warm-up steps are left out, as measure_step_parts leaves
  // them out.
  auto first_counted = [](const RankAnalysis& r) {
    std::vector<double> lengths;
    for (const auto& rank_step : r.steps)
      lengths.push_back(static_cast<double>(rank_step.breakdown.span_ns));
    return warm_up_steps(lengths);
  };
  for (const RankAnalysis& r : ranks) {
    if (any_steps) {
      const std::size_t first = first_counted(r);
      out.warm_up_steps += static_cast<int>(first);
      for (std::size_t i = first; i < r.steps.size(); ++i)
        add(r.steps[i].breakdown);
    } else if (r.total.span_ns > 0) {
      add(r.total);
    }
  }
  const double scale = samples > 0 ? 1e-9 / samples : 0;
  out.steps = any_steps ? samples : 0;
  out.measured_step_s = step * scale;
  const std::map<std::string, double> measured = {{"compute", compute * scale},
                                                  {"communication", comm * scale},
                                                  {"memory", memory * scale},
                                                  {"synchronization", sync * scale},
                                                  {"other", other * scale}};
  for (const auto& [name, seconds] : predicted.categories) {
    PredictedVsMeasured row{name, seconds, std::nullopt};
    if (samples > 0 && measured.count(name)) row.measured_s = measured.at(name);
    out.categories.push_back(row);
  }

  // Parts: annotation ranges named like the part, union per rank, per step.
  for (const auto& [name, seconds] : predicted.parts) {
    PredictedVsMeasured row{name, seconds, std::nullopt};
    auto events =
        reader.find_events(name, NameMatch::exact, std::numeric_limits<std::size_t>::max());
    if (!events) return events.error();
    if (!events->empty()) {
      std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> by_rank;
      for (const StoredEvent& e : *events)
        by_rank[e.rank].emplace_back(e.event.start_ns, e.event.end_ns);
      double sum = 0;
      int counted = 0;
      for (const RankAnalysis& r : ranks) {
        auto it = by_rank.find(r.rank);
        if (it == by_rank.end()) continue;
        std::vector<std::pair<std::int64_t, std::int64_t>> iv;
        const std::size_t first = first_counted(r);
        const std::int64_t from = first > 0 ? r.steps[first].breakdown.window_start_ns
                                            : std::numeric_limits<std::int64_t>::min();
        for (const auto& [a, b] : it->second) {
          if (b > from) iv.emplace_back(std::max(a, from), b);
        }
        if (iv.empty()) continue;
        std::sort(iv.begin(), iv.end());
        std::int64_t total = 0, cur_start = iv.front().first, cur_end = iv.front().second;
        for (const auto& [a, b] : iv) {
          if (a > cur_end) {
            total += cur_end - cur_start;
            cur_start = a;
            cur_end = b;
          } else {
            cur_end = std::max(cur_end, b);
          }
        }
        total += cur_end - cur_start;
        const double steps = r.steps.empty() ? 1.0 : static_cast<double>(r.steps.size() - first);
        sum += static_cast<double>(total) / steps;
        ++counted;
      }
      if (counted > 0) row.measured_s = sum / counted * 1e-9;
    }
    out.parts.push_back(row);
  }
  return out;
}

}  // namespace cs::trace
