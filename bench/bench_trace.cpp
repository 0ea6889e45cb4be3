// Trace store speed, against the targets of the trace store's issue:
//   writing              >= 2 M events/s into a file store
//   10 M event store     open + one lane window query at 2000 px < 10 ms;
//                        the full per-rank analysis < 2 s, its peak memory
//                        well below the store's size
//   Kineto JSON import   MB/s for a ~100 MB trace
//   Nsight Systems import  records/s and peak memory for an export of some
//                        2 M kernels and CUDA calls (the repository's real
//                        export, its rows copied forward in time)
//   many streams         the analysis's time per event the same at 2000 and
//                        16000 streams of one rank
//
//   bench_trace [--events N] [--dir D] [--json-mb M] [--keep] [--quick]
//
// Each phase runs in a child process of its own (this program again), so
// the peak memory reported is that phase's alone (MiB, as the kernel counts
// it). --quick: every size a hundredth (100,000 events, a 1 MB trace), to
// see that it runs, not to measure.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "bench/bench_args.h"
#include "core/trace_analysis.h"
#include "core/trace_critical_path.h"
#include "core/trace_import.h"
#include "core/trace_reader.h"
#include "core/trace_sqlite.h"
#include "core/trace_writer.h"

using namespace cs::trace;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double file_mb(const std::string& path) {
  std::error_code ec;
  double total = 0;
  for (const char* suffix : {"", "-wal"}) {
    const auto size = std::filesystem::file_size(path + suffix, ec);
    if (!ec) total += static_cast<double>(size);
  }
  return total / 1e6;
}

// A cheap deterministic generator: the producer must not be the bottleneck.
struct Lcg {
  std::uint64_t s;
  std::uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>(s >> 33);
  }
  std::int64_t in(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint32_t>(hi - lo + 1));
  }
};

// ---------------------------------------------------------------------------
// write: a data-parallel run as CUPTI would record it. Per rank: a compute
// stream of kernels (each launched by a cudaLaunchKernel on the main thread),
// a communication stream whose all-reduces overlap the compute, and steps.
// `lanes_per_rank` > 0 instead piles everything on one stream of one rank.

// The writer's floor on this machine at this moment: as many rows into a
// bare events table (the store's schema for it, its pragmas), one
// INSERT ... SELECT of packed rows per 65536 and one commit each, on one
// thread, nothing else. Rows/s, timing the statements and commits only.
double sqlite_floor_rows_per_s(const std::string& path, std::int64_t rows) {
  namespace sql = cs::trace::sql;
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(path + suffix);
  auto opened = sql::Database::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!opened) return 0;
  sql::Database db = std::move(opened).value();
  if (!db.exec("PRAGMA page_size = 16384; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
               "PRAGMA wal_autocheckpoint = 0; PRAGMA cache_size = -65536;") ||
      !db.exec("CREATE TABLE events(id INTEGER PRIMARY KEY, lane INTEGER NOT NULL, kind INTEGER "
               "NOT NULL, category INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT "
               "NULL, name INTEGER NOT NULL, correlation INTEGER NOT NULL, step INTEGER NOT NULL)"))
    return 0;
  constexpr int kColumns = 8;
  constexpr std::int64_t kBatch = 65536;
  sql::IntRows* table = sql::IntRows::attach(db, "floor_rows", kColumns);
  auto insert = db.prepare(
      "INSERT INTO events(lane, kind, category, start_ns, end_ns, name, correlation, step) "
      "SELECT * FROM floor_rows");
  if (!table || !insert) return 0;
  std::vector<std::int64_t> values(static_cast<std::size_t>(kBatch * kColumns));
  Lcg rng{7};
  std::int64_t t = 1'700'000'000'000'000'000;
  double seconds = 0;
  for (std::int64_t done = 0; done < rows;) {
    const std::int64_t n = std::min(kBatch, rows - done);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t* v = values.data() + i * kColumns;
      const std::int64_t end = t + rng.in(2'000, 60'000);
      const std::int64_t row[kColumns] = {
          1 + (i % 32),      0, 0, t, end, static_cast<std::int64_t>(rng.next() % 200), done + i,
          (done + i) / 20000};
      std::copy(row, row + kColumns, v);
      t = end + rng.in(500, 4'000);
    }
    table->set(values.data(), static_cast<std::size_t>(n));
    const auto start = Clock::now();
    if (!db.exec("BEGIN")) return 0;
    insert->reset();
    if (insert->step() != SQLITE_DONE || !db.exec("COMMIT")) return 0;
    seconds += seconds_since(start);
    done += n;
  }
  table->set(nullptr, 0);
  db.close();
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(path + suffix);
  return seconds > 0 ? static_cast<double>(rows) / seconds : 0;
}

