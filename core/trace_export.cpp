#include "core/trace_export.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/breakdown_parts.h"
#include "core/elided_name.h"
#include "core/enum_names.h"
#include "core/file_beside.h"
#include "core/file_exists.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/median.h"
#include "core/prediction_text.h"
#include "core/trace_critical_path.h"
#include "core/utf8.h"

namespace cs::trace {

namespace {

constexpr std::int64_t kMinTime = std::numeric_limits<std::int64_t>::min() / 4;
constexpr std::int64_t kMaxTime = kTraceTimeLimitNs;

// Buffered output that reports a failed write by the file's name, written
// whole or not at all (FileBeside): a failed export (a full disk) keeps the
// one an earlier export wrote there. Never over the store it exports.
class Output {
 public:
  // `damage_said`: the file says the store is damaged (a report's note), so
  // damage met while reading it does not stop it.
  Output(std::string path, const TraceReader& store, bool damage_said = false)
      : file_beside_(std::move(path)),
        path_(file_beside_.path()),
        store_(store),
        damage_said_(damage_said) {
    std::error_code ec;
    if (std::filesystem::equivalent(path_, store.path(), ec)) {
      error_ = Error{path_ + ": is the store being exported; give another output file"};
      return;
    }
    // A stream (-o - > file) is the shell's to open, whatever the file's mode.
    if (Status s = file_beside_.stream() ? Status{} : check_export_path(path_); !s) {
      error_ = std::move(s);
      return;
    }
    // The standard output (or a link to it) is written where it stands:
    // opened to truncate, it emptied a log the shell appended it to
    // (`-o - >> log`).
    file_ = std::fopen(file_beside_.writing().c_str(), file_beside_.stream() ? "ab" : "wb");
    if (!file_) error_ = Error{path_ + ": cannot write: " + std::strerror(errno)};
    buffer_.reserve(kChunk + 4096);
  }
  ~Output() {
    if (file_) std::fclose(file_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  bool ok() const { return error_.ok(); }
  const Status& status() const { return error_; }
  std::int64_t bytes() const { return written_ + static_cast<std::int64_t>(buffer_.size()); }

  Output& operator<<(std::string_view s) {
    buffer_ += s;
    if (buffer_.size() >= kChunk) drain();
    return *this;
  }
  Output& operator<<(char c) {
    buffer_ += c;
    return *this;
  }
  Output& operator<<(std::int64_t v) {
    char b[24];
    auto [end, ec] = std::to_chars(b, b + sizeof b, v);
    buffer_.append(b, end);
    return *this;
  }
  Output& operator<<(int v) { return *this << static_cast<std::int64_t>(v); }
  Output& operator<<(double v) {
    if (!std::isfinite(v)) return *this << "0";
    char b[32];
    auto [end, ec] = std::to_chars(b, b + sizeof b, v);
    buffer_.append(b, end);
    return *this;
  }

  Status close() {
    drain();
    if (file_) {
      if (std::fclose(file_) != 0 && error_.ok())
        error_ = Error{path_ + ": write failed: " + std::strerror(errno)};
      file_ = nullptr;
    }
    // Rows a damaged page hid would be missing from the file without a word.
    if (Status damaged = store_.damage(); !damaged && !damage_said_ && error_.ok())
      error_ = Error{damaged.message() + "; " + path_ + " was not written"};
    if (error_.ok()) {
      if (Status s = file_beside_.commit(); !s) error_ = s;
    }
    return error_;
  }

 private:
  static constexpr std::size_t kChunk = 1 << 20;
  void drain() {
    if (file_ && error_.ok() && !buffer_.empty()) {
      if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
        error_ = Error{path_ + ": write failed: " + std::strerror(errno)};
    }
    written_ += static_cast<std::int64_t>(buffer_.size());
    buffer_.clear();
  }

  FileBeside file_beside_;
  const std::string& path_;
  const TraceReader& store_;
  bool damage_said_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  std::int64_t written_ = 0;
  Status error_;
};

void json_string(Output& out, std::string_view s) {
  // A store written before its text was kept as UTF-8 may hold other bytes.
  if (!is_valid_utf8(s)) return json_string(out, valid_utf8(s));
  out << '"';
  std::size_t plain = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out << s.substr(plain, i - plain);
    switch (c) {
      case '"':
        out << "\\\"";
        break;
      case '\\':
        out << "\\\\";
        break;
      case '\n':
        out << "\\n";
        break;
      case '\t':
        out << "\\t";
        break;
      case '\r':
        out << "\\r";
        break;
      default: {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        out << std::string_view(b);
      }
    }
    plain = i + 1;
  }
  out << s.substr(plain) << '"';
}

// Nanoseconds as microseconds with three decimals, exactly.
void micros(Output& out, std::int64_t ns) {
  if (ns < 0) {
    out << '-';
    ns = -ns;
  }
  char b[8];
  std::snprintf(b, sizeof b, ".%03d", static_cast<int>(ns % 1000));
  out << ns / 1000 << std::string_view(b);
}

// The categories Kineto writes, which Holistic Trace Analysis reads (it
// takes a gpu_user_annotation for GPU time).

// The launch an export writes with an event: a kernel's (NCCL's too) on a
// GPU stream, where the store kept it.
Result<std::optional<KernelLaunch>> exported_launch(const TraceReader& reader,
                                                    const StoredEvent& se, const LaneInfo* lane) {
  if (!lane || lane->kind != LaneKind::gpu_stream || !may_have_launch(se.event.kind))
    return std::optional<KernelLaunch>{};
  return reader.kernel_launch(se.id);
}

std::string_view kineto_category(EventKind kind, const LaneInfo& info) {
  const LaneKind lane = info.kind;
  switch (kind) {
    case EventKind::kernel:
    case EventKind::collective:
    case EventKind::p2p:
      return lane == LaneKind::gpu_stream ? "kernel" : "cpu_op";
    case EventKind::memcpy:
      return "gpu_memcpy";
    case EventKind::memset:
      return "gpu_memset";
    case EventKind::annotation:
      return lane == LaneKind::gpu_stream || gpu_side_annotations(info) ? "gpu_user_annotation"
                                                                        : "user_annotation";
    case EventKind::cpu_op:
      return "cpu_op";
    case EventKind::sync:
      return lane == LaneKind::gpu_stream ? "cuda_sync" : "cuda_runtime";
    case EventKind::api_call:
      return "cuda_runtime";
    case EventKind::step:
      return "user_annotation";
    case EventKind::overhead:
      return "overhead";
  }
  return "cpu_op";
}

// "GPU 0 stream 7" → 7; other lanes: their id (unique, never -1).
std::int64_t stream_of(const LaneInfo& lane) {
  const auto pos = lane.name.rfind("stream ");
  if (pos != std::string::npos) {
    std::int64_t v = 0;
    const char* b = lane.name.data() + pos + 7;
    auto [end, ec] = std::from_chars(b, lane.name.data() + lane.name.size(), v);
    if (ec == std::errc() && end != b) return v;
  }
  return lane.id.value;
}

// PyTorch's names of a data type, as its profiler writes args.dtype
// ("Float", "BFloat16"), which HTA and this product's import read.
std::string_view pytorch_dtype(DataType t) {
  switch (t) {
    case DataType::fp32:
      return "Float";
    case DataType::fp16:
      return "Half";
    case DataType::bf16:
      return "BFloat16";
    case DataType::fp8_e4m3:
      return "Float8_e4m3fn";
    case DataType::fp8_e5m2:
      return "Float8_e5m2";
    case DataType::int8:
      return "Char";
    case DataType::uint8:
      return "Byte";
    case DataType::int32:
      return "Int";
    case DataType::int64:
      return "Long";
    case DataType::fp64:
      return "Double";
    case DataType::none:
      break;
  }
  return "";
}

// PyTorch's record names of collectives (args "Collective name").
std::string_view pytorch_collective(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "allreduce";
    case Collective::all_gather:
      return "allgather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::send:
      return "send";
    case Collective::recv:
      return "recv";
    case Collective::barrier:
      return "barrier";
    case Collective::send_recv:
      return "send_recv";
    case Collective::none:
      break;
  }
  return "";
}

// A collective's size under the names PyTorch's profiler gives it, which
// Holistic Trace Analysis and Kineto readers (this product's import among
// them) read: element counts in and out, the group's size. The store's count
// is the elements `bytes` counts (docs/trace-schema.md, "Collective sizes"):
// the whole output of an all-gather, the whole input of a reduce-scatter.
void kineto_collective_args(Output& out, const Event& e, int world_size) {
  const std::int64_t n = e.group_size > 0 ? e.group_size : std::max(world_size, 1);
  const int type_bytes = data_type_bytes(e.dtype);
  const std::int64_t count = e.count > 0 ? e.count : type_bytes > 0 ? e.bytes / type_bytes : 0;
  std::int64_t in = count, out_count = count;
  if (e.collective == Collective::all_gather) in = count / n;
  if (e.collective == Collective::reduce_scatter) out_count = count / n;
  out << ",\"Collective name\":\"" << pytorch_collective(e.collective)
      << "\",\"In msg nelems\":" << in << ",\"Out msg nelems\":" << out_count
      << ",\"Group size\":" << n;
}

// One end of a flow arrow: an event with a correlation, on its thread (lane).
struct FlowEnd {
  std::int32_t rank = 0;
  std::int64_t correlation = 0;
  std::int64_t start_ns = 0;
  std::int64_t tid = 0;
  auto operator<=>(const FlowEnd&) const = default;  // by rank, correlation, then start
  bool same_correlation(const FlowEnd& o) const {
    return rank == o.rank && correlation == o.correlation;
  }
};

struct RankFilter {
  std::set<std::int32_t> ranks;
  bool all = true;
  bool has(std::int32_t r) const { return all || ranks.count(r); }
};

// The ranks an export writes: the store's ranks rows, then each rank known
// only by its lanes (a store without a ranks row), as the analysis takes them.
std::vector<RankInfo> exported_ranks(const TraceReader& reader) {
  std::vector<RankInfo> ranks = reader.ranks();
  for (const LaneInfo& l : reader.lanes()) {
    if (std::none_of(ranks.begin(), ranks.end(),
                     [&](const RankInfo& r) { return r.rank == l.rank; }))
      ranks.push_back(RankInfo{l.rank, "", "", 0, 0, false});
  }
  return ranks;
}

// Each of `wanted` is a rank of the export, or the error names it.
Status check_ranks_known(const TraceReader& reader, const std::vector<std::int32_t>& wanted) {
  const std::vector<RankInfo> ranks = exported_ranks(reader);
  for (std::int32_t r : wanted) {
    if (std::none_of(ranks.begin(), ranks.end(),
                     [&](const RankInfo& info) { return info.rank == r; }))
      return Error{reader.path() + ": no rank " + std::to_string(r)};
  }
  return {};
}

// The longest event of any lane: an event overlapping a window starts at
// most this long before it.
std::int64_t longest_event_ns(const TraceReader& reader) {
  std::int64_t longest = 0;
  for (const LaneInfo& l : reader.lanes())
    longest = std::max(longest, l.max_duration_ns);
  return longest;
}

// What only this product's import reads back (otherData, which Perfetto and
// HTA leave alone): the marker that says whose export this is, and what the
// trace events cannot hold — the store's meta rows, each rank's row, each
// lane's kind and name (tid is the lane id), and the steps table. With it a
// store exported and imported again is the same store (docs/trace-schema.md).
Result<std::string> own_export_data(const TraceReader& reader, const RankFilter& filter,
                                    std::int64_t t0, std::int64_t t1, bool critical_path) {
  nlohmann::json other = {{kExportProducerKey, kExportProducer},
                          {kExportVersionKey, kExportVersion},
                          {"title", reader.run().title},
                          {"source", reader.run().source}};
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [key, value] : reader.all_meta())
    meta[key] = value;
  other["meta"] = std::move(meta);
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankInfo& r : reader.ranks()) {
    if (!filter.has(r.rank)) continue;
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"device", r.device},
                     {"pid", r.pid},
                     {"clock_offset_ns", r.clock_offset_ns},
                     {"clock_offset_measured", r.clock_offset_measured}});
  }
  other["ranks"] = std::move(ranks);
  nlohmann::json lanes = nlohmann::json::array();
  for (const LaneInfo& l : reader.lanes()) {
    if (!filter.has(l.rank)) continue;
    lanes.push_back({{"tid", l.id.value},
                     {"rank", l.rank},
                     {"kind", to_string(l.kind)},
                     {"name", l.name},
                     {"sort_index", l.sort_index}});
  }
  other["lanes"] = std::move(lanes);
  auto steps = reader.steps();
  if (!steps) return steps.error();
  nlohmann::json rows = nlohmann::json::array();
  for (const StepMetrics& s : *steps) {
    if (!filter.has(s.rank) || s.end_ns < t0 || s.start_ns >= t1) continue;
    rows.push_back({{"rank", s.rank},
                    {"step", s.step},
                    {"start_ns", s.start_ns},
                    {"end_ns", s.end_ns},
                    {"loss", s.loss},
                    {"tokens", s.tokens},
                    {"loss_scale", s.loss_scale}});
  }
  other["steps"] = std::move(rows);
  // The critical path's process is no rank: its pid, for the import to leave out.
  if (critical_path) other["critical_path_pid"] = kCriticalPathPid;
  // Text as the events' names: bytes that are not UTF-8 become U+FFFD.
  return other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// An event read from t0 - its lane's longest event on is in the window
