#include "core/trace_critical_path.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "core/window_index.h"

namespace cs::trace {

namespace {

enum class ActivityType : std::uint8_t { compute, memory, collective, p2p };

// The parts a segment can be: the step parts, then "memory" and "idle".
// An operation holds its part's index (a byte, not a view of 16).
constexpr std::array<std::string_view, kStepPartNames.size() + 2> kPathParts = [] {
  std::array<std::string_view, kStepPartNames.size() + 2> parts{};
  for (std::size_t i = 0; i < kStepPartNames.size(); ++i)
    parts[i] = kStepPartNames[i];
  parts[kStepPartNames.size()] = "memory";
  parts[kStepPartNames.size() + 1] = "idle";
  return parts;
}();

constexpr std::uint8_t path_part(std::string_view name) {
  for (std::size_t i = 0; i < kPathParts.size(); ++i) {
    if (kPathParts[i] == name) return static_cast<std::uint8_t>(i);
  }
  throw std::logic_error("not a part of the critical path");  // at compile time
}
constexpr std::uint8_t kElementwise = path_part("compute.elementwise");
constexpr std::uint8_t kOptimizer = path_part("optimizer");
constexpr std::uint8_t kPipeline = path_part("communication.pp");
constexpr std::uint8_t kOtherCommunication = path_part("communication.other");
constexpr std::uint8_t kMemory = path_part("memory");
constexpr std::string_view kIdle = kPathParts.back();

// A collective's or a pipeline transfer's own: for a collective, its key's
// parts and, once matched, the rank that joined last and when (the
// transfer's start); for a transfer, its peer, direction and size, and
// once matched, its send's rank and start.
struct Transfer {
  std::int64_t start = 0;  // the operation's
  std::int32_t step = -1;
  std::int64_t bytes = 0;
  Collective collective = Collective::none;
  std::int32_t group_size = 0;
  int communicator = 0;
  std::int32_t peer = -1;
  bool send = false;
  std::int32_t from_rank = -1;  // where the path goes on; -1: this rank
  std::int64_t from_ns = 0;
};

// One operation of a rank that the path can run through. Held for every
// operation of the steps asked for: kept to 32 bytes (a step of 10 M
// events held 1.1 GB of them at 112).
struct Activity {
  std::int64_t start = 0, end = 0;
  StringId name;
  LaneId lane;
  std::uint32_t transfer = kNoTransfer;  // RankActivities::transfers
  std::uint8_t part = 0;                 // kPathParts
  ActivityType type = ActivityType::compute;
  static constexpr std::uint32_t kNoTransfer = std::numeric_limits<std::uint32_t>::max();
};
static_assert(sizeof(Activity) <= 32);

struct RankActivities {
  std::int32_t rank = 0;
  std::vector<Activity> by_end;  // sorted by end, then the order below
  std::vector<Transfer> transfers;
  const Transfer* transfer_of(const Activity& a) const {
    return a.transfer == Activity::kNoTransfer ? nullptr : &transfers[a.transfer];
  }
};

// Of operations that end together, the one the path takes: a transfer (it
// may lead to another rank) before compute, and of the same kind the one
// that started first (an outer operation holds its inner ones).
bool taken_before(const Activity& a, const Activity& b) {
  if (a.end != b.end) return a.end < b.end;
  // Sorted ascending, the walk takes the last: transfers sort after compute.
  if (a.type != b.type) return a.type < b.type;
  return a.start > b.start;
}

std::uint8_t compute_part(std::string_view kind) {
  for (std::size_t i = 0; i < kStepPartNames.size(); ++i) {
    const std::string_view p = kStepPartNames[i];
    if (p.starts_with("compute.") && p.substr(8) == kind) return static_cast<std::uint8_t>(i);
  }
  return kind == "optimizer" ? kOptimizer : kElementwise;
}

std::uint8_t communication_part(std::string_view group) {
  for (std::size_t i = 0; i < kStepPartNames.size(); ++i) {
    const std::string_view p = kStepPartNames[i];
    if (p.starts_with("communication.") && p.substr(14) == group)
      return static_cast<std::uint8_t>(i);
  }
  return kOtherCommunication;
}

// The step of a time: the first of the run's step windows (sorted by start;
// they may overlap across the ranks' clocks) that holds it, -1 when none.
class StepLookup {
 public:
  explicit StepLookup(const std::vector<StepWindow>& windows) {
    for (const StepWindow& w : windows) {
      spans_.emplace_back(w.start, w.end);
      steps_.push_back(w.step);
    }
    index_.emplace(spans_);
  }
  StepLookup(const StepLookup&) = delete;  // the index refers to spans_
  StepLookup& operator=(const StepLookup&) = delete;