int phase_write(const std::string& path, std::int64_t events, int ranks, bool one_lane) {
  auto created = TraceWriter::create(path, RunInfo{"benchmark", "bench_trace", 0, "synthetic"});
  if (!created) {
    std::fprintf(stderr, "%s\n", created.message().c_str());
    return 1;
  }
  TraceWriter& w = **created;
  std::vector<LaneId> compute, comm, cpu, steps;
  for (int r = 0; r < ranks; ++r) {
    w.add_rank(
        {r, "node" + std::to_string(r / 8), "GPU " + std::to_string(r % 8), 1000 + r, 0, false});
    compute.push_back(w.add_lane(r, LaneKind::gpu_stream, "GPU stream 7", 1));
    comm.push_back(w.add_lane(r, LaneKind::gpu_stream, "GPU stream 13 (NCCL)", 2));
    cpu.push_back(w.add_lane(r, LaneKind::cpu_thread, "main thread", 0));
    steps.push_back(w.add_lane(r, LaneKind::steps, "steps", -1));
  }
  std::vector<StringId> kernels;
  for (int i = 0; i < 200; ++i)
    kernels.push_back(w.intern("sm90_xmma_gemm_bf16_kernel_" + std::to_string(i)));
  const StringId launch = w.intern("cudaLaunchKernel");
  const StringId allreduce = w.intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  const StringId step_name = w.intern("train_step");

  Lcg rng{42};
  std::vector<std::int64_t> t(static_cast<std::size_t>(ranks), 1'700'000'000'000'000'000);
  std::vector<std::int64_t> step_start(t);
  std::vector<int> step(static_cast<std::size_t>(ranks), 0);
  std::int64_t written = 0, correlation = 0;
  const double c0 = cs::bench::cpu_seconds();
  const auto start = Clock::now();
  Event e;
  while (written < events) {
    for (int r = 0; r < ranks && written < events; ++r) {
      // 64 kernels and their launches, then an all-reduce over the last 40.
      std::int64_t& now = t[static_cast<std::size_t>(r)];
      std::int64_t comm_start = 0;
      for (int k = 0; k < 64 && written < events; ++k) {
        ++correlation;
        e = Event{};
        e.lane = cpu[static_cast<std::size_t>(r)];
        e.kind = EventKind::api_call;
        e.category = Category::other;
        e.start_ns = now - 8000;
        e.end_ns = now - 3000;
        e.name = launch;
        e.correlation = correlation;
        if (!one_lane) {
          w.add(e);
          ++written;
        }
        e.lane = compute[static_cast<std::size_t>(r)];
        e.kind = EventKind::kernel;
        e.category = Category::compute;
        e.start_ns = now;
        e.end_ns = now + rng.in(2'000, 60'000);
        e.name = kernels[rng.next() % kernels.size()];
        e.step = step[static_cast<std::size_t>(r)];
        w.add(e);
        ++written;
        now = e.end_ns + rng.in(500, 4'000);
        if (k == 24) comm_start = now;
      }
      if (!one_lane) {
        e = Event{};
        e.lane = comm[static_cast<std::size_t>(r)];
        e.kind = EventKind::collective;
        e.category = Category::communication;
        e.start_ns = comm_start;
        e.end_ns = now + rng.in(0, 400'000);
        e.name = allreduce;
        e.collective = Collective::all_reduce;
        e.dtype = DataType::bf16;
        e.count = 1 << 24;
        e.bytes = 2 << 24;
        e.group_size = ranks;
        w.add(e);
        ++written;
        now = std::max(now, e.end_ns);
        if (rng.next() % 8 == 0) {  // a step every ~8 rounds
          const std::size_t i = static_cast<std::size_t>(r);
          w.add(StepMetrics{r, step[i], step_start[i], now, 2.0, 4096, 0});
          e = Event{};
          e.lane = steps[i];
          e.kind = EventKind::step;
          e.category = Category::other;
          e.start_ns = step_start[i];
          e.end_ns = now;
          e.name = step_name;
          e.step = step[i];
          w.add(e);
          ++written;
          ++step[i];
          now += 50'000;  // the host prepares the next batch
          step_start[i] = now;
        }
      }
    }
  }
  const cs::Status flushed = w.flush();
  const double write_s = seconds_since(start);
  const auto close_start = Clock::now();
  const cs::Status closed = w.close();
  const double close_s = seconds_since(close_start);
  if (!flushed || !closed) {
    std::fprintf(stderr, "%s %s\n", flushed.message().c_str(), closed.message().c_str());
    return 1;
  }
  const double cpu_s = cs::bench::cpu_seconds() - c0;
  std::printf(
      "events=%lld write_s=%.3f rate_meps=%.3f close_s=%.3f total_rate_meps=%.3f cpu_s=%.3f "
      "mb=%.1f\n",
      static_cast<long long>(written), write_s, written / write_s / 1e6, close_s,
      written / (write_s + close_s) / 1e6, cpu_s, file_mb(path));
  // The reference, measured right after in the same process: the machine's
  // speed moves from run to run, the ratio much less.
  const double floor = sqlite_floor_rows_per_s(path + ".floor", written);
  std::printf("sqlite_floor_meps=%.3f (the events table alone) writer_vs_floor=%.2f\n", floor / 1e6,
              floor > 0 ? written / write_s / floor : 0.0);
  return 0;
}

// ---------------------------------------------------------------------------

int phase_query(const std::string& path) {
  // Open + first query of the busiest lane, 20 times, each with a new reader
  // (the file is in the page cache, as right after a run or an import). Wall
  // time on a loaded machine includes waiting for a core; CPU time does not.
  std::vector<double> wall, cpu;
  std::size_t spans = 0;
  std::int64_t lane_events = 0;
  for (int i = 0; i < 20; ++i) {
    const double c0 = cs::bench::cpu_seconds();
    const auto t0 = Clock::now();
    auto opened = TraceReader::open(path);
    if (!opened) {
      std::fprintf(stderr, "%s\n", opened.message().c_str());
      return 1;
    }
    TraceReader& r = **opened;
    const LaneInfo* lane = &r.lanes().front();
    for (const LaneInfo& l : r.lanes()) {
      if (l.event_count > lane->event_count) lane = &l;
    }
    auto first = r.spans(lane->id, lane->first_ns, lane->last_ns + 1, 2000);
    wall.push_back(seconds_since(t0) * 1e3);
    cpu.push_back((cs::bench::cpu_seconds() - c0) * 1e3);
    if (!first) {
      std::fprintf(stderr, "%s\n", first.message().c_str());
      return 1;
    }
    spans = first->size();
    lane_events = lane->event_count;
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf(
      "lane_events=%lld open_plus_query_ms: min=%.2f median=%.2f max=%.2f cpu_median=%.2f "
      "spans=%zu\n",
      static_cast<long long>(lane_events), wall.front(), wall[wall.size() / 2], wall.back(),
      cpu[cpu.size() / 2], spans);

  auto opened = TraceReader::open(path);
  if (!opened) return 1;
  TraceReader& r = **opened;
  const LaneInfo* lane = &r.lanes().front();
  for (const LaneInfo& l : r.lanes()) {
    if (l.event_count > lane->event_count) lane = &l;
  }
  // Zoom levels from the whole lane down to 1/100000 of it, at random places.
  std::mt19937_64 rng(7);
  const std::int64_t span = lane->last_ns - lane->first_ns;
  for (double fraction : {1.0, 0.1, 0.01, 0.001, 0.0001, 0.00001}) {
    std::vector<double> times, cpu_times;
    std::size_t most = 0;
    for (int i = 0; i < 60; ++i) {
      const double c0 = cs::bench::cpu_seconds();
      const std::int64_t width =
          std::max<std::int64_t>(1000, static_cast<std::int64_t>(span * fraction));
      const std::int64_t a =
          lane->first_ns +
          static_cast<std::int64_t>(
              rng() % static_cast<std::uint64_t>(std::max<std::int64_t>(1, span - width + 1)));
      const auto q = Clock::now();
      auto window = r.spans(lane->id, a, a + width, 2000);
      times.push_back(seconds_since(q) * 1e3);
      cpu_times.push_back((cs::bench::cpu_seconds() - c0) * 1e3);
      if (!window) return 1;
      most = std::max(most, window->size());
    }
    std::sort(times.begin(), times.end());
    std::sort(cpu_times.begin(), cpu_times.end());
    std::printf(
        "zoom=%g p50_ms=%.3f p95_ms=%.3f max_ms=%.3f cpu_p50_ms=%.3f cpu_max_ms=%.3f "
        "max_spans=%zu\n",
        fraction, times[times.size() / 2], times[times.size() * 95 / 100], times.back(),
        cpu_times[cpu_times.size() / 2], cpu_times.back(), most);
  }
  return 0;
}

// A counter of `samples` samples (a PyTorch profile's allocator events, a
// tracer's memory sampled every few microseconds): the timeline's reduced
// query at 2000 px over zoom levels, against reading the series whole (what
// a chart of it reads).
int phase_counters(const std::string& path, std::int64_t samples) {
  std::filesystem::remove(path);
  {
    auto w = TraceWriter::create(path, {});
    if (!w) {
      std::fprintf(stderr, "%s\n", w.message().c_str());
      return 1;
    }
    (*w)->add_rank({0, "host", "GPU", 1, 0, false});
    const StringId name = (*w)->intern("GPU 0 memory allocated (bytes)");
    std::mt19937_64 rng(11);
    std::int64_t t = 0;
    for (std::int64_t i = 0; i < samples; ++i) {
      t += 1 + std::int64_t(rng() % 4000);
      (*w)->add(CounterSample{0, name, t, double(rng() % (1ULL << 34))});
    }
    if (auto closed = (*w)->close(); !closed) {
      std::fprintf(stderr, "%s\n", closed.message().c_str());
      return 1;
    }
  }
  auto opened = TraceReader::open(path);
  if (!opened) return 1;
  const TraceReader& r = **opened;
  auto median_ms = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> series_ms, whole_ms;
  CounterSeries series;
  for (int i = 0; i < 5; ++i) {
    auto q = Clock::now();
    auto listed = r.counter_series();
    series_ms.push_back(seconds_since(q) * 1e3);
    if (!listed || listed->empty()) return 1;
    series = listed->front();
    q = Clock::now();
    auto all = r.counters(series.rank, series.name);
    whole_ms.push_back(seconds_since(q) * 1e3);
    if (!all) return 1;
  }
  std::printf("samples=%lld series_list_ms=%.1f read_whole_series_ms=%.1f\n",
              static_cast<long long>(series.samples), median_ms(series_ms), median_ms(whole_ms));
  std::mt19937_64 rng(7);
  const std::int64_t span = series.last_ns - series.first_ns;
  for (double fraction : {1.0, 0.1, 0.01, 0.001}) {
    std::vector<double> times;
    std::size_t columns = 0;
    for (int i = 0; i < 20; ++i) {
      const std::int64_t width =
          std::max<std::int64_t>(1000, std::int64_t(double(span) * fraction));
      const std::int64_t a =
          series.first_ns +
          std::int64_t(rng() % std::uint64_t(std::max<std::int64_t>(1, span - width + 1)));
      const auto q = Clock::now();
      auto view = r.counter_view(series.rank, series.name, a, a + width, 2000);
      times.push_back(seconds_since(q) * 1e3);
      if (!view) return 1;
      columns = std::max(columns, view->columns.size());
    }
    std::printf("zoom=%g counter_view_p50_ms=%.2f vs_whole_series=%.3f max_columns=%zu\n", fraction,
                median_ms(times), median_ms(times) / median_ms(whole_ms), columns);
  }
  return 0;
}

int phase_analyse(const std::string& path, int threads) {
  const double c0 = cs::bench::cpu_seconds();
  const auto t0 = Clock::now();
  auto opened = TraceReader::open(path);
  if (!opened) return 1;
  AnalysisOptions options;
  options.threads = threads;
  auto a = analyze_run(**opened, options);
  const double s = seconds_since(t0);
  if (!a) {
    std::fprintf(stderr, "%s\n", a.message().c_str());
    return 1;
  }
  std::int64_t device_events = 0;
  for (const RankAnalysis& r : a->ranks)
    device_events += r.total.events;
  std::printf(
      "ranks=%zu device_events=%lld steps=%zu analysis_s=%.3f cpu_s=%.3f overlap_rank0=%.1f%%\n",
      a->ranks.size(), static_cast<long long>(device_events),
      a->ranks.empty() ? 0 : a->ranks[0].steps.size(), s, cs::bench::cpu_seconds() - c0,
      a->ranks.empty() ? 0.0 : a->ranks[0].total.overlap_percent());
  return 0;
}

// The critical path of every step across the ranks, summarised as `trace
// critical-path` does (the paths' segments are not kept). A phase of its
// own: its peak memory is not the analysis's.
int phase_critical_path(const std::string& path) {
  auto opened = TraceReader::open(path);
  if (!opened) return 1;
  const auto t1 = Clock::now();
  auto paths = summarize_critical_paths(**opened);
  if (!paths) {
    std::fprintf(stderr, "%s\n", paths.message().c_str());
    return 1;
  }
  std::printf("critical_path_s=%.3f steps=%d (after %d of warm-up)\n", seconds_since(t1),
              paths->steps, paths->warm_up);
  return 0;
}

// ---------------------------------------------------------------------------
// The parts of each step (measure_rank_parts, what trace stats holds against
// a prediction) over a CPU-engine-like rank of `steps` steps, each 30 ops,
// an all-reduce and a wait: its time per step must not grow with the steps
// (it clipped every event to every step: 15,000 steps took 80 s).

struct PartsTimes {
  double parts_us_per_step = 0, critical_path_us_per_step = 0;
};

int parts_once(const std::string& path, int steps, PartsTimes& times) {
  {
    auto created = TraceWriter::create(path, RunInfo{"parts", "bench_trace", 0, "synthetic"});
    if (!created) return 1;
    TraceWriter& w = **created;
    w.add_rank({0, "node", "CPU", 1, 0, false});
    const LaneId compute = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
    const LaneId comm = w.add_lane(0, LaneKind::cpu_thread, "communication", 1);
    const LaneId step_lane = w.add_lane(0, LaneKind::steps, "steps", -1);
    const StringId ops[] = {w.intern("mlp.fc"), w.intern("attention.core"), w.intern("layer_norm"),
                            w.intern("gelu")};
    const StringId reduce = w.intern("dp all-reduce"), wait = w.intern("wait dp"),
                   step_name = w.intern("step");
    std::int64_t now = 1'000'000;
    for (int s = 0; s < steps; ++s) {
      const std::int64_t start = now;
      for (int k = 0; k < 30; ++k) {
        Event e{compute, EventKind::cpu_op, Category::compute, now, now + 20'000, ops[k % 4]};
        e.step = s;
        w.add(e);
        now += 21'000;
      }
      Event r{comm,          EventKind::collective, Category::communication,
              now - 200'000, now + 30'000,          reduce};
      r.collective = Collective::all_reduce;
      r.bytes = 1 << 20;
      r.step = s;
      w.add(r);
      w.add(Event{compute, EventKind::sync, Category::synchronization, now, now + 30'000, wait});
      now += 40'000;
      w.add(Event{step_lane, EventKind::step, Category::other, start, now, step_name});
      w.add(StepMetrics{0, s, start, now, 2.0, 1024, 0});
    }
    if (!w.close()) return 1;
  }
  auto opened = TraceReader::open(path);
  if (!opened) return 1;
  // One pass untimed first: both sizes run in one process, and the first
  // pass of the first size paid for what every later one reuses (3.4 ms a
  // step at 20 steps cold, 0.1 ms at 160 after it).
  if (!measure_rank_parts(**opened) || !summarize_critical_paths(**opened)) return 1;
  const auto t0 = Clock::now();
  auto parts = measure_rank_parts(**opened);
  const double s = seconds_since(t0);
  if (!parts) {
    std::fprintf(stderr, "%s\n", parts.message().c_str());
    return 1;
  }
  std::printf("steps=%d parts_s=%.3f us_per_step=%.1f\n", steps, s, s / steps * 1e6);
  times.parts_us_per_step = s / steps * 1e6;
  const auto t1 = Clock::now();
  auto paths = summarize_critical_paths(**opened);
  if (!paths) {
    std::fprintf(stderr, "%s\n", paths.message().c_str());
    return 1;
  }
  const double cp = seconds_since(t1);
  std::printf("critical_path_s=%.3f us_per_step=%.1f\n", cp, cp / steps * 1e6);
  times.critical_path_us_per_step = cp / steps * 1e6;
  return 0;
}

// The parts over `few` steps, then over `many`: the ratio of the times per
// step is the linearity the target asks for (1 when linear).
int phase_parts(const std::string& dir, int few, int many) {
  PartsTimes small, large;
  if (parts_once(dir + "/parts-few.cstrace", few, small) != 0 ||
      parts_once(dir + "/parts-many.cstrace", many, large) != 0)
    return 1;
  std::printf(
      "time per step at %d steps against %d: parts %.2fx, critical path %.2fx (target: about 1, "
      "linear)\n",
      many, few, large.parts_us_per_step / small.parts_us_per_step,
      large.critical_path_us_per_step / small.critical_path_us_per_step);
  return 0;
}

// ---------------------------------------------------------------------------
// The analysis of one rank whose kernels take turns on `streams` streams (a
// trace whose threads or streams each read as a lane): its time per event
// must not grow with the streams (each switch of stream searched every one:
// 60,000 streams of one kernel each took `trace stats` 28 s, 20,000 3.6 s).

int streams_once(const std::string& path, int streams, int per_stream, double& us_per_event) {
  {
    auto created = TraceWriter::create(path, RunInfo{"streams", "bench_trace", 0, "synthetic"});
    if (!created) return 1;
    TraceWriter& w = **created;
    w.add_rank({0, "node", "GPU 0", 1, 0, false});
    std::vector<LaneId> lanes;
    for (int s = 0; s < streams; ++s)
      lanes.push_back(w.add_lane(0, LaneKind::gpu_stream, "stream " + std::to_string(s), s));
    const StringId kernel = w.intern("kernel");
    std::int64_t now = 1'000'000;
    for (int i = 0; i < per_stream; ++i) {
      for (const LaneId lane : lanes) {
        Event e;
        e.lane = lane;
        e.kind = EventKind::kernel;
        e.category = Category::compute;
        e.start_ns = now;
        e.end_ns = now + 500;
        e.name = kernel;
        w.add(e);
        now += 1000;
      }
    }
    if (!w.close()) return 1;
  }
  auto opened = TraceReader::open(path);
  if (!opened) return 1;
  AnalysisOptions options;
  options.threads = 1;
  const auto t0 = Clock::now();
  auto a = analyze_run(**opened, options);
  const double s = seconds_since(t0);
  if (!a) {
    std::fprintf(stderr, "%s\n", a.message().c_str());
    return 1;
  }
  const double events = static_cast<double>(streams) * per_stream;
  us_per_event = s / events * 1e6;
  std::printf("streams=%d events=%.0f analysis_s=%.3f us_per_event=%.2f\n", streams, events, s,
              us_per_event);
  return 0;
}

// The analysis over `few` streams, then over `many`, as many events on each:
// the ratio of the times per event is the linearity the target asks for.
int phase_streams(const std::string& dir, int few, int many, int per_stream) {
  double small = 0, large = 0;
  if (streams_once(dir + "/streams-few.cstrace", few, per_stream, small) != 0 ||
      streams_once(dir + "/streams-many.cstrace", many, per_stream, large) != 0)
    return 1;
  std::printf(
      "time per event at %d streams against %d: %.2fx (target: about 1, linear in the streams)\n",
      many, few, small > 0 ? large / small : 0.0);
  return 0;
}

// ---------------------------------------------------------------------------
// A PyTorch profiler trace of about `mb` megabytes, shaped like the real ones:
// nested CPU ops, runtime calls with correlation ids, kernels with Kineto's
// args, copies, NCCL kernels with collective args, flow events, metadata.

int phase_make_kineto(const std::string& path, double mb) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 1;
  std::fprintf(
      f,
      "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, "
      "\"world_size\": 8}, \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100\"}],\n"
      "\"traceEvents\": [\n");
  std::fprintf(f,
               "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 4242, \"tid\": 0, \"args\": "
               "{\"name\": \"python3\"}},\n"
               "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 7, \"args\": "
               "{\"name\": \"stream 7 \"}}");
  Lcg rng{3};
  double ts = 1700000000000000.0;
  long long correlation = 0;
  const auto target = static_cast<long>(mb * 1e6);
  while (std::ftell(f) < target) {
    // One op with a child op and a launch, then its kernel, now and then a copy or an all-reduce.
    const double op = 40 + rng.in(0, 60);
    std::fprintf(f,
                 ",\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": "
                 "4242, \"tid\": 4242, "
                 "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %lld, \"Ev Idx\": %lld, "
                 "\"Input Dims\": [[8, 4096], [4096, 4096], []], \"Input type\": "
                 "[\"c10::BFloat16\", \"c10::BFloat16\", \"\"]}}",
                 ts, op, correlation, correlation);
    std::fprintf(f,
                 ",\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::addmm\", \"pid\": "
                 "4242, \"tid\": 4242, "
                 "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %lld}}",
                 ts + 2.125, op - 5, correlation);
    ++correlation;
    std::fprintf(f,
                 ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                 "\"pid\": 4242, \"tid\": 4242, "
                 "\"ts\": %.3f, \"dur\": 6.250, \"args\": {\"External id\": %lld, \"cbid\": 211, "
                 "\"correlation\": %lld}}",
                 ts + 10.5, correlation, correlation);
    std::fprintf(f,
                 ",\n{\"ph\": \"s\", \"id\": %lld, \"pid\": 4242, \"tid\": 4242, \"ts\": %.3f, "
                 "\"cat\": \"ac2g\", \"name\": \"ac2g\"}",
                 correlation, ts + 10.5);
    const bool nccl = rng.next() % 20 == 0;
    if (nccl) {
      std::fprintf(
          f,
          ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
          "\"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)\", "
          "\"pid\": 0, \"tid\": 13, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %lld, "
          "\"queued\": 0, \"device\": 0, "
          "\"context\": 1, \"stream\": 13, \"correlation\": %lld, \"registers per thread\": 96, "
          "\"shared memory\": 87568, "
          "\"grid\": [8, 1, 1], \"block\": [544, 1, 1], \"Collective name\": \"allreduce\", \"In "
          "msg nelems\": 16777216, "
          "\"Out msg nelems\": 16777216, \"Group size\": 8, \"dtype\": \"BFloat16\", \"Process "
          "Group Name\": \"0\"}}",
          ts + 30, 200 + rng.in(0, 100) * 1.0, correlation, correlation);
    } else {
      std::fprintf(f,
                   ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
                   "\"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_"
                   "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas\", "
                   "\"pid\": 0, \"tid\": 7, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External "
                   "id\": %lld, \"queued\": 0, \"device\": 0, "
                   "\"context\": 1, \"stream\": 7, \"correlation\": %lld, \"registers per "
                   "thread\": 168, \"shared memory\": 0, "
                   "\"blocks per SM\": 1.2, \"warps per SM\": 4.8, \"grid\": [132, 1, 1], "
                   "\"block\": [384, 1, 1], "
                   "\"est. achieved occupancy %%\": 6}}",
                   ts + 20, 20 + rng.in(0, 80) * 1.0, correlation, correlation);
    }
    std::fprintf(f,
                 ",\n{\"ph\": \"f\", \"id\": %lld, \"pid\": 0, \"tid\": 7, \"ts\": %.3f, \"cat\": "
                 "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
                 correlation, ts + 20);
    if (rng.next() % 16 == 0) {
      ++correlation;
      std::fprintf(
          f,
          ",\n{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pinned -> "
          "Device)\", \"pid\": 0, \"tid\": 7, "
          "\"ts\": %.3f, \"dur\": 3.125, \"args\": {\"External id\": %lld, \"device\": 0, "
          "\"context\": 1, \"stream\": 7, "
          "\"correlation\": %lld, \"bytes\": 65536, \"memory bandwidth (GB/s)\": 20.97152}}",
          ts + 5, correlation, correlation);
    }
    ts += op + 10;
  }
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
  std::printf("json_mb=%.1f\n", file_mb(path));
  return 0;
}

int phase_import(const std::string& json, const std::string& store) {
  const double mb = file_mb(json);
  const double c0 = cs::bench::cpu_seconds();
  const auto t0 = Clock::now();
  auto report = import_kineto({json}, store);
  const double s = seconds_since(t0);
  if (!report) {
    std::fprintf(stderr, "%s\n", report.message().c_str());
    return 1;
  }
  std::printf(
      "input_mb=%.1f json_mb=%.1f events=%lld import_s=%.3f cpu_s=%.3f rate_mb_s=%.1f "
      "events_per_s=%.0f\n",
      mb, report->bytes_read / 1e6, static_cast<long long>(report->events), s,
      cs::bench::cpu_seconds() - c0, report->bytes_read / 1e6 / s, report->events / s);
  return 0;
}

// An Nsight Systems export of about `records` kernels, copies and CUDA calls:
// the real one of tests/data, its rows doubled again and again, each copy
// after the last in time with correlation ids of its own.
int phase_make_nsys(const std::string& path, std::int64_t records) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::filesystem::copy_file(CS_SOURCE_DIR "/tests/data/validation/nsys/saxpy-mpi-cuda.sqlite",
                             path, ec);
  if (ec) {
    std::fprintf(stderr, "make-nsys: %s\n", ec.message().c_str());
    return 1;
  }
  auto db = sql::Database::open(path, SQLITE_OPEN_READWRITE);
  if (!db) {
    std::fprintf(stderr, "%s\n", db.message().c_str());
    return 1;
  }
  const char* tables[] = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                          "CUPTI_ACTIVITY_KIND_RUNTIME"};
  auto single = [&](const std::string& sql) -> std::int64_t {
    auto stmt = db->prepare(sql);
    return stmt && stmt->step() == SQLITE_ROW ? stmt->int64_at(0) : 0;
  };
  auto count = [&] {
    std::int64_t n = 0;
    for (const char* t : tables)
      n += single(std::string("SELECT count(*) FROM ") + t);
    return n;
  };
  if (!db->exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF")) return 1;
  while (count() < records) {
    std::int64_t first = INT64_MAX, last = 0, correlation = 0;
    for (const char* t : tables) {
      first = std::min(first, single(std::string("SELECT min(start) FROM ") + t));
      last = std::max(last, single(std::string("SELECT max(\"end\") FROM ") + t));
      correlation =
          std::max(correlation, single(std::string("SELECT max(correlationId) FROM ") + t));
    }
    const std::int64_t shift = last - first + 1000, ids = correlation + 1;
    for (const char* t : tables) {
      std::string columns, values;
      auto info = db->prepare(std::string("SELECT name FROM pragma_table_info('") + t + "')");
      if (!info) return 1;
      while (info->step() == SQLITE_ROW) {
        const std::string c(info->text_at(0));
        columns += (columns.empty() ? "\"" : ", \"") + c + "\"";
        const std::string q = "\"" + c + "\"";
        values += (values.empty() ? "" : ", ") +
                  (c == "start" || c == "end" ? q + " + " + std::to_string(shift)
                   : c == "correlationId"     ? q + " + " + std::to_string(ids)
                                              : q);
      }
      if (!db->exec(std::string("INSERT INTO ") + t + " (" + columns + ") SELECT " + values +
                    " FROM " + t))
        return 1;
    }
  }
  std::printf("records=%lld nsys_mb=%.1f\n", static_cast<long long>(count()), file_mb(path));
  return 0;
}

int phase_import_nsys(const std::string& sqlite, const std::string& store) {
  const double c0 = cs::bench::cpu_seconds();
  const auto t0 = Clock::now();
  auto report = import_nsys({sqlite}, store);
  const double s = seconds_since(t0);
  if (!report) {
    std::fprintf(stderr, "%s\n", report.message().c_str());
    return 1;
  }
  std::printf("events=%lld import_s=%.3f cpu_s=%.3f events_per_s=%.0f\n",
              static_cast<long long>(report->events), s, cs::bench::cpu_seconds() - c0,
              report->events / s);
  return 0;
}

int phase_gzip(const std::string& in, const std::string& out) {
  std::ifstream src(in, std::ios::binary);
  gzFile dst = gzopen(out.c_str(), "wb6");
  if (!src || !dst) return 1;
  std::vector<char> buffer(1 << 20);
  while (src) {
    src.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (src.gcount() > 0) gzwrite(dst, buffer.data(), static_cast<unsigned>(src.gcount()));
  }
  gzclose(dst);
  return 0;
}

// ---------------------------------------------------------------------------
// The driver: each phase in a child, with its peak resident memory.

struct Child {
  int code = -1;
  double max_rss_mib = 0;
};

Child run_phase(const std::vector<std::string>& args) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    static std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    argv.push_back(self.data());
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(self.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Child c;
  c.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  c.max_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
  std::printf("    peak_rss_mib=%.1f\n", c.max_rss_mib);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "phase") {
    const std::string& what = args.at(1);
    if (what == "write")
      return phase_write(args.at(2), std::atoll(args.at(3).c_str()), std::atoi(args.at(4).c_str()),
                         args.at(5) == "1");
    if (what == "query") return phase_query(args.at(2));
    if (what == "analyse") return phase_analyse(args.at(2), std::atoi(args.at(3).c_str()));
    if (what == "critical-path") return phase_critical_path(args.at(2));
    if (what == "make-kineto") return phase_make_kineto(args.at(2), std::atof(args.at(3).c_str()));
    if (what == "import") return phase_import(args.at(2), args.at(3));
    if (what == "gzip") return phase_gzip(args.at(2), args.at(3));
    if (what == "make-nsys") return phase_make_nsys(args.at(2), std::atoll(args.at(3).c_str()));
    if (what == "import-nsys") return phase_import_nsys(args.at(2), args.at(3));
    if (what == "counters") return phase_counters(args.at(2), std::atoll(args.at(3).c_str()));
    if (what == "parts")
      return phase_parts(args.at(2), std::atoi(args.at(3).c_str()), std::atoi(args.at(4).c_str()));
    if (what == "streams")
      return phase_streams(args.at(2), std::atoi(args.at(3).c_str()), std::atoi(args.at(4).c_str()),
                           std::atoi(args.at(5).c_str()));
    return 2;
  }
  constexpr const char* kUsage =
      "bench_trace [--events N] [--dir D] [--json-mb M] [--keep] [--quick]";
  std::int64_t events = 0;  // 0: the default, 10 M (a hundredth with --quick)
  std::string dir = "/tmp/clusterscope-bench";
  double json_mb = 0;
  bool keep = false;
  bool quick = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--events" && i + 1 < args.size())
      events = cs::bench::count_arg("bench_trace", kUsage, "--events", args[++i].c_str(), 1);
    else if (args[i] == "--dir" && i + 1 < args.size())
      dir = args[++i];
    else if (args[i] == "--json-mb" && i + 1 < args.size())
      json_mb = cs::bench::positive_arg("bench_trace", kUsage, "--json-mb", args[++i].c_str());
    else if (args[i] == "--keep")
      keep = true;
    else if (args[i] == "--quick")
      quick = true;
    else
      cs::bench::usage_error("bench_trace", "unknown argument '" + args[i] + "'", kUsage);
  }
  const int scale = quick ? 100 : 1;
  if (events == 0) events = 10'000'000 / scale;
  if (json_mb == 0) json_mb = 100.0 / scale;
  std::error_code dir_error;
  std::filesystem::create_directories(dir, dir_error);
  if (dir_error || !std::filesystem::is_directory(dir)) {
    std::fprintf(stderr, "bench_trace: cannot make the directory %s: %s\n", dir.c_str(),
                 dir_error ? dir_error.message().c_str() : "a file is in the way");
    return 1;
  }
  const std::string run = dir + "/run8.cstrace", lane = dir + "/lane1.cstrace";
  const std::string json = dir + "/kineto.json", gz = dir + "/kineto.json.gz";
  const std::string imported = dir + "/kineto.cstrace";
  const std::string counters = dir + "/counters.cstrace";
  std::printf("bench_trace: %lld events, %u hardware threads\n", static_cast<long long>(events),
              std::thread::hardware_concurrency());
  bool ok = true;
  auto phase = [&](const char* title, std::vector<std::string> a) {
    std::printf("%s\n", title);
    a.insert(a.begin(), "phase");
    const Child c = run_phase(a);
    ok = c.code == 0 && ok;
    return c;
  };
  // An analysis's peak memory against the size of the store it read (target:
  // well below it), both in MiB.
  auto against_store = [](const Child& c, const std::string& store,
                          const char* target = "target: well below 1") {
    const double store_mib = file_mb(store) * 1e6 / (1024.0 * 1024.0);
    if (c.code == 0 && store_mib > 0)
      std::printf("    peak memory %.2fx the store's %.1f MiB (%s)\n", c.max_rss_mib / store_mib,
                  store_mib, target);
  };
  // The critical path holds a step's operations of every rank at once.
  constexpr const char* kNoTarget = "no target: a step's operations are held whole";
  phase("[write] 8 ranks: kernels, launches, all-reduces, steps (target >= 2 M events/s)",
        {"write", run, std::to_string(events), "8", "0"});
  phase("[query] open + 2000 px window on the busiest lane of the 8-rank store (target < 10 ms)",
        {"query", run});
  against_store(
      phase("[analyse] all 8 ranks, per step, parallel (target < 2 s; memory well below the store)",
            {"analyse", run, "0"}),
      run);
  against_store(phase("[analyse] all 8 ranks, one thread", {"analyse", run, "1"}), run);
  against_store(phase("[critical path] every step across the 8 ranks", {"critical-path", run}), run,
                kNoTarget);
  phase("[write] every event on one stream of one rank",
        {"write", lane, std::to_string(events), "1", "1"});
  phase("[query] open + 2000 px window on that lane (target < 10 ms)", {"query", lane});
  against_store(phase("[analyse] that rank", {"analyse", lane, "0"}), lane);
  against_store(phase("[critical path] that rank's steps", {"critical-path", lane}), lane,
                kNoTarget);
  const std::string samples = std::to_string(1'000'000 / scale);
  phase(("[counters] one counter of " + samples + " samples: the timeline's 2000 px query").c_str(),
        {"counters", counters, samples});
  const std::string few = std::to_string(2000 / scale), many = std::to_string(16000 / scale);
  phase(("[parts] each step's parts over " + few + ", then " + many +
         " steps (trace stats against a prediction; target: the time per step the same, linear)")
            .c_str(),
        {"parts", dir, few, many});
  const std::string few_streams = std::to_string(2000 / scale),
                    many_streams = std::to_string(16000 / scale);
  phase(("[streams] one rank's analysis over " + few_streams + ", then " + many_streams +
         " streams, 10 kernels each (target: the time per event the same, linear)")
            .c_str(),
        {"streams", dir, few_streams, many_streams, "10"});
  phase("[kineto] generate a PyTorch profiler trace",
        {"make-kineto", json, std::to_string(json_mb)});
  phase("[kineto] import plain JSON", {"import", json, imported});
  phase("[kineto] gzip it", {"gzip", json, gz});
  phase("[kineto] import gzip", {"import", gz, imported});
  const std::string nsys = dir + "/nsys.sqlite", from_nsys = dir + "/nsys.cstrace";
  phase("[nsys] copy the real export's rows forward",
        {"make-nsys", nsys, std::to_string(events / 5)});
  phase("[nsys] import it (peak memory: the records held until the ranks are known)",
        {"import-nsys", nsys, from_nsys});
  if (!keep) {
    std::error_code ec;
    for (const std::string& p : {run, lane, json, gz, imported, counters, nsys, from_nsys,
                                 dir + "/parts-few.cstrace", dir + "/parts-many.cstrace",
                                 dir + "/streams-few.cstrace", dir + "/streams-many.cstrace"}) {
      for (const char* suffix : {"", "-wal", "-shm"})
        std::filesystem::remove(p + suffix, ec);
    }
  }
  return ok ? 0 : 1;
}