// unless it ended by t0; an instant exactly at t0 is in it.
bool overlaps(const Event& e, const TimeRange& window) {
  return e.end_ns > window.start_ns || (e.start_ns == e.end_ns && e.start_ns == window.start_ns);
}

// The earliest start of the events a window export writes (a parent that
// began before the window): each lane's first event in the window, as lanes
// are read in time order. Empty when no event is in it.
Result<std::optional<std::int64_t>> earliest_start_in_window(const TraceReader& reader,
                                                             const RankFilter& filter,
                                                             const TimeRange& window) {
  std::optional<std::int64_t> earliest;
  for (const LaneInfo& lane : reader.lanes()) {
    if (!filter.has(lane.rank)) continue;
    Status s = reader.for_each_event({lane.id}, window.start_ns - lane.max_duration_ns,
                                     window.end_ns, [&](const StoredEvent& se) {
                                       if (!overlaps(se.event, window)) return true;
                                       earliest = std::min(earliest.value_or(se.event.start_ns),
                                                           se.event.start_ns);
                                       return false;
                                     });
    if (!s) return s.error();
  }
  return earliest;
}

Status write_chrome(const TraceReader& reader, const std::string& path,
                    const ChromeTraceOptions& options, const RankFilter& filter,
                    std::optional<std::int32_t> distributed_rank, ExportReport& report) {
  const TimeRange whole = reader.time_range();
  const std::int64_t t0 = options.window ? options.window->start_ns : kMinTime;
  const std::int64_t t1 = options.window ? options.window->end_ns : kMaxTime;
  // The counter samples in [t0, t1), read first: a sample may come before
  // every event (a GPU's memory before the first kernel). In a window, each
  // series' last sample before it too: the value in effect at its start
  // (the track was blank until the first sample inside).
  std::vector<CounterSample> counters;
  if (options.counters) {
    auto series = reader.counter_series();
    if (!series) return series.error();
    for (const CounterSeries& s : *series) {
      if (!filter.has(s.rank)) continue;
      auto samples = reader.counters(s.rank, s.name);
      if (!samples) return samples.error();
      std::optional<CounterSample> in_effect;
      for (const CounterSample& c : *samples) {
        if (c.time_ns < t0) {
          in_effect = c;
        } else if (c.time_ns < t1) {
          if (in_effect) counters.push_back(*std::exchange(in_effect, std::nullopt));
          counters.push_back(c);
        }
      }
      if (in_effect) counters.push_back(*in_effect);
    }
  }
  // Times count from the earliest event or sample written, so that none is
  // negative (Perfetto drops those): in a window, a parent that began before it.
  std::int64_t base = whole.start_ns;
  if (options.window) {
    auto earliest = earliest_start_in_window(reader, filter, *options.window);
    if (!earliest) return earliest.error();
    base = earliest->value_or(t0);
  }
  if (reader.event_count() == 0 && !counters.empty()) base = counters.front().time_ns;
  for (const CounterSample& c : counters)
    base = std::min(base, c.time_ns);

  Output out(path, reader);
  if (!out.ok()) return out.status();
  // baseTimeNanoseconds as PyTorch 2 writes it: base + ts is the store's
  // time (the host clock), which HTA and this product's import read back.
  out << "{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":" << base
      << ",\"distributedInfo\":{";
  if (distributed_rank) out << "\"rank\":" << *distributed_rank << ',';
  out << "\"world_size\":" << reader.world_size() << "},\"otherData\":";
  auto other = own_export_data(reader, filter, t0, t1, options.critical_path);
  if (!other) return other.error();
  out << *other << ",\n\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&] {
    if (!first) out << ",\n";
    first = false;
  };

  // Every rank that has a lane gets a process, even one without a ranks row.
  const std::vector<RankInfo> ranks = exported_ranks(reader);
  for (const RankInfo& rank : ranks) {
    if (!filter.has(rank.rank)) continue;
    std::string label = "Rank " + std::to_string(rank.rank);
    if (!rank.host.empty())
      label += " (" + rank.host + (rank.device.empty() ? "" : ", " + rank.device) + ")";
    else if (!rank.device.empty())
      label += " (" + rank.device + ")";
    begin_event();
    out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << rank.rank
        << ",\"tid\":0,\"args\":{\"name\":";
    json_string(out, label);
    out << "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << rank.rank
        << ",\"tid\":0,\"args\":{\"sort_index\":" << rank.rank << "}}";
  }
  std::vector<const LaneInfo*> lanes;
  for (const LaneInfo& l : reader.lanes()) {
    if (!filter.has(l.rank)) continue;
    lanes.push_back(&l);
    begin_event();
    out << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << l.rank
        << ",\"tid\":" << static_cast<std::int64_t>(l.id.value) << ",\"args\":{\"name\":";
    json_string(out, l.name);
    out << "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" << l.rank
        << ",\"tid\":" << static_cast<std::int64_t>(l.id.value)
        << ",\"args\":{\"sort_index\":" << l.sort_index << "}}";
  }

  // Escaped names by string id (a map: a damaged store's ids can be anything).
  std::unordered_map<std::uint32_t, std::string> names;
  auto escaped_name = [&](StringId id) -> const std::string& {
    std::string& cached = names[id.value];
    if (cached.empty()) {
      // Escape once, reuse: names repeat millions of times.
      std::string escaped = "\"";
      for (char c : valid_utf8(reader.string(id))) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
          escaped += '\\';
          escaped += c;
        } else if (u < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", u);
          escaped += b;
        } else {
          escaped += c;
        }
      }
      cached = escaped + "\"";
    }
    return cached;
  };
  std::vector<FlowEnd> calls, gpu_work;  // the ends of the flow arrows, below
  Status launch_error;                   // a launch that could not be read
  for (const LaneInfo* lane : lanes) {
    // Start early enough to take in the parents of what overlaps t0.
    const std::int64_t from = options.window ? t0 - lane->max_duration_ns : kMinTime;
    const std::int64_t stream = stream_of(*lane);
    Status s = reader.for_each_event({lane->id}, from, t1, [&](const StoredEvent& se) {
      const Event& e = se.event;
      if (options.window && !overlaps(e, *options.window)) return true;
      begin_event();
      out << "{\"ph\":\"X\",\"cat\":\"" << kineto_category(e.kind, *lane) << "\",\"name\":";
      // A step as PyTorch's profiler names it: HTA finds the iterations by
      // "ProfilerStep#N" (its temporal breakdown, critical path), and an
      // import reads it as a step; the stored name goes in the args.
      const bool profiler_step = e.kind == EventKind::step && e.step >= 0;
      if (profiler_step)
        out << "\"ProfilerStep#" << static_cast<std::int64_t>(e.step) << '"';
      else
        out << escaped_name(e.name);
      out << ",\"pid\":" << se.rank << ",\"tid\":" << static_cast<std::int64_t>(lane->id.value)
          << ",\"ts\":";
      micros(out, e.start_ns - base);
      out << ",\"dur\":";
      micros(out, e.end_ns - e.start_ns);
      out << ",\"args\":{\"category\":\"" << to_string(e.category) << "\",\"kind\":\""
          << to_string(e.kind) << '"';
      if (lane->kind == LaneKind::gpu_stream) out << ",\"stream\":" << stream;
      if (e.correlation != 0) {
        out << ",\"correlation\":" << e.correlation;
        const FlowEnd end{se.rank, e.correlation, e.start_ns, lane->id.value};
        if (lane->kind == LaneKind::gpu_stream)
          gpu_work.push_back(end);
        else if (e.kind == EventKind::api_call || e.kind == EventKind::sync)
          calls.push_back(end);
      }
      if (e.bytes != 0) out << ",\"bytes\":" << e.bytes;
      if (e.flops != 0) out << ",\"flops\":" << e.flops;
      if (e.step >= 0) out << ",\"step\":" << static_cast<std::int64_t>(e.step);
      if (profiler_step) out << ",\"stored_name\":" << escaped_name(e.name);
      if (e.collective != Collective::none) {
        out << ",\"collective\":\"" << to_string(e.collective) << '"';
        kineto_collective_args(out, e, reader.world_size());
      }
      if (e.dtype != DataType::none) out << ",\"dtype\":\"" << pytorch_dtype(e.dtype) << '"';
      if (e.count != 0) out << ",\"count\":" << e.count;
      if (e.peer >= 0) out << ",\"peer\":" << static_cast<std::int64_t>(e.peer);
      if (e.group_size != 0) out << ",\"group_size\":" << static_cast<std::int64_t>(e.group_size);
      {
        // Kineto's keys, so that Perfetto shows them and an import reads them back.
        auto launch = exported_launch(reader, se, lane);
        if (!launch) {
          launch_error = launch.error();
          return false;
        }
        if (*launch) {
          const KernelLaunch& l = **launch;
          out << ",\"grid\":[" << l.grid[0] << ',' << l.grid[1] << ',' << l.grid[2]
              << "],\"block\":[" << l.block[0] << ',' << l.block[1] << ',' << l.block[2] << ']';
          if (l.registers_per_thread >= 0)
            out << ",\"registers per thread\":" << l.registers_per_thread;
          if (l.shared_memory_bytes >= 0) out << ",\"shared memory\":" << l.shared_memory_bytes;
          if (l.dynamic_shared_memory_bytes >= 0)
            out << ",\"dynamic shared memory\":" << l.dynamic_shared_memory_bytes;
        }
      }
      out << "}}";
      ++report.events;
      return out.ok();
    });
    if (!s) return s;
    if (!launch_error) return launch_error;
    if (!out.ok()) return out.status();
  }

  if (options.critical_path) {
    // Each step's critical path (trace_critical_path.h) on a process of its
    // own, above the ranks: a "step N" slice holding the path's segments,
    // each named by its operation ("idle" between them), its part and rank
    // in args. A step whose window overlaps the previous one's (ranks'
    // clocks) starts where that one's path ended, so that slices nest.
    auto paths = critical_paths(reader);
    if (!paths) return paths.error();
    begin_event();
    out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << kCriticalPathPid
        << ",\"tid\":0,\"args\":{\"name\":\"Critical path\"}},\n{\"ph\":\"M\",\"name\":"
           "\"process_sort_index\",\"pid\":"
        << kCriticalPathPid
        << ",\"tid\":0,\"args\":{\"sort_index\":-1}},\n{\"ph\":\"M\",\"name\":\"thread_name\","
           "\"pid\":"
        << kCriticalPathPid << ",\"tid\":0,\"args\":{\"name\":\"each step's path\"}}";
    std::int64_t path_end = kMinTime;
    auto slice = [&](std::int64_t start, std::int64_t end) {
      out << ",\"pid\":" << kCriticalPathPid << ",\"tid\":0,\"ts\":";
      micros(out, start - base);
      out << ",\"dur\":";
      micros(out, end - start);
    };
    for (const CriticalPath& step_path : *paths) {
      const std::int64_t from = std::max({step_path.start_ns, path_end, t0, base});
      const std::int64_t to = std::min(step_path.end_ns, t1);
      if (to <= from) continue;
      begin_event();
      out << "{\"ph\":\"X\",\"cat\":\"critical_path\",\"name\":\"step " << step_path.step << '"';
      slice(from, to);
      out << ",\"args\":{\"step\":" << step_path.step << "}}";
      for (const CriticalSegment& seg : step_path.segments) {
        const std::int64_t a = std::max(seg.start_ns, from), b = std::min(seg.end_ns, to);
        if (b <= a) continue;
        begin_event();
        out << "{\"ph\":\"X\",\"cat\":\"critical_path\",\"name\":";
        if (seg.name.value == 0) {
          json_string(out, seg.part);
        } else {
          out << escaped_name(seg.name);
        }
        slice(a, b);
        out << ",\"args\":{\"part\":";
        json_string(out, seg.part);
        out << ",\"rank\":" << seg.rank << ",\"step\":" << step_path.step << "}}";
      }
      path_end = to;
      if (!out.ok()) return out.status();
    }
  }

  // Kineto's flow arrows from each runtime or driver call to the GPU work it
  // launched (one per correlation: the call's start to the work's start), so
  // that Perfetto draws them. Perfetto binds them by id across the file, and
  // correlation ids count per process: with several ranks in one file, the
  // id is rank * 2^32 + correlation (CUPTI's ids are 32-bit).
  const bool one_rank = filter.ranks.size() == 1 || ranks.size() <= 1;
  std::sort(calls.begin(), calls.end());
  std::sort(gpu_work.begin(), gpu_work.end());
  auto work = gpu_work.begin();
  for (auto call = calls.begin(); call != calls.end(); ++call) {
    if (call != calls.begin() && call[-1].same_correlation(*call)) continue;  // the earliest call
    work = std::lower_bound(work, gpu_work.end(), *call, [](const FlowEnd& a, const FlowEnd& b) {
      return std::pair(a.rank, a.correlation) < std::pair(b.rank, b.correlation);
    });
    if (work == gpu_work.end() || !work->same_correlation(*call)) continue;
    const std::int64_t id =
        one_rank ? call->correlation : (std::int64_t{call->rank} << 32) + call->correlation;
    begin_event();
    out << "{\"ph\":\"s\",\"id\":" << id << ",\"pid\":" << call->rank << ",\"tid\":" << call->tid
        << ",\"ts\":";
    micros(out, call->start_ns - base);
    out << ",\"cat\":\"ac2g\",\"name\":\"ac2g\"},\n{\"ph\":\"f\",\"id\":" << id
        << ",\"pid\":" << work->rank << ",\"tid\":" << work->tid << ",\"ts\":";
    micros(out, work->start_ns - base);
    out << ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}";
  }
  if (!out.ok()) return out.status();

  for (const CounterSample& c : counters) {
    const ChromeCounter counter = chrome_counter(reader.string(c.name));
    begin_event();
    out << "{\"ph\":\"C\",\"name\":";
    json_string(out, counter.name);
    out << ",\"pid\":" << c.rank << ",\"ts\":";
    micros(out, c.time_ns - base);
    out << ",\"args\":{";
    json_string(out, counter.key);
    out << ':' << c.value << "}}";
  }
  out << "\n]}\n";
  const std::int64_t bytes = out.bytes();
  if (Status s = out.close(); !s) return s;
  report.files.push_back(path);
  report.bytes += bytes;
  if (bytes > options.warn_bytes) {
    report.warnings.push_back(path + " is " + format_bytes(static_cast<double>(bytes)) +
                              ": browsers and the Perfetto UI struggle with JSON traces of a few "
                              "hundred MB; export a time window or fewer ranks");
  }
  return {};
}