  std::int32_t at(std::int64_t t) const {
    std::int32_t step = -1;
    index_->for_each_overlap({t, t + 1}, [&](std::size_t k, const Interval&) {
      if (step < 0) step = steps_[k];
    });
    return step;
  }

 private:
  std::vector<Interval> spans_;
  std::vector<std::int32_t> steps_;
  std::optional<WindowIndex> index_;
};

Result<RankActivities> read_rank(const TraceReader& reader, std::int32_t rank,
                                 const StepLookup& steps, std::int64_t t0, std::int64_t t1,
                                 const Communicators& communicators) {
  RankActivities out;
  out.rank = rank;
  std::vector<LaneId> lanes;
  bool gpu = false;
  std::int64_t longest = 0, events = 0;
  for (const LaneInfo& l : reader.lanes_of(rank)) {
    lanes.push_back(l.id);
    gpu = gpu || l.kind == LaneKind::gpu_stream;
    longest = std::max(longest, l.max_duration_ns);
    events += l.event_count;
  }
  if (lanes.empty()) return out;
  // At most every event: reserved, not touched, the pages cost nothing until
  // used, while growing by doubling copied every operation onto fresh ones.
  out.by_end.reserve(static_cast<std::size_t>(events));
  std::vector<Interval> passes;  // forward and backward annotations
  // A GPU rank's launches (correlation, host time) and host operations: a
  // kernel takes the kind of the operation its launch fell in, and is placed
  // in a pass by its launch, as the step parts count them.
  std::vector<std::pair<std::int64_t, std::int64_t>> launches;
  std::vector<HostRange> host_ops;
  std::vector<std::pair<std::size_t, std::int64_t>> kernels;  // (by_end index, correlation)
  // operation_kind reads a name in lower case: once per name, not per event.
  std::unordered_map<std::uint32_t, std::string_view> kinds;
  auto kind_of = [&](StringId id, const std::string& name) {
    auto [it, added] = kinds.try_emplace(id.value);
    if (added) it->second = operation_kind(name);
    return it->second;
  };
  Status s = reader.for_each_event(lanes, t0 - longest, t1, [&](const StoredEvent& se) {
    const Event& e = se.event;
    // A GPU rank's launches and host operations may end before the steps
    // asked for while their kernels run inside them: kept whatever their time.
    if (gpu && e.kind == EventKind::api_call) {
      if (e.correlation > 0) launches.emplace_back(e.correlation, e.start_ns);
      return true;
    }
    if (gpu && e.kind == EventKind::cpu_op) {
      host_ops.push_back({{e.start_ns, e.end_ns}, kind_of(e.name, reader.string(e.name))});
      return true;
    }
    if (e.end_ns <= t0 || e.end_ns <= e.start_ns) return true;
    Activity a;
    a.start = e.start_ns;
    a.end = e.end_ns;
    a.name = e.name;
    a.lane = e.lane;
    const std::string& name = reader.string(e.name);
    switch (e.kind) {
      case EventKind::annotation:
        if (name.starts_with("forward") || name.starts_with("backward"))
          passes.emplace_back(e.start_ns, e.end_ns);
        return true;
      case EventKind::collective:
      case EventKind::kernel:
        if (e.kind == EventKind::collective || e.category == Category::communication) {
          a.type = ActivityType::collective;
          a.part = communication_part(communication_group(name, e.kind));
          Transfer t;
          t.start = e.start_ns;
          t.step = e.step >= 0 ? e.step : steps.at(e.start_ns);
          t.bytes = e.bytes;
          t.collective = e.collective;
          t.group_size = e.group_size;
          t.communicator = communicators.of_call(rank, name);
          a.transfer = static_cast<std::uint32_t>(out.transfers.size());
          out.transfers.push_back(t);
        } else if (e.category == Category::compute) {
          a.part = compute_part(kind_of(e.name, name));
          if (gpu && e.kind == EventKind::kernel && e.correlation > 0)
            kernels.emplace_back(out.by_end.size(), e.correlation);
        } else {
          return true;
        }
        break;
      case EventKind::p2p: {
        a.type = ActivityType::p2p;
        a.part = kPipeline;
        Transfer t;
        t.start = e.start_ns;
        t.peer = e.peer;
        t.send = e.collective != Collective::recv;
        t.bytes = e.bytes;
        a.transfer = static_cast<std::uint32_t>(out.transfers.size());
        out.transfers.push_back(t);
        break;
      }
      case EventKind::memcpy:
      case EventKind::memset:
        a.type = ActivityType::memory;
        a.part = kMemory;
        break;
      case EventKind::cpu_op:
        // Host ranges stand for compute only where no GPU stream does (on a
        // GPU rank they name the kernels launched inside them, above).
        if (e.category != Category::compute) return true;
        a.part = compute_part(kind_of(e.name, name));
        break;
      default:
        return true;
    }
    out.by_end.push_back(a);
    return true;
  });
  if (!s) return s.error();
  std::sort(launches.begin(), launches.end());
  std::sort(host_ops.begin(), host_ops.end(),
            [](const HostRange& a, const HostRange& b) { return a.when < b.when; });
  const std::vector<Interval> in_passes = merged(std::move(passes));
  // As the step parts count them: a kernel takes the kind of the host
  // operation its launch fell in, and elementwise work outside forward and
  // backward (placed by its launch) is the optimizer's.
  std::size_t next_kernel = 0;
  for (std::size_t i = 0; i < out.by_end.size(); ++i) {
    Activity& a = out.by_end[i];
    std::int64_t placed_at = a.start;
    if (next_kernel < kernels.size() && kernels[next_kernel].first == i) {
      const std::int64_t correlation = kernels[next_kernel++].second;
      auto launch =
          std::lower_bound(launches.begin(), launches.end(),
                           std::make_pair(correlation, std::numeric_limits<std::int64_t>::min()));
      if (launch != launches.end() && launch->first == correlation) {
        placed_at = launch->second;
        if (std::string_view kind = kind_at(host_ops, placed_at, {}); !kind.empty())
          a.part = compute_part(kind);
      }
    }
    if (!in_passes.empty() && a.part == kElementwise && !inside(in_passes, placed_at))
      a.part = kOptimizer;
  }
  std::sort(out.by_end.begin(), out.by_end.end(), taken_before);
  return out;
}

// Each collective's last rank to join, and each receive's send, where the
// calls pair up across the ranks (as many of them on each rank).
void match_calls(std::vector<RankActivities>& ranks) {
  using Key = std::tuple<std::int32_t, std::uint32_t, std::int64_t, Collective, std::int32_t, int>;
  std::map<Key, std::map<std::int32_t, std::vector<Transfer*>>> collectives;
  // (from, to, bytes): the sends in order, and the receives.
  using Route = std::tuple<std::int32_t, std::int32_t, std::int64_t>;
  std::map<Route, std::pair<std::vector<Transfer*>, std::vector<Transfer*>>> routes;
  for (RankActivities& r : ranks) {
    std::vector<const Activity*> in_start_order;
    for (const Activity& a : r.by_end) {
      if (a.transfer != Activity::kNoTransfer) in_start_order.push_back(&a);
    }
    std::stable_sort(in_start_order.begin(), in_start_order.end(),
                     [](const Activity* a, const Activity* b) { return a->start < b->start; });
    for (const Activity* a : in_start_order) {
      Transfer& t = r.transfers[a->transfer];
      if (a->type == ActivityType::collective) {
        collectives[{t.step, a->name.value, t.bytes, t.collective, t.group_size, t.communicator}]
                   [r.rank]
                       .push_back(&t);
      } else if (t.peer >= 0) {
        auto& [sends, receives] =
            routes[t.send ? Route{r.rank, t.peer, t.bytes} : Route{t.peer, r.rank, t.bytes}];
        (t.send ? sends : receives).push_back(&t);
      }
    }
  }
  for (auto& [key, by_rank] : collectives) {
    if (by_rank.size() < 2) continue;
    const std::size_t calls = by_rank.begin()->second.size();
    if (!std::all_of(by_rank.begin(), by_rank.end(),
                     [&](const auto& kv) { return kv.second.size() == calls; }))
      continue;
    for (std::size_t n = 0; n < calls; ++n) {
      std::int32_t last_rank = -1;
      std::int64_t last_start = 0;
      for (const auto& [rank, list] : by_rank) {
        if (last_rank < 0 || list[n]->start > last_start) {
          last_rank = rank;
          last_start = list[n]->start;
        }
      }
      for (const auto& [rank, list] : by_rank) {
        list[n]->from_rank = last_rank;
        list[n]->from_ns = last_start;
      }
    }
  }
  for (auto& [route, calls] : routes) {
    auto& [sends, receives] = calls;
    if (sends.size() != receives.size()) continue;
    for (std::size_t n = 0; n < sends.size(); ++n) {
      receives[n]->from_rank = std::get<0>(route);
      receives[n]->from_ns = sends[n]->start;
    }
  }
}

// The path through one step's window, from its start to its end.
// The step's path, handed to `sink` a segment at a time from the step's end
// back to its start.
template <class Sink>
void walk(const std::vector<RankActivities>& ranks, const StepWindow& window, Sink&& sink) {
  // Where each rank's last look-up ended, and for what time: the walk goes
  // back in time, so the next look-up on a rank gallops back from there
  // (a step of 10 M operations searched the whole list at each).
  std::vector<std::size_t> cursor(ranks.size());
  std::vector<std::int64_t> cursor_t(ranks.size(), std::numeric_limits<std::int64_t>::min());
  auto latest_before = [&](std::size_t i, std::int64_t t) -> const Activity* {
    const std::vector<Activity>& v = ranks[i].by_end;
    // Every operation from `hi` on ends after t.
    std::size_t hi = t <= cursor_t[i] ? cursor[i] : v.size();
    std::size_t lo = hi;
    for (std::size_t step = 1; lo > 0 && v[lo - 1].end > t; step *= 2) {
      hi = lo;
      lo = lo > step ? lo - step : 0;
    }
    auto it = std::upper_bound(v.begin() + static_cast<std::ptrdiff_t>(lo),
                               v.begin() + static_cast<std::ptrdiff_t>(hi), t,
                               [](std::int64_t value, const Activity& a) { return value < a.end; });
    cursor[i] = static_cast<std::size_t>(it - v.begin());
    cursor_t[i] = t;
    if (it == v.begin()) return nullptr;
    const Activity* a = &*std::prev(it);
    return a->end > window.start ? a : nullptr;
  };
  // The rank whose work ended last in the step (of several, the lowest).
  std::size_t at = 0;
  std::int64_t latest = window.start;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const Activity* a = latest_before(i, window.end);
    if (a && a->end > latest) {
      latest = a->end;
      at = i;
    }
  }
  std::map<std::int32_t, std::size_t> index;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    index[ranks[i].rank] = i;
  auto add = [&](std::int64_t start, std::int64_t end, std::string_view part, StringId name,
                 LaneId lane) {
    if (end > start) sink(CriticalSegment{ranks[at].rank, start, end, part, name, lane});
  };
  auto add_operation = [&](std::int64_t start, const Activity& a) {
    add(start, a.end, kPathParts[a.part], a.name, a.lane);
  };
  std::int64_t t = window.end;
  // Each turn ends before `t` or moves to another rank at an earlier time, so
  // the walk ends; the bound guards against a store that breaks that.
  std::size_t turns = 0, most = 16;
  for (const RankActivities& r : ranks)
    most += 2 * r.by_end.size();
  while (t > window.start && turns++ < most) {
    const RankActivities& r = ranks[at];
    const Activity* a = latest_before(at, t);
    if (!a) {
      add(window.start, t, kIdle, StringId{}, LaneId{});
      t = window.start;
      break;
    }
    if (a->end < t) add(a->end, t, kIdle, StringId{}, LaneId{});
    const std::int64_t start = std::max(a->start, window.start);
    if (const Transfer* transfer = r.transfer_of(*a);
        transfer && transfer->from_rank >= 0 && transfer->from_rank != r.rank &&
        transfer->from_ns > start && transfer->from_ns < a->end) {
      if (const auto other = index.find(transfer->from_rank); other != index.end()) {
        add_operation(transfer->from_ns, *a);
        t = transfer->from_ns;
        at = other->second;
        continue;
      }
    }
    add_operation(start, *a);
    t = start;
  }
  if (t > window.start) add(window.start, t, kIdle, StringId{}, LaneId{});
}

// Every rank's operations over the steps asked for, their calls matched.
struct Prepared {
  std::vector<StepWindow> windows;  // the steps asked for, in time order
  std::vector<RankActivities> ranks;
};

Result<Prepared> prepare(const TraceReader& reader,
                         std::optional<std::pair<std::int32_t, std::int32_t>> steps) {
  auto all = job_step_windows(reader);
  if (!all) return all.error();
  Prepared out;
  for (const StepWindow& w : *all) {
    if (w.end > w.start && (!steps || (w.step >= steps->first && w.step <= steps->second)))
      out.windows.push_back(w);
  }
  // A trace that records no steps (an Nsight export, a profile of any
  // program) is one step, as the step parts take it.
  if (all->empty() && !steps) {
    const TimeRange range = reader.time_range();
    if (!range.empty()) out.windows.push_back({0, range.start_ns, range.end_ns});
  }
  if (out.windows.empty()) return out;
  std::int64_t t0 = out.windows.front().start, t1 = out.windows.front().end;
  for (const StepWindow& w : out.windows) {
    t0 = std::min(t0, w.start);
    t1 = std::max(t1, w.end);
  }
  std::vector<std::int32_t> ids;
  for (const LaneInfo& l : reader.lanes()) {
    if (std::find(ids.begin(), ids.end(), l.rank) == ids.end()) ids.push_back(l.rank);
  }
  std::sort(ids.begin(), ids.end());
  const Communicators communicators = Communicators::of(reader);
  const StepLookup step_of(*all);
  out.ranks.resize(ids.size());
  std::vector<std::string> errors(ids.size());
  // Ranks read at once, a reader per thread (a reader is not thread-safe).
  const unsigned threads = std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()),
                                              static_cast<unsigned>(ids.size()));
  std::atomic<std::size_t> next{0};
  std::mutex damage_mutex;
  std::string damage;
  auto work = [&](const TraceReader* shared) {
    std::unique_ptr<TraceReader> own;
    std::string opened;
    if (!shared) {
      auto o = TraceReader::open(reader.path(), TraceReader::Options{false});
      if (o)
        own = std::move(o).value();
      else
        opened = o.message();
    }
    const TraceReader* r = shared ? shared : own.get();
    for (std::size_t i; (i = next.fetch_add(1)) < ids.size();) {
      if (!r) {
        errors[i] = opened;
        continue;
      }
      auto a = read_rank(*r, ids[i], step_of, t0, t1, communicators);
      if (a)
        out.ranks[i] = std::move(a).value();
      else
        errors[i] = a.message();
    }
    // A damaged page ends a query early, as if its rows had ended.
    if (own) {
      if (Status damaged = own->damage(); !damaged) {
        std::lock_guard lock(damage_mutex);
        damage = damaged.message();
      }
    }
  };
  if (threads <= 1) {
    work(&reader);
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back(work, nullptr);
    for (std::thread& t : pool)
      t.join();
  }
  for (const std::string& e : errors) {
    if (!e.empty()) return Error{e};
  }
  if (!damage.empty()) return Error{damage};
  if (Status damaged = reader.damage(); !damaged) return damaged.error();
  match_calls(out.ranks);
  return out;
}