// ---------------------------------------------------------------------------
// CSV

// How a text goes into a CSV field: as it is, quoted (it holds a comma, a
// quote or a line break), or not UTF-8 and made so first (as the JSON and
// HTML exports: a store written before its text was kept as UTF-8 may
// hold other bytes). Reads the whole text: the events table finds it once
// per name (CsvName), not once per event.
enum class CsvForm : std::uint8_t { as_is, quoted, not_utf8 };
CsvForm csv_form(std::string_view s) {
  if (!is_valid_utf8(s)) return CsvForm::not_utf8;
  return s.find_first_of(",\"\n\r") == std::string_view::npos ? CsvForm::as_is : CsvForm::quoted;
}

// A name of the store in a CSV row, its form found before.
struct CsvName {
  std::string_view text;
  CsvForm form;
};

void csv_field(Output& out, std::string_view s, CsvForm form) {
  if (form == CsvForm::not_utf8) {
    const std::string valid = valid_utf8(s);
    return csv_field(out, valid, csv_form(valid));
  }
  if (form == CsvForm::as_is) {
    out << s;
    return;
  }
  // In runs up to each quote, which is doubled: a character at a time, a
  // name of 200,000 characters with a comma took most of an export.
  out << '"';
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t quote = s.find('"', at);
    if (quote == std::string_view::npos) {
      out << s.substr(at);
      break;
    }
    out << s.substr(at, quote + 1 - at) << '"';
    at = quote + 1;
  }
  out << '"';
}

void csv_field(Output& out, std::string_view s) {
  csv_field(out, s, csv_form(s));
}

template <class... T>
void csv_row(Output& out, const T&... fields) {
  bool first = true;
  auto one = [&](const auto& f) {
    if (!first) out << ',';
    first = false;
    using F = std::decay_t<decltype(f)>;
    if constexpr (std::is_same_v<F, CsvName>)
      csv_field(out, f.text, f.form);
    else if constexpr (std::is_convertible_v<F, std::string_view>)
      csv_field(out, f);
    else if constexpr (std::is_same_v<F, std::optional<double>>) {
      if (f) out << *f;  // an empty field when there is none
    } else if constexpr (std::is_floating_point_v<F>)
      out << static_cast<double>(f);
    else
      out << static_cast<std::int64_t>(f);
  };
  (one(fields), ...);
  out << '\n';
}

constexpr auto kCsvNames =
    enum_names<CsvTable>(std::pair{CsvTable::events, std::string_view("events")},
                         std::pair{CsvTable::breakdown, std::string_view("breakdown")},
                         std::pair{CsvTable::kernels, std::string_view("kernels")},
                         std::pair{CsvTable::collectives, std::string_view("collectives")},
                         std::pair{CsvTable::stragglers, std::string_view("stragglers")},
                         std::pair{CsvTable::prediction, std::string_view("prediction")},
                         std::pair{CsvTable::api_calls, std::string_view("api_calls")},
                         std::pair{CsvTable::memory_ops, std::string_view("memory_ops")},
                         std::pair{CsvTable::annotations, std::string_view("annotations")});

void breakdown_row(Output& out, std::int32_t rank, std::string_view step, const Breakdown& b) {
  csv_row(out, rank, step, b.window_start_ns, b.window_end_ns, b.span_ns, b.busy_ns, b.compute_ns,
          b.communication_ns, b.overlap_ns, b.overlap_percent(), b.exposed_communication_ns,
          b.memory_ns, b.exposed_memory_ns, b.exposed_synchronization_ns, b.other_busy_ns,
          b.idle_ns, b.idle_host_wait_ns, b.idle_kernel_wait_ns, b.idle_other_ns, b.events);
}

// ---------------------------------------------------------------------------
// HTML

std::string html(std::string_view text) {
  const std::string s = valid_utf8(text);  // the page says charset=utf-8
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A name of the store (a kernel, a stream, a collective, a range) as the
// report shows it: elided past kShownNameChars characters
// (core/elided_name.h); the CSV tables and the Chrome trace keep it whole.
std::string html_name(std::string_view name) {
  return html(elided_name(name));
}

std::string ms(std::int64_t ns) {
  return format_fixed(static_cast<double>(ns) / 1e6, 3);
}
std::string pct(double part, double whole) {
  return whole > 0 ? format_fixed(100.0 * part / whole, 1) + "%" : "-";
}

std::string utc_text(std::int64_t ns) {
  if (ns <= 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return b;
}

std::string breakdown_svg(const std::vector<RankAnalysis>& ranks) {
  const int row = 26, label = 90, width = 640, top = 10;
  const int height = top + row * static_cast<int>(ranks.size()) + 56;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  std::to_string(label + width + 20) + "\" height=\"" + std::to_string(height) +
                  "\" role=\"img\" aria-label=\"time breakdown per rank\">";
  int y = top;
  for (const RankAnalysis& r : ranks) {
    s += "<text x=\"0\" y=\"" + std::to_string(y + 16) + "\" font-size=\"12\">rank " +
         std::to_string(r.rank) + "</text>";
    const double span = static_cast<double>(std::max<std::int64_t>(1, r.total.span_ns));
    double x = label;
    for (const BreakdownPart& seg : kBreakdownParts) {
      const std::int64_t ns = seg.ns(r.total);
      const double w = width * static_cast<double>(ns) / span;
      if (w <= 0) continue;
      s += "<rect x=\"" + format_fixed(x, 2) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
           format_fixed(w, 2) + "\" height=\"" + std::to_string(row - 6) + "\" fill=\"" +
           seg.color + "\"><title>" + seg.name + ": " + ms(ns) + " ms (" +
           pct(static_cast<double>(ns), span) + ")</title></rect>";
      x += w;
    }
    y += row;
  }
  int lx = label;
  for (const BreakdownPart& seg : kBreakdownParts) {
    const int item = 13 + static_cast<int>(std::strlen(seg.name)) * 6 + 10;
    if (lx + item > label + width) {  // the legend wraps onto a second line
      lx = label;
      y += 16;
    }
    s += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(y + 8) +
         "\" width=\"10\" height=\"10\" fill=\"" + seg.color + "\" stroke=\"#999\"/>";
    s += "<text x=\"" + std::to_string(lx + 13) + "\" y=\"" + std::to_string(y + 17) +
         "\" font-size=\"10\">" + seg.name + "</text>";
    lx += item;
  }
  return s + "</svg>";
}

// Up to this many ranks, each rank's step times are a line of its own colour
// with its name in the legend; with more, the lines could not be told apart
// (and the legend would not fit): the chart draws, per step, the band from
// the fastest to the slowest rank and the median rank's time, and says so.
constexpr std::size_t kStepLinesMax = 8;

std::string steps_svg(const std::vector<RankAnalysis>& ranks) {
  std::int64_t longest = 1;
  std::size_t most = 0;
  std::vector<const RankAnalysis*> with_steps;
  for (const RankAnalysis& r : ranks) {
    if (r.steps.empty()) continue;
    with_steps.push_back(&r);
    most = std::max(most, r.steps.size());
    for (const StepBreakdown& s : r.steps)
      longest = std::max(longest, s.breakdown.span_ns);
  }
  if (most == 0) return {};
  const int width = 640, height = 160, left = 60;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  std::to_string(left + width + 20) + "\" height=\"" + std::to_string(height + 30) +
                  "\" role=\"img\" aria-label=\"step times\">";
  s += "<text x=\"0\" y=\"12\" font-size=\"10\">" + ms(longest) + " ms</text>";
  s += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(height) + "\" x2=\"" +
       std::to_string(left + width) + "\" y2=\"" + std::to_string(height) + "\" stroke=\"#999\"/>";
  auto point = [&](std::size_t i, double ns) {
    const double x =
        left +
        (most > 1 ? width * static_cast<double>(i) / static_cast<double>(most - 1) : width / 2.0);
    const double y = height - height * ns / static_cast<double>(longest);
    return format_fixed(x, 1) + "," + format_fixed(y, 1) + " ";
  };
  auto line = [&](const std::string& points, const char* color, const std::string& title) {
    s += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" + std::string(color) +
         "\" points=\"" + points + "\"><title>" + title + "</title></polyline>";
  };
  auto legend = [&](int x, const char* color, const std::string& text) {
    s += "<text x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(height + 20) +
         "\" font-size=\"10\" fill=\"" + color + "\">" + text + "</text>";
  };
  legend(left, "#222", "step time, " + std::to_string(most) + " steps:");
  if (with_steps.size() <= kStepLinesMax) {
    static const char* const colors[kStepLinesMax] = {"#4c78a8", "#e45756", "#54a24b", "#f58518",
                                                      "#b279a2", "#72b7b2", "#9d755d", "#eeca3b"};
    for (std::size_t k = 0; k < with_steps.size(); ++k) {
      const RankAnalysis& r = *with_steps[k];
      std::string points;
      for (std::size_t i = 0; i < r.steps.size(); ++i)
        points += point(i, static_cast<double>(r.steps[i].breakdown.span_ns));
      line(points, colors[k], "rank " + std::to_string(r.rank));
      legend(left + 110 + 60 * static_cast<int>(k), colors[k], "rank " + std::to_string(r.rank));
    }
    return s + "</svg>";
  }
  // Per step index: the fastest, median and slowest of the ranks that have it.
  std::string low, middle, high;
  for (std::size_t i = 0; i < most; ++i) {
    std::vector<double> times;
    for (const RankAnalysis* r : with_steps) {
      if (i < r->steps.size()) times.push_back(static_cast<double>(r->steps[i].breakdown.span_ns));
    }
    const auto [fastest, slowest] = std::minmax_element(times.begin(), times.end());
    low += point(i, *fastest);
    high = point(i, *slowest) + high;  // backwards: the band's polygon goes round
    middle += point(i, median(times));
  }
  s += "<polygon fill=\"#c6d7ea\" stroke=\"none\" points=\"" + low + high +
       "\"><title>fastest to slowest rank</title></polygon>";
  line(middle, "#4c78a8", "median rank");
  legend(left + 110, "#7f9fc4",
         "fastest to slowest of " + std::to_string(with_steps.size()) + " ranks (band)");
  legend(left + 330, "#4c78a8", "median rank (line)");
  return s + "</svg>";
}

std::string prediction_svg(const PredictionComparison& p) {
  double largest = 0;
  for (const auto& row : p.categories) {
    largest = std::max(largest, row.predicted_s);
    if (row.measured_s) largest = std::max(largest, *row.measured_s);
  }
  if (largest <= 0) return {};
  const int label = 130, width = 500, row = 34;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  std::to_string(label + width + 120) + "\" height=\"" +
                  std::to_string(row * static_cast<int>(p.categories.size()) + 10) +
                  "\" role=\"img\" aria-label=\"predicted against measured\">";
  int y = 4;
  for (const auto& r : p.categories) {
    s += "<text x=\"0\" y=\"" + std::to_string(y + 18) + "\" font-size=\"12\">" + html(r.name) +
         "</text>";
    const double wp = width * r.predicted_s / largest;
    s += "<rect x=\"" + std::to_string(label) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
         format_fixed(wp, 2) + "\" height=\"12\" fill=\"#bab0ac\"><title>predicted " +
         format_seconds(r.predicted_s) + "</title></rect>";
    if (r.measured_s) {
      const double wm = width * *r.measured_s / largest;
      s += "<rect x=\"" + std::to_string(label) + "\" y=\"" + std::to_string(y + 14) +
           "\" width=\"" + format_fixed(wm, 2) +
           "\" height=\"12\" fill=\"#4c78a8\"><title>measured " + format_seconds(*r.measured_s) +
           "</title></rect>";
    }
    y += row;
  }
  return s + "</svg>";
}

}  // namespace

ChromeCounter chrome_counter(std::string_view stored_name) {
  const std::size_t space = stored_name.rfind(' ');
  if (space != std::string_view::npos && space > 0 && space + 1 < stored_name.size()) {
    const std::string_view name = stored_name.substr(0, space);
    const std::string_view key = stored_name.substr(space + 1);
    if (key != "value" && key != name) return {name, key};
  }
  return {stored_name, "value"};
}

std::string stored_counter_name(std::string_view name, std::string_view key) {
  if (key == "value" || key == name) return std::string(name);
  std::string stored(name);
  stored += ' ';
  stored += key;
  return stored;
}

Status check_export_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Error{path + ": is a folder; an export is written to a file: give a file name"};
  if (Status s = check_not_read_only(path); !s) return s;
  if (!is_sqlite_file(path)) return {};
  return Error{path +
               ": is an SQLite database (a trace store, or another program's); an export "
               "does not replace it: remove it or give another name"};
}

Result<ExportReport> export_chrome_trace(const TraceReader& reader, const std::string& path,
                                         const ChromeTraceOptions& options) {
  RankFilter filter;
  filter.all = options.ranks.empty();
  filter.ranks.insert(options.ranks.begin(), options.ranks.end());
  if (Status s = check_ranks_known(reader, options.ranks); !s) return s.error();
  const std::vector<RankInfo> ranks = exported_ranks(reader);
  if (options.window && options.window->empty())
    return Error{"export: the time window is empty (its end is not after its start)"};
  if (options.critical_path && options.file_per_rank)
    return Error{"export: a critical path crosses the ranks: not in one file per rank"};
  ExportReport report;
  if (!options.file_per_rank) {
    std::optional<std::int32_t> rank;
    if (ranks.size() == 1) rank = ranks[0].rank;
    if (options.ranks.size() == 1) rank = options.ranks[0];
    if (Status s = write_chrome(reader, path, options, filter, rank, report); !s) return s.error();
    return report;
  }
  std::filesystem::path p(path);
  const std::string stem = (p.parent_path() / p.stem()).string();
  auto file_of = [&stem](std::int32_t rank) {
    return stem + ".rank" + std::to_string(rank) + ".json";
  };
  // Every file checked before any is written. A rank with no event to write
  // (none in the window, or a rank that recorded none) would get a file that
  // no import reads, and the set of files would not import.
  const TimeRange span = options.window.value_or(TimeRange{kMinTime, kMaxTime});
  for (const RankInfo& r : ranks) {
    if (!filter.has(r.rank)) continue;
    if (Status s = check_export_path(file_of(r.rank)); !s) return s.error();
    RankFilter one;
    one.all = false;
    one.ranks.insert(r.rank);
    auto earliest = earliest_start_in_window(reader, one, span);
    if (!earliest) return earliest.error();
    if (!earliest->has_value()) {
      return Error{"export: rank " + std::to_string(r.rank) + " has no event " +
                   (options.window ? "in the time window" : "at all") + ": " + file_of(r.rank) +
                   " would hold none, which no import reads; nothing was written (choose the "
                   "other ranks with --rank)"};
    }
  }
  for (const RankInfo& r : ranks) {
    if (!filter.has(r.rank)) continue;
    RankFilter one;
    one.all = false;
    one.ranks.insert(r.rank);
    if (Status s = write_chrome(reader, file_of(r.rank), options, one, r.rank, report); !s)
      return s.error();
  }
  return report;
}