// Sums paths as they come: only the summary is kept, not their segments.
class Summer {
 public:
  explicit Summer(std::size_t first) : first_(first) {}
  // A step of this length: false when it is left out (the warm-up).
  bool begin_step(std::int64_t length_ns) {
    if (seen_++ < first_) return false;
    ++steps_;
    step_ns_ += static_cast<double>(length_ns);
    return true;
  }
  void add(const CriticalSegment& s) {
    const auto ns = static_cast<double>(s.end_ns - s.start_ns);
    // Parts are static text: keyed by address, a segment costs no string compare.
    parts_[s.part.data()] += ns;
    ranks_[s.rank] += ns;
    if (s.part == "idle") return;
    CriticalPathSummary::Operation& op = operations_[{s.name.value, s.part.data()}];
    op.name = s.name;
    op.part = s.part;
    ++op.count;
    op.per_step_ns += ns;
  }
  void add(const CriticalPath& path) {
    if (!begin_step(path.length_ns())) return;
    for (const CriticalSegment& s : path.segments)
      add(s);
  }
  CriticalPathSummary result() {
    CriticalPathSummary out;
    out.warm_up = static_cast<int>(std::min(first_, seen_));
    out.steps = steps_;
    if (steps_ == 0) return out;
    const auto n = static_cast<double>(steps_);
    out.step_ns = step_ns_ / n;
    std::vector<std::string_view> order(kStepPartNames.begin(), kStepPartNames.end());
    order.push_back("memory");
    order.push_back("idle");
    std::map<std::string_view, double> by_text;
    for (const auto& [part, ns] : parts_)
      by_text[part] += ns;
    for (std::string_view p : order) {
      if (auto it = by_text.find(p); it != by_text.end()) out.parts.emplace_back(p, it->second / n);
    }
    for (const auto& [rank, ns] : ranks_)
      out.ranks.emplace_back(rank, ns / n);
    for (auto& [key, op] : operations_) {
      op.per_step_ns /= n;
      out.operations.push_back(op);
    }
    // By time; ties by name and part, whatever the static texts' addresses.
    std::sort(out.operations.begin(), out.operations.end(), [](const auto& a, const auto& b) {
      if (a.per_step_ns != b.per_step_ns) return a.per_step_ns > b.per_step_ns;
      return std::pair{a.name.value, a.part} < std::pair{b.name.value, b.part};
    });
    return out;
  }