Result<bool> window_holds_events(const TraceReader& reader, const TimeRange& window,
                                 const std::vector<std::int32_t>& ranks) {
  if (Status s = check_ranks_known(reader, ranks); !s) return s.error();
  RankFilter filter;
  filter.all = ranks.empty();
  filter.ranks.insert(ranks.begin(), ranks.end());
  auto earliest = earliest_start_in_window(reader, filter, window);
  if (!earliest) return earliest.error();
  return earliest->has_value();
}

std::string_view to_string(CsvTable t) {
  return kCsvNames.name(t);
}
std::optional<CsvTable> csv_table_from_string(std::string_view text) {
  return kCsvNames.parse(text);
}

Result<ExportReport> export_csv(const TraceReader& reader, const RunAnalysis* analysis,
                                CsvTable table, const std::string& path,
                                std::optional<TimeRange> window) {
  // Figures lacking the rows of a damaged page (the analysis read it with
  // readers of its own, whose damage the store's reader does not see).
  if (table != CsvTable::events && analysis && !analysis->damage.empty())
    return Error{analysis->damage + "; " + path + " was not written"};
  if (table != CsvTable::events && !analysis)
    return Error{"export: the " + std::string(to_string(table)) + " table needs an analysis"};
  ExportReport report;
  Output out(path, reader);
  if (!out.ok()) return out.status().error();
  switch (table) {
    case CsvTable::events: {
      csv_row(out, "id", "rank", "lane", "lane_kind", "kind", "category", "name", "start_ns",
              "end_ns", "duration_ns", "correlation", "bytes", "flops", "collective", "dtype",
              "count", "peer", "group_size", "step", "grid", "block", "registers_per_thread",
              "shared_memory_bytes", "dynamic_shared_memory_bytes");
      // The events overlapping the window, as the Chrome trace has them.
      const std::int64_t t0 = window ? window->start_ns : kMinTime;
      const std::int64_t t1 = window ? window->end_ns : kMaxTime;
      const std::int64_t from = window ? t0 - longest_event_ns(reader) : kMinTime;
      Status launch_error;
      // Each name's and lane's form, found once: a name of 200,000
      // characters was read through for every event of it.
      std::unordered_map<std::uint32_t, CsvForm> name_forms, lane_forms;
      auto name_of = [&](StringId id) {
        const std::string& text = reader.string(id);
        auto [it, added] = name_forms.try_emplace(id.value);
        if (added) it->second = csv_form(text);
        return CsvName{text, it->second};
      };
      auto lane_name_of = [&](const LaneInfo* lane) {
        if (!lane) return CsvName{{}, CsvForm::as_is};
        auto [it, added] = lane_forms.try_emplace(lane->id.value);
        if (added) it->second = csv_form(lane->name);
        return CsvName{lane->name, it->second};
      };
      Status s = reader.for_each_event({}, from, t1, [&](const StoredEvent& se) {
        const Event& e = se.event;
        if (window && !overlaps(e, *window)) return true;
        const LaneInfo* lane = reader.lane(e.lane);
        // A kernel's launch: "128x1x1"; empty where none was kept.
        std::string grid, block, registers, shared, dynamic;
        {
          auto launch = exported_launch(reader, se, lane);
          if (!launch) {
            launch_error = launch.error();
            return false;
          }
          if (*launch) {
            const KernelLaunch& l = **launch;
            auto dims = [](const std::int64_t(&d)[3]) {
              return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
            };
            grid = dims(l.grid);
            block = dims(l.block);
            auto known = [](std::int64_t v) { return v >= 0 ? std::to_string(v) : std::string(); };
            registers = known(l.registers_per_thread);
            shared = known(l.shared_memory_bytes);
            dynamic = known(l.dynamic_shared_memory_bytes);
          }
        }
        csv_row(out, se.id, se.rank, lane_name_of(lane),
                lane ? to_string(lane->kind) : std::string_view(), to_string(e.kind),
                to_string(e.category), name_of(e.name), e.start_ns, e.end_ns, e.end_ns - e.start_ns,
                e.correlation, e.bytes, e.flops, to_string(e.collective), to_string(e.dtype),
                e.count, e.peer, e.group_size, e.step, std::string_view(grid),
                std::string_view(block), std::string_view(registers), std::string_view(shared),
                std::string_view(dynamic));
        ++report.events;
        return out.ok();
      });
      if (!s) return s.error();
      if (!launch_error) return launch_error.error();
      break;
    }
    case CsvTable::breakdown:
      csv_row(out, "rank", "step", "window_start_ns", "window_end_ns", "span_ns", "busy_ns",
              "compute_ns", "communication_ns", "overlap_ns", "overlap_percent",
              "exposed_communication_ns", "memory_ns", "exposed_memory_ns",
              "exposed_synchronization_ns", "other_busy_ns", "idle_ns", "idle_host_wait_ns",
              "idle_kernel_wait_ns", "idle_other_ns", "device_events");
      for (const RankAnalysis& r : analysis->ranks) {
        breakdown_row(out, r.rank, "all", r.total);
        for (const StepBreakdown& s : r.steps)
          breakdown_row(out, r.rank, std::to_string(s.step), s.breakdown);
      }
      break;
    case CsvTable::kernels:
      csv_row(out, "rank", "name", "kind", "category", "count", "total_ns", "mean_ns", "median_ns",
              "min_ns", "max_ns", "share", "stddev_ns");
      for (const KernelStats& k : analysis->kernels)
        csv_row(out, "all", k.name, to_string(k.kind), to_string(k.category), k.count, k.total_ns,
                k.mean_ns, k.median_ns, k.min_ns, k.max_ns, k.share, k.stddev_ns);
      for (const RankAnalysis& r : analysis->ranks) {
        for (const KernelStats& k : r.kernels)
          csv_row(out, std::to_string(r.rank), k.name, to_string(k.kind), to_string(k.category),
                  k.count, k.total_ns, k.mean_ns, k.median_ns, k.min_ns, k.max_ns, k.share,
                  k.stddev_ns);
      }
      break;
    case CsvTable::collectives:
      csv_row(out, "rank", "collective", "name", "dtype", "bytes", "ranks", "count", "total_ns",
              "mean_ns", "median_ns", "min_ns", "max_ns", "algbw_gbps", "busbw_gbps",
              "transfer_median_ns", "transfer_busbw_gbps");
      // The transfer figures are run-wide: 0 in the rows of one rank.
      for (const CollectiveStats& c : analysis->collectives)
        csv_row(out, "all", to_string(c.collective), c.name, to_string(c.dtype), c.bytes, c.ranks,
                c.count, c.total_ns, c.mean_ns, c.median_ns, c.min_ns, c.max_ns, c.algbw_gbps,
                c.busbw_gbps, c.transfer_median_ns, c.transfer_busbw_gbps);
      for (const RankAnalysis& r : analysis->ranks) {
        for (const CollectiveStats& c : r.collectives)
          csv_row(out, std::to_string(r.rank), to_string(c.collective), c.name, to_string(c.dtype),
                  c.bytes, c.ranks, c.count, c.total_ns, c.mean_ns, c.median_ns, c.min_ns, c.max_ns,
                  c.algbw_gbps, c.busbw_gbps, c.transfer_median_ns, c.transfer_busbw_gbps);
      }
      break;
    case CsvTable::stragglers:
      csv_row(out, "rank", "median_step_ns", "step_excess", "late_start_ns", "collectives",
              "straggler", "reason");
      for (const RankStraggler& s : analysis->stragglers.ranks)
        csv_row(out, s.rank, s.step_ns, s.step_excess, s.late_start_ns, s.collectives,
                s.straggler ? 1 : 0, s.reason);
      break;
    case CsvTable::prediction:
      csv_row(out, "group", "name", "predicted_s", "measured_s");
      if (analysis->prediction) {
        const PredictionComparison& p = *analysis->prediction;
        csv_row(out, "step", "step", p.predicted_step_s, p.measured_step_s);
        for (const auto& r : p.categories)
          csv_row(out, "category", r.name, r.predicted_s, r.measured_s);
        for (const auto& r : p.parts)
          csv_row(out, "part", r.name, r.predicted_s, r.measured_s);
        // Each part of the step, on the critical rank's median step (`trace stats`).
        if (!p.breakdown.empty())
          csv_row(out, "breakdown", "step", p.predicted_step_s, p.measured_step_median_s);
        for (const auto& r : p.breakdown)
          csv_row(out, "breakdown", r.name, r.predicted_s, r.measured_s);
      }
      break;
    case CsvTable::api_calls:
    case CsvTable::annotations: {
      // The run's rows ("all"), then each rank's, as the kernels table.
      csv_row(out, "rank", "name", "count", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns",
              "share", "stddev_ns");
      const bool calls = table == CsvTable::api_calls;
      auto rows = [&](std::string_view rank, const std::vector<KernelStats>& list) {
        for (const KernelStats& k : list)
          csv_row(out, rank, k.name, k.count, k.total_ns, k.mean_ns, k.median_ns, k.min_ns,
                  k.max_ns, k.share, k.stddev_ns);
      };
      rows("all", calls ? analysis->api_calls : analysis->annotations);
      for (const RankAnalysis& r : analysis->ranks)
        rows(std::to_string(r.rank), calls ? r.api_calls : r.annotations);
      break;
    }
    case CsvTable::memory_ops: {
      csv_row(out, "rank", "name", "kind", "count", "total_ns", "mean_ns", "median_ns", "min_ns",
              "max_ns", "share", "total_bytes", "mean_bytes", "median_bytes", "min_bytes",
              "max_bytes", "throughput_gbps", "stddev_ns");
      auto rows = [&](std::string_view rank, const std::vector<MemoryOpStats>& list) {
        for (const MemoryOpStats& m : list)
          csv_row(out, rank, m.time.name, to_string(m.time.kind), m.time.count, m.time.total_ns,
                  m.time.mean_ns, m.time.median_ns, m.time.min_ns, m.time.max_ns, m.time.share,
                  m.total_bytes, m.mean_bytes, m.median_bytes, m.min_bytes, m.max_bytes,
                  m.throughput_gbps, m.time.stddev_ns);
      };
      rows("all", analysis->memory_ops);
      for (const RankAnalysis& r : analysis->ranks)
        rows(std::to_string(r.rank), r.memory_ops);
      break;
    }
  }
  report.bytes = out.bytes();
  if (Status s = out.close(); !s) return s.error();
  report.files.push_back(path);
  return report;
}