 private:
  std::size_t first_ = 0, seen_ = 0;
  int steps_ = 0;
  double step_ns_ = 0;
  // Hashed: a step of 10 M events sums as many segments.
  struct OperationHash {
    std::size_t operator()(const std::pair<std::uint32_t, const char*>& k) const {
      return std::hash<const char*>{}(k.second) * 31 + k.first;
    }
  };
  std::unordered_map<const char*, double> parts_;
  std::map<std::int32_t, double> ranks_;
  std::unordered_map<std::pair<std::uint32_t, const char*>, CriticalPathSummary::Operation,
                     OperationHash>
      operations_;
};

std::size_t warm_up_of(const std::vector<std::int64_t>& lengths) {
  return warm_up_steps(std::vector<double>(lengths.begin(), lengths.end()));
}

CriticalPath path_of(const Prepared& prepared, const StepWindow& w) {
  CriticalPath path;
  path.step = w.step;
  path.start_ns = w.start;
  path.end_ns = w.end;
  walk(prepared.ranks, w, [&](const CriticalSegment& s) { path.segments.push_back(s); });
  std::reverse(path.segments.begin(), path.segments.end());  // from the step's start
  return path;
}

}  // namespace

Result<std::vector<CriticalPath>> critical_paths(
    const TraceReader& reader, std::optional<std::pair<std::int32_t, std::int32_t>> steps) {
  auto prepared = prepare(reader, steps);
  if (!prepared) return prepared.error();
  std::vector<CriticalPath> out;
  for (const StepWindow& w : prepared->windows)
    out.push_back(path_of(*prepared, w));
  return out;
}

Result<CriticalPathSummary> summarize_critical_paths(
    const TraceReader& reader, std::optional<std::pair<std::int32_t, std::int32_t>> steps) {
  auto prepared = prepare(reader, steps);
  if (!prepared) return prepared.error();
  std::vector<std::int64_t> lengths;
  for (const StepWindow& w : prepared->windows)
    lengths.push_back(w.end - w.start);
  Summer sum(steps ? 0 : warm_up_of(lengths));
  // Each segment summed as the walk finds it: a step's path is never kept
  // (a trace of no steps is one step of every operation).
  for (const StepWindow& w : prepared->windows) {
    if (sum.begin_step(w.end - w.start))
      walk(prepared->ranks, w, [&](const CriticalSegment& s) { sum.add(s); });
  }
  return sum.result();
}

CriticalPathSummary summarize_critical_paths(const std::vector<CriticalPath>& paths,
                                             bool leave_out_warm_up) {
  std::vector<std::int64_t> lengths;
  for (const CriticalPath& p : paths)
    lengths.push_back(p.length_ns());
  Summer sum(leave_out_warm_up ? warm_up_of(lengths) : 0);
  for (const CriticalPath& p : paths)
    sum.add(p);
  return sum.result();
}

}  // namespace cs::trace