Result<ExportReport> export_html_report(const TraceReader& reader, const RunAnalysis& analysis,
                                        const std::string& path, const ReportNotes& notes) {
  const RunInfo run = reader.run();
  // The integrity check's words, else what the analysis met.
  const std::string& damage = notes.damage.empty() ? analysis.damage : notes.damage;
  Output out(path, reader, /*damage_said=*/!damage.empty());
  if (!out.ok()) return out.status().error();
  const std::string title =
      run.title.empty() ? std::filesystem::path(reader.path()).filename().string() : run.title;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" << html(title)
      << " - ClusterScope report</title>\n<style>\n"
      << "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:2em;"
         "color:#222;max-width:1100px}\n"
      << "h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}\n"
      << "table{border-collapse:collapse;margin:.5em 0;font-size:.85em}\n"
      << "th,td{border:1px solid #ddd;padding:3px 8px;text-align:left}\n"
      << "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
      << "th{background:#f4f4f4}.note{color:#666;font-size:.85em}\n"
      << ".bad{color:#b00;font-weight:bold}code{font-size:.9em}\n</style></head><body>\n";
  out << "<h1>" << html(title) << "</h1>\n";
  if (!damage.empty()) {
    out << "<p class=bad>" << html(damage)
        << ". The figures below are of what could be read.</p>\n";
  }
  if (notes.window) {
    const TimeRange run_range = reader.time_range();
    const auto ms = [](std::int64_t ns) { return format_fixed(static_cast<double>(ns) / 1e6, 3); };
    out << "<p class=bad>A range of the run: " << ms(notes.window->start_ns - run_range.start_ns)
        << " to " << ms(notes.window->end_ns - run_range.start_ns) << " ms from its start ("
        << ms(notes.window->end_ns - notes.window->start_ns)
        << " ms). The breakdown is of the time inside this range; the tables of kernels, calls, "
           "copies, ranges and collectives hold every operation that overlaps it, whole, as do "
           "the steps.</p>\n";
  }

  out << "<h2>Run</h2>\n<table>\n";
  auto meta_row = [&](std::string_view k, const std::string& v) {
    if (v.empty()) return;
    out << "<tr><th>" << k << "</th><td>" << html(v) << "</td></tr>\n";
  };
  meta_row("store", reader.path());
  meta_row("source", run.source);
  meta_row("status", reader.state().status);
  meta_row("started", utc_text(run.start_utc_ns));
  meta_row("clock", run.clock);
  meta_row("host", run.host);
  meta_row("command line", run.command_line);
  meta_row("world size", std::to_string(reader.world_size()));
  meta_row("events", std::to_string(reader.event_count()));
  meta_row("clock alignment", reader.meta("clock_alignment").value_or(""));
  meta_row("tool versions", run.tool_versions_json);
  out << "</table>\n";
  if (!run.plan_json.empty()) {
    // Indented: one line of JSON ran off a printed page.
    const nlohmann::json plan = parse_json_text(run.plan_json);
    out << "<details><summary>plan (JSON)</summary><pre>"
        << html(plan.is_discarded() ? run.plan_json : plan.dump(1)) << "</pre></details>\n";
  }
  out << "<table><tr><th>rank</th><th>host</th><th>device</th><th>pid</th></tr>\n";
  for (const RankInfo& r : reader.ranks()) {
    out << "<tr><td class=n>" << r.rank << "</td><td>" << html(r.host) << "</td><td>"
        << html(r.device) << "</td><td class=n>" << r.pid << "</td></tr>\n";
  }
  out << "</table>\n";

  out << "<h2>Where the time went</h2>\n<p class=note>Over each rank's device span (first to "
         "last GPU event; the CPU engine's compute and communication lanes where there is no "
         "GPU), as Holistic Trace Analysis defines it. Compute, exposed communication, exposed "
         "memory and idle share out the span (the rest is synchronization and other device "
         "work); exposed communication: not under compute; exposed memory: under neither compute "
         "nor communication; host wait and idle other are parts of idle; communication is all of "
         "it, "
         "overlap the share of it hidden under compute; "
      << html(kEventsStartingNote) << ".</p>\n";
  out << breakdown_svg(analysis.ranks) << "\n<table>\n<tr><th>rank</th><th>span ms</th>"
      << "<th>compute</th><th>communication</th><th>overlap</th><th>exposed comm.</th>"
      << "<th>exposed memory</th><th>idle</th><th>host wait</th><th>idle other</th>"
      << "<th>" << kEventsStartingName << "</th></tr>\n";
  for (const RankAnalysis& r : analysis.ranks) {
    const Breakdown& b = r.total;
    const double span = static_cast<double>(b.span_ns);
    out << "<tr><td class=n>" << r.rank << (r.gpu ? "" : " (CPU)") << "</td><td class=n>"
        << ms(b.span_ns) << "</td><td class=n>" << pct(static_cast<double>(b.compute_ns), span)
        << "</td><td class=n>" << pct(static_cast<double>(b.communication_ns), span)
        << "</td><td class=n>"
        << (b.span_ns > 0 ? format_fixed(b.overlap_percent(), 1) + "%" : std::string("-"))
        << "</td><td class=n>" << pct(static_cast<double>(b.exposed_communication_ns), span)
        << "</td><td class=n>" << pct(static_cast<double>(b.exposed_memory_ns), span)
        << "</td><td class=n>" << pct(static_cast<double>(b.idle_ns), span) << "</td><td class=n>"
        << pct(static_cast<double>(b.idle_host_wait_ns), span) << "</td><td class=n>"
        << pct(static_cast<double>(b.idle_other_ns), span) << "</td><td class=n>" << b.events
        << "</td></tr>\n";
  }
  out << "</table>\n";

  // HTA's idle time breakdown, per stream.
  out << "<h2>Idle time per stream</h2>\n<p class=note>The gaps between one stream's own "
         "events, as Holistic Trace Analysis breaks them down, in percent of the stream's span: "
         "host wait when the next event was launched after the stream's last one ended, kernel "
         "wait when shorter than "
      << AnalysisOptions{}.kernel_wait_ns
      << " ns, other (waiting for another stream, or for data) the rest. Its queue is the "
         "operations launched on it that have not started yet (HTA's queue length), on average "
         "over its span and at most: a deep queue means the host runs ahead.</p>\n<table>\n"
         "<tr><th>rank</th><th>stream</th><th>events</th><th>span ms</th><th>busy</th>"
         "<th>idle</th><th>host wait</th><th>kernel wait</th><th>idle other</th>"
         "<th>queue mean</th><th>queue max</th></tr>\n";
  for (const RankAnalysis& r : analysis.ranks) {
    for (const StreamIdle& st : r.streams) {
      const double span = static_cast<double>(st.span_ns);
      out << "<tr><td class=n>" << r.rank << "</td><td>" << html_name(st.name)
          << "</td><td class=n>" << st.events << "</td><td class=n>" << ms(st.span_ns)
          << "</td><td class=n>" << pct(static_cast<double>(st.busy_ns), span)
          << "</td><td class=n>" << pct(static_cast<double>(st.idle_ns()), span)
          << "</td><td class=n>" << pct(static_cast<double>(st.idle_host_wait_ns), span)
          << "</td><td class=n>" << pct(static_cast<double>(st.idle_kernel_wait_ns), span)
          << "</td><td class=n>" << pct(static_cast<double>(st.idle_other_ns), span)
          << "</td><td class=n>" << (st.launched > 0 ? format_fixed(st.queue_mean, 1) : "-")
          << "</td><td class=n>" << (st.launched > 0 ? std::to_string(st.queue_max) : "-")
          << "</td></tr>\n";
    }
  }
  out << "</table>\n";

  if (std::any_of(analysis.ranks.begin(), analysis.ranks.end(),
                  [](const RankAnalysis& r) { return r.launches.launches > 0; })) {
    auto us = [](double ns_value) { return format_fixed(ns_value / 1e3, 1); };
    std::int64_t synchronous = 0;
    for (const RankAnalysis& r : analysis.ranks)
      synchronous += r.launches.synchronous_left_out;
    out << "<h2>Kernel launches</h2>\n<p class=note>Each kernel, and each asynchronous copy or "
           "memset, with the runtime call that launched it (their correlation id), as Holistic "
           "Trace Analysis counts them: the delay is the GPU's start less the call's end; a "
           "kernel shorter than its call leaves the GPU waiting on the host.";
    if (synchronous > 0)
      out << " " << synchronous << " synchronous "
          << (synchronous == 1 ? "copy or memset (cudaMemcpy, cudaMemset) is"
                               : "copies and memsets (cudaMemcpy, cudaMemset) are")
          << " left out: the call lasts until the copy ends, so it is no launch.";
    out << "</p>\n<table>\n<tr><th>rank</th>"
           "<th>launches</th><th>call median us</th><th>call p95 us</th><th>delay median us</th>"
           "<th>delay p95 us</th><th>delay max us</th><th>shorter than call</th>"
        << "<th>calls &gt; " << AnalysisOptions{}.runtime_cutoff_ns / 1000 << " us</th>"
        << "<th>delays &gt; " << AnalysisOptions{}.launch_delay_cutoff_ns / 1000
        << " us</th></tr>\n";
    for (const RankAnalysis& r : analysis.ranks) {
      const LaunchStats& l = r.launches;
      if (l.launches == 0) continue;
      out << "<tr><td class=n>" << r.rank << "</td><td class=n>" << l.launches
          << "</td><td class=n>" << us(l.call_median_ns) << "</td><td class=n>"
          << us(l.call_p95_ns) << "</td><td class=n>" << us(l.delay_median_ns)
          << "</td><td class=n>" << us(l.delay_p95_ns) << "</td><td class=n>"
          << us(l.delay_max_ns) << "</td><td class=n>" << l.short_kernels << "</td><td class=n>"
          << l.runtime_outliers << "</td><td class=n>" << l.delay_outliers << "</td></tr>\n";
    }
    out << "</table>\n";
  }

  const std::string steps = steps_svg(analysis.ranks);
  if (!steps.empty()) {
    out << "<h2>Steps</h2>\n"
        << steps
        << "\n<p class=note>Each step's time, shared out: compute, exposed communication, exposed "
           "memory, other (synchronization and other device work) and idle add up to it.</p>\n"
        << "<table>\n<tr><th>rank</th><th>step</th><th>time ms</th><th>compute ms</th>"
        << "<th>exposed comm. ms</th><th>exposed memory ms</th><th>other ms</th><th>idle ms</th>"
        << "</tr>\n";
    for (const RankAnalysis& r : analysis.ranks) {
      for (const StepBreakdown& s : r.steps) {
        out << "<tr><td class=n>" << r.rank << "</td><td class=n>" << s.step << "</td><td class=n>"
            << ms(s.breakdown.span_ns) << "</td><td class=n>" << ms(s.breakdown.compute_ns)
            << "</td><td class=n>" << ms(s.breakdown.exposed_communication_ns)
            << "</td><td class=n>" << ms(s.breakdown.exposed_memory_ns) << "</td><td class=n>"
            << ms(s.breakdown.exposed_synchronization_ns + s.breakdown.other_busy_ns)
            << "</td><td class=n>" << ms(s.breakdown.idle_ns) << "</td></tr>\n";
      }
    }
    out << "</table>\n";
  }

  if (!analysis.prediction_error.empty()) {
    out << "<h2>Predicted against measured</h2>\n<p class=bad>" << html(analysis.prediction_error)
        << ": the run's figures are shown without its prediction.</p>\n";
  }
  if (analysis.prediction) {
    const PredictionComparison& p = *analysis.prediction;
    out << "<h2>Predicted against measured</h2>\n<p>Step: predicted "
        << format_seconds(p.predicted_step_s) << ", measured " << format_seconds(p.measured_step_s)
        << (p.steps > 0 ? " (mean of " + std::to_string(p.steps) + " rank-steps)"
                        : " (the whole trace as one step)")
        << ".</p>\n";
    if (!p.breakdown.empty()) {
      const std::string note =
          mean_against_median_note(p.measured_step_s, p.measured_step_median_s, p.critical_rank);
      if (!note.empty()) out << "<p class=note>" << html(note) << "</p>\n";
    }
    // A prediction of the step alone has no categories or parts: no chart
    // and no table (an empty one stood under "Grey: predicted").
    const bool by_category = !p.categories.empty() || !p.parts.empty();
    if (by_category) {
      out << prediction_svg(p)
          << "\n<p class=note>Grey: predicted; blue: measured.</p>\n<table>\n<tr><th></th>"
             "<th>name</th><th>predicted</th><th>measured</th><th>error</th></tr>\n";
    }
    // The prediction's error, as trace stats and the app's Predicted tab give
    // it for the same rows (this table gave measured / predicted: "10.30"
    // beside their "-90.3 %").
    auto rows = [&](const char* group, const std::vector<PredictedVsMeasured>& list) {
      for (const auto& r : list) {
        out << "<tr><td>" << group << "</td><td>" << html(r.name) << "</td><td class=n>"
            << format_seconds(r.predicted_s) << "</td><td class=n>"
            << (r.measured_s ? format_seconds(*r.measured_s) : "-") << "</td><td class=n>"
            << (r.measured_s ? prediction_error_text(r.predicted_s, *r.measured_s) : "-")
            << "</td></tr>\n";
      }
    };
    rows("category", p.categories);
    rows("part", p.parts);
    if (by_category) out << "</table>\n";
    // What `trace stats` says under it, from the same comparison.
    if (!p.breakdown.empty()) {
      out << "<h3>Each part of the step</h3>\n<p class=note>Rank " << p.critical_rank
          << ": of the stage the planner timed, the most compute; median of its "
          << html(describe_steps(p.critical_steps, p.critical_warm_up))
          << ".</p>\n<table>\n<tr><th>part</th><th>predicted</th><th>measured</th>"
             "<th>error</th><th></th></tr>\n<tr><td>step</td><td class=n>"
          << format_seconds(p.predicted_step_s) << "</td><td class=n>"
          << format_seconds(p.measured_step_median_s) << "</td><td class=n>"
          << prediction_error_text(p.predicted_step_s, p.measured_step_median_s)
          << "</td><td></td></tr>\n";
      for (std::size_t i = 0; i < p.breakdown.size(); ++i) {
        const auto& r = p.breakdown[i];
        const double m = r.measured_s.value_or(0);
        const bool largest = static_cast<int>(i) == p.largest;
        out << "<tr><td>" << html(r.name) << "</td><td class=n>" << format_seconds(r.predicted_s)
            << "</td><td class=n>" << format_seconds(m) << "</td><td class=n>"
            << prediction_error_text(r.predicted_s, m) << "</td><td"
            << (largest ? " class=bad>largest disagreement" : ">") << "</td></tr>\n";
      }
      out << "</table>\n<p>" << html(p.verdict) << ".</p>\n";
    }
    if (!p.memory.empty()) {
      out << "<h3>Memory per device</h3>\n<p class=note>Predicted for the most loaded stage, "
             "and for a pipeline's first and last stage; measured: the largest sample of any "
             "rank (of the stage's ranks).</p>\n<table>\n<tr><th></th>"
             "<th>predicted</th><th>measured</th><th>error</th><th>measured by</th></tr>\n";
      for (const MemoryVsMeasured& m : p.memory) {
        out << "<tr><td>" << html(memory_row_label(m)) << "</td><td class=n>"
            << format_bytes(m.predicted_bytes) << "</td><td class=n>"
            << (m.measured_bytes ? format_bytes(*m.measured_bytes) : "-") << "</td><td class=n>"
            << (m.measured_bytes ? prediction_error_text(m.predicted_bytes, *m.measured_bytes)
                                 : "-")
            << "</td><td>" << html(memory_row_source(m)) << "</td></tr>\n";
      }
      out << "</table>\n<p class=note>" << html(kMemoryRowsNote) << ".</p>\n";
    } else if (!p.memory_note.empty()) {
      out << "<p>Memory per device: " << html(p.memory_note) << ".</p>\n";
    }
    if (p.machine) {
      out << "<p>The machine, probed before the first step: " << html(p.machine->text())
          << ".</p>\n";
      if (p.machine->drifted()) out << "<p class=bad>" << html(kMachineDriftAdvice) << "</p>\n";
    } else if (!p.machine_note.empty()) {
      out << "<p>Machine probe: " << html(p.machine_note) << ".</p>\n";
    }
  }

  out << "<h2>Top kernels</h2>\n<table>\n<tr><th>name</th><th>category</th><th>count</th>"
      << "<th>total ms</th><th>mean us</th><th>median us</th><th>min us</th><th>max us</th>"
      << "<th>stddev us</th><th>share</th></tr>\n";
  // A kernel's, a call's or a range's figures, from its count on.
  auto duration_cells = [&out](const KernelStats& k) {
    out << "<td class=n>" << k.count << "</td><td class=n>" << ms(k.total_ns) << "</td><td class=n>"
        << format_fixed(k.mean_ns / 1e3, 2) << "</td><td class=n>"
        << format_fixed(k.median_ns / 1e3, 2) << "</td><td class=n>"
        << format_fixed(static_cast<double>(k.min_ns) / 1e3, 2) << "</td><td class=n>"
        << format_fixed(static_cast<double>(k.max_ns) / 1e3, 2) << "</td><td class=n>"
        << format_fixed(k.stddev_ns / 1e3, 2) << "</td><td class=n>"
        << format_fixed(k.share * 100, 1) << "%</td></tr>\n";
  };
  // Under a table of the first rows: how many there are, and where the rest are.
  constexpr std::size_t kListed = 25;
  auto say_rows_left_out = [&out](std::size_t total, std::string_view csv_table) {
    if (total > kListed)
      out << "<p class=note>" << static_cast<std::int64_t>(kListed) << " of "
          << static_cast<std::int64_t>(total) << " listed; all of them: "
          << "<code>clusterscope trace export STORE -o FILE.csv --table " << csv_table
          << "</code>.</p>\n";
  };
  std::size_t shown = 0;
  for (const KernelStats& k : analysis.kernels) {
    if (shown++ == kListed) break;
    out << "<tr><td><code>" << html(cut_for_message(k.name, 119)) << "</code></td><td>"
        << to_string(k.category) << "</td>";
    duration_cells(k);
  }
  out << "</table>\n";
  say_rows_left_out(analysis.kernels.size(), "kernels");

  // The operations with FLOPs, as trace stats gives them (where the
  // analysis was asked for them: AnalysisOptions::gemm_rates).
  const GemmRates& gemms = analysis.gemms ? *analysis.gemms : GemmRates{};
  if (!analysis.gemms) {
  } else if (gemms.rows.empty()) {
    out << "<p>" << html(gemm_rates_absent(gemms)) << "</p>\n";
  } else {
    out << "<h2>" << html(gemm_rates_title(gemms)) << "</h2>\n<p class=note>"
        << html(gemm_rates_caption(gemms))
        << "</p>\n<table>\n<tr><th>name</th><th>type</th><th>count</th><th>GFLOP</th>"
           "<th>total ms</th><th>FLOP/s</th><th>share</th><th>% of peak</th></tr>\n";
    std::size_t listed = 0;
    for (const GemmRate& g : gemms.rows) {
      if (listed++ == kListed) break;
      const auto percent = g.percent_of_peak();
      out << "<tr><td><code>" << html_name(g.name) << "</code></td><td>"
          << (g.precision.empty() ? "-" : g.precision) << "</td><td class=n>" << g.count
          << "</td><td class=n>" << format_significant(g.flops / 1e9, 4) << "</td><td class=n>"
          << ms(g.time_ns) << "</td><td class=n>"
          << (g.time_ns > 0 ? format_rate(g.flops_per_second(), "FLOP/s") : "-")
          << "</td><td class=n>" << format_fixed(g.share * 100, 1) << "%</td><td class=n>"
          << (percent ? format_fixed(*percent, 1) + "%" : "") << "</td></tr>\n";
    }
    out << "</table>\n";
    if (gemms.rows.size() > kListed)
      out << "<p class=note>" << static_cast<std::int64_t>(kListed) << " of "
          << static_cast<std::int64_t>(gemms.rows.size())
          << " listed; all of them: <code>clusterscope trace stats STORE --top "
          << static_cast<std::int64_t>(gemms.rows.size()) << "</code>.</p>\n";
    for (const std::string& note : gemm_rates_notes(gemms))
      out << "<p class=note>" << html(note) << ".</p>\n";
  }

  // Calls and ranges, timed by name.
  auto timed_table = [&](const std::vector<KernelStats>& rows, std::string_view heading,
                         std::string_view note, std::string_view csv_table) {
    if (rows.empty()) return;
    out << "<h2>" << heading << "</h2>\n<p class=note>" << note
        << "</p>\n<table>\n<tr><th>name</th><th>count</th><th>total ms</th><th>mean us</th>"
           "<th>median us</th><th>min us</th><th>max us</th><th>stddev "
           "us</th><th>share</th></tr>\n";
    std::size_t listed = 0;
    for (const KernelStats& c : rows) {
      if (listed++ == kListed) break;
      out << "<tr><td><code>" << html_name(c.name) << "</code></td>";
      duration_cells(c);
    }
    out << "</table>\n";
    say_rows_left_out(rows.size(), csv_table);
  };
  timed_table(analysis.api_calls, "CUDA API calls",
              "The runtime and driver calls of all ranks by name, as Nsight Systems' cuda_api_sum "
              "sums them; share: of all calls' time.",
              "api_calls");

  if (!analysis.memory_ops.empty()) {
    out << "<h2>Device copies and sets</h2>\n<p class=note>All ranks, by kind, as Nsight "
           "Systems' cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum; GB/s: the bytes over the "
           "time of all of them; share: of all copies' and sets' time.</p>\n"
           "<table>\n<tr><th>operation</th><th>count</th><th>total ms</th><th>mean us</th>"
           "<th>median us</th><th>max us</th><th>total</th><th>mean size</th><th>max size</th>"
           "<th>GB/s</th><th>share</th></tr>\n";
    shown = 0;
    for (const MemoryOpStats& m : analysis.memory_ops) {
      if (shown++ == kListed) break;
      const bool sized = m.total_bytes > 0;
      out << "<tr><td><code>" << html_name(m.time.name) << "</code></td><td class=n>"
          << m.time.count << "</td><td class=n>" << ms(m.time.total_ns) << "</td><td class=n>"
          << format_fixed(m.time.mean_ns / 1e3, 2) << "</td><td class=n>"
          << format_fixed(m.time.median_ns / 1e3, 2) << "</td><td class=n>"
          << format_fixed(static_cast<double>(m.time.max_ns) / 1e3, 2) << "</td><td class=n>"
          << (sized ? format_bytes(static_cast<double>(m.total_bytes)) : "-") << "</td><td class=n>"
          << (sized ? format_bytes(m.mean_bytes) : "-") << "</td><td class=n>"
          << (sized ? format_bytes(static_cast<double>(m.max_bytes)) : "-") << "</td><td class=n>"
          << (sized && m.time.total_ns > 0 ? format_fixed(m.throughput_gbps, 2) : "-")
          << "</td><td class=n>" << format_fixed(m.time.share * 100, 1) << "%</td></tr>\n";
    }
    out << "</table>\n";
    say_rows_left_out(analysis.memory_ops.size(), "memory_ops");
  }

  timed_table(analysis.annotations, "Annotation ranges",
              "NVTX ranges and the engines' phases of all ranks by name, as Nsight Systems' "
              "nvtx_sum sums them; share: of all ranges' time, a range inside another counted in "
              "both.",
              "annotations");

  if (!analysis.counters.empty()) {
    // The counters this store holds by name: a fixed "GPU memory in use"
    // stood over a CPU engine's process memory, and over any other counter.
    std::vector<std::string> names;
    for (const CounterStats& k : analysis.counters)
      if (std::find(names.begin(), names.end(), k.name) == names.end()) names.push_back(k.name);
    std::string listed;
    for (std::size_t i = 0; i < names.size() && i < 3; ++i)
      listed += (i > 0 ? ", " : "") + html_name(names[i]);
    if (names.size() > 3) listed += " and " + std::to_string(names.size() - 3) + " more";
    out << "<h2>Sampled counters</h2>\n<p class=note>Each rank's counters (here: " << listed
        << "): the largest sample is the peak, as PyTorch's "
           "max_memory_allocated gives it; at: its time from the trace's first event.</p>\n"
           "<table>\n<tr><th>rank</th><th>counter</th><th>samples</th><th>least</th>"
           "<th>largest</th><th>at</th><th>last</th></tr>\n";
    const std::int64_t origin = reader.time_range().start_ns;
    for (const CounterStats& k : analysis.counters) {
      auto value = [&](double v) { return counter_value_text(k, v); };
      out << "<tr><td class=n>" << k.rank << "</td><td>" << html_name(k.name) << "</td><td class=n>"
          << k.samples << "</td><td class=n>" << value(k.least) << "</td><td class=n>"
          << value(k.greatest) << "</td><td class=n>"
          << format_fixed(static_cast<double>(k.greatest_at_ns - origin) / 1e6, 3)
          << " ms</td><td class=n>" << value(k.last) << "</td></tr>\n";
    }
    out << "</table>\n";
  }

  if (!analysis.collectives.empty()) {
    out << "<h2>Collectives</h2>\n<p class=note>Bandwidths by the nccl-tests formulas: algbw = "
           "size / mean time; busbw = algbw &times; 2(n&minus;1)/n for all-reduce, (n&minus;1)/n "
           "for all-gather, reduce-scatter and all-to-all. The mean includes the time a rank "
           "waited for its peers; <em>transfer</em> is each call's shortest duration across the "
           "ranks that made it (the rank that joined last, which waited for none), "
           "median.</p>\n<table>\n<tr><th>collective</th>"
           "<th>type</th><th>size</th><th>ranks</th><th>count</th><th>mean us</th>"
           "<th>algbw GB/s</th><th>busbw GB/s</th><th>transfer us</th><th>its busbw GB/s</th>"
           "</tr>\n";
    for (const CollectiveStats& c : analysis.collectives) {
      out << "<tr><td><code>" << html_name(c.name) << "</code></td><td>" << to_string(c.dtype)
          << "</td><td class=n>" << (c.bytes > 0 ? format_bytes(static_cast<double>(c.bytes)) : "-")
          << "</td><td class=n>" << c.ranks << "</td><td class=n>" << c.count << "</td><td class=n>"
          << format_fixed(c.mean_ns / 1e3, 2) << "</td><td class=n>"
          << (c.bytes > 0 ? format_fixed(c.algbw_gbps, 2) : "-") << "</td><td class=n>"
          << (c.bytes > 0 ? format_fixed(c.busbw_gbps, 2) : "-") << "</td><td class=n>"
          << (c.transfer_median_ns > 0 ? format_fixed(c.transfer_median_ns / 1e3, 2) : "-")
          << "</td><td class=n>"
          << (c.transfer_busbw_gbps > 0 ? format_fixed(c.transfer_busbw_gbps, 2) : "-")
          << "</td></tr>\n";
    }
    out << "</table>\n";
  }

  // The critical path of the whole run's steps (`trace critical-path`); a
  // range's report has none (its steps are cut).
  if (!notes.window) {
    out << "<h2>Critical path</h2>\n<p class=note>The chain of operations, across the ranks, "
           "that set each step's length (HTA's critical path): where a collective or a pipeline "
           "receive waited, the path goes on through the rank it waited for, so waiting is never "
           "on it. Mean time per step.</p>\n";
    auto run_path = summarize_critical_paths(reader);
    if (!run_path) {
      out << "<p class=bad>" << html(run_path.message()) << "</p>\n";
    } else if (run_path->steps == 0) {
      out << "<p>No critical path: the run records no events.</p>\n";
    } else {
      const double step = run_path->step_ns;
      const auto row = [&](const std::string& name, double ns) {
        out << "<tr><td>" << html_name(name) << "</td><td class=n>" << format_fixed(ns / 1e6, 3)
            << "</td><td class=n>" << format_fixed(step > 0 ? 100.0 * ns / step : 0.0, 1)
            << "%</td></tr>\n";
      };
      out << "<p>" << html(describe_steps(run_path->steps, run_path->warm_up)) << ", the mean step "
          << format_fixed(step / 1e6, 3) << " ms.</p>\n";
      out << "<table>\n<tr><th>part</th><th>ms per step</th><th>share</th></tr>\n";
      for (const auto& [part, ns] : run_path->parts)
        row(std::string(part), ns);
      out << "</table>\n<table>\n<tr><th>rank</th><th>ms per step</th><th>share</th></tr>\n";
      for (const auto& [rank, ns] : run_path->ranks)
        row(std::to_string(rank), ns);
      out << "</table>\n<table>\n<tr><th>operation</th><th>ms per step</th><th>share</th></tr>\n";
      constexpr std::size_t kOperations = 15;
      for (std::size_t i = 0; i < run_path->operations.size() && i < kOperations; ++i)
        row(reader.string(run_path->operations[i].name), run_path->operations[i].per_step_ns);
      out << "</table>\n";
      if (run_path->operations.size() > kOperations)
        out << "<p class=note>" << std::to_string(kOperations) << " of "
            << std::to_string(run_path->operations.size()) << " operations shown.</p>\n";
    }
  }

  if (analysis.ranks.size() > 1) {
    out << "<h2>Stragglers</h2>\n";
    if (analysis.stragglers.stragglers.empty()) out << "<p>No rank stands out.</p>\n";
    out << "<table>\n<tr><th>rank</th><th>median step ms</th><th>"
        << (analysis.ranks.size() == 2 ? "vs the faster rank" : "vs median rank")
        << "</th><th>collectives start late by (mean)</th><th></th></tr>\n";
    for (const RankStraggler& s : analysis.stragglers.ranks) {
      out << "<tr><td class=n>" << s.rank << "</td><td class=n>"
          << (s.step_ns > 0 ? format_fixed(s.step_ns / 1e6, 3) : "-") << "</td><td class=n>"
          << (s.step_ns > 0 ? format_fixed(s.step_excess * 100, 1) + "%" : "-")
          << "</td><td class=n>"
          << (s.collectives > 0 ? format_fixed(s.late_start_ns / 1e3, 1) + " us" : "-")
          << "</td><td" << (s.straggler ? " class=bad>" : ">") << html(s.reason) << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  out << "<p class=note>Written by ClusterScope from " << html(reader.path()) << ".</p>\n"
      << "</body></html>\n";
  ExportReport report;
  report.bytes = out.bytes();
  if (Status s = out.close(); !s) return s.error();
  report.files.push_back(path);
  return report;
}

}  // namespace cs::trace
