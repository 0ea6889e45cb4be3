// bench_gui: the desktop app's speed targets, measured on the real app.
//  1. A plan edit to the updated estimate painted, for GPT-3 175B on 1024
//     A100s (target: under 16 ms, one frame at 60 Hz). The edit goes through
//     the plan panel as a user's does (undo step, background analysis with
//     every control's options, bars and headline repainted); the predicted
//     timeline that follows it (written to a trace store, then queried) is
//     timed too.
//  2. The app started as a process until the default project's estimate is
//     painted (target: under 1 s), cold and warm.
//  3. A run store of 10 million events (written once with TraceWriter into
//     /tmp, reused after): opened in the run view until the first timeline
//     frame is painted (target: under 1 s); zoom and pan frames, from the
//     request to the frame painted (target: under 16 ms); the app's peak
//     memory against the store's size (target: under twice).
//  4. A run's exports from the app (HTML, PDF, CSV, Chrome trace) of a store
//     of 1 million events: each written on the GUI thread, as before they
//     moved off it, then from the app on its worker thread, with the longest
//     the GUI thread went between two turns of its event loop meanwhile
//     (target: one frame, 16 ms).
//  5. A run of 50,000 lanes (a Chrome trace's thread ids): opened until the
//     first frame is painted (target: under 1 s, as 3.) and scrolled, each
//     scroll to the lanes in view painted (target: 16 ms).
//  6. A run whose kernel, annotation, API call and lane names are 200,000
//     characters long (heavily templated kernels, a hostile import): opened
//     until the first frame is painted (target: under 1 s, as 3.) and until
//     its analyses are done, a search every kernel matches (its time and
//     the app's peak memory), then each export (HTML, PDF, CSV, Chrome trace)
//     written on the GUI thread (target: no slower than the same store with
//     short names by more than the bytes the whole names add to the CSV and
//     Chrome trace).
// Usage: bench_gui [--edits N] [--starts N] [--run-events N] [--only-run]
//        [--export-events N] [--only-exports] [--lanes N] [--only-lanes]
//        [--long-names CHARS] [--only-long-names]
//        (offscreen unless a display is set)

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>
#include <QProcess>
#include <QScrollArea>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/analysis.h"
#include "app/gui/estimate_view.h"
#include "app/gui/main_window.h"
#include "app/gui/plan_panel.h"
#include "app/gui/predicted_timeline.h"
#include "app/gui/run_view.h"
#include "app/gui/timeline_widget.h"
#include "app/gui/workspace.h"
#include "bench/bench_args.h"
#include "core/presets.h"
#include "core/trace_writer.h"

using namespace cs::gui;

namespace {

struct Stats {
  double median = 0, p90 = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)], v.back()};
}

// Runs the event loop until `done` or `timeout_ms`; false on timeout.
// CPU time of the calling thread: what the GUI thread itself spent, apart
// from waiting for a core on a busy machine.
double threadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

double loadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

template <class Done>
bool waitUntil(Done done, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > timeout_ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents, 5);
  }
  return true;
}

// Kibibytes of a /proc/self/status field (VmHWM: peak resident memory); the
// kernel writes "kB" for units of 1024 bytes.
long procStatusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + key.size());
  }
  return -1;
}

// A run like a data-parallel job's: 4 ranks, each with a compute stream of
// kernels (inside forward/backward annotations on their own lane), a
// communication stream of all-reduces, a copy stream and a steps lane.
// Deterministic, so the file is reused across runs of the benchmark.
// A writer of a benchmark's store; null, said, when it cannot be created.
std::unique_ptr<cs::trace::TraceWriter> benchWriter(const std::string& path,
                                                    const std::string& title) {
  cs::trace::RunInfo run;
  run.title = "bench: " + title;
  run.source = "bench";
  auto created = cs::trace::TraceWriter::create(path, run);
  if (!created) {
    std::fprintf(stderr, "bench_gui: %s\n", created.message().c_str());
    return nullptr;
  }
  return std::move(created).value();
}

bool writeBigStore(const std::string& path, std::int64_t events) {
  using namespace cs::trace;
  const auto writer = benchWriter(path, std::to_string(events) + " events");
  if (!writer) return false;
  TraceWriter& w = *writer;
  constexpr int kRanks = 4;
  const std::int64_t per_rank = events / kRanks;
  const StringId names[] = {w.intern("ampere_sgemm_128x64_nn"), w.intern("layer_norm_fwd"),
                            w.intern("softmax_fwd"), w.intern("ampere_sgemm_64x64_tn"),
                            w.intern("elementwise_add")};
  const StringId all_reduce = w.intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  const StringId copy = w.intern("Memcpy DtoD");
  const StringId forward = w.intern("forward");
  const StringId backward = w.intern("backward");
  for (int r = 0; r < kRanks; ++r) {
    w.add_rank({r, "bench-host", "GPU " + std::to_string(r), 1000 + r, r, true});
    const LaneId compute = w.add_lane(r, LaneKind::gpu_stream, "stream 7");
    const LaneId comm = w.add_lane(r, LaneKind::gpu_stream, "stream 13 (NCCL)");
    const LaneId copies = w.add_lane(r, LaneKind::gpu_stream, "stream 14 (copies)");
    const LaneId phases = w.add_lane(r, LaneKind::annotation, "NVTX");
    std::int64_t t = 1'700'000'000'000'000'000 + r * 1000;
    // 1000 kernels per phase; every 10th kernel an all-reduce beside it and
    // every 50th a copy: about 88 % kernels.
    std::int64_t written = 0;
    int phase = 0;
    while (written < per_rank) {
      const std::int64_t phase_start = t;
      for (int k = 0; k < 1000 && written < per_rank; ++k) {
        Event e;
        e.lane = compute;
        e.start_ns = t;
        e.end_ns = t + 2000 + (k % 7) * 300;
        e.name = names[k % 5];
        e.correlation = written + 1;
        w.add(e);
        ++written;
        if (k % 10 == 0) {
          Event c;
          c.lane = comm;
          c.kind = EventKind::collective;
          c.category = Category::communication;
          c.collective = Collective::all_reduce;
          c.dtype = DataType::fp32;
          c.bytes = 4 << 20;
          c.group_size = kRanks;
          c.start_ns = t + 500;
          c.end_ns = t + 9000;
          c.name = all_reduce;
          w.add(c);
          ++written;
        }
        if (k % 50 == 0) {
          Event m;
          m.lane = copies;
          m.kind = EventKind::memcpy;
          m.category = Category::memory;
          m.bytes = 1 << 20;
          m.start_ns = t + 100;
          m.end_ns = t + 1500;
          m.name = copy;
          w.add(m);
          ++written;
        }
        t = e.end_ns + 500;
      }
      Event a;
      a.lane = phases;
      a.kind = EventKind::annotation;
      a.start_ns = phase_start;
      a.end_ns = t - 500;  // the phase's last kernel's end
      a.name = phase++ % 2 == 0 ? forward : backward;
      w.add(a);
      ++written;
    }
  }
  if (cs::Status s = w.close(); !s) {
    std::fprintf(stderr, "bench_gui: %s\n", s.message().c_str());
    return false;
  }
  return true;
}

// The store of writeBigStore with `events` events, in /tmp, written once and
// reused after; "" when it could not be written.
// The store at `path`, written once by `write` (into a file moved there
// when whole) and reused after; "" when it could not be written.
std::string storeWrittenOnce(const std::string& path, const std::string& what,
                             const std::function<bool(const std::string&)>& write) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    QElapsedTimer w;
    w.start();
    const std::string partial = path + ".partial";
    std::filesystem::remove(partial, ec);
    if (!write(partial)) return {};
    std::filesystem::rename(partial, path, ec);
    std::printf("wrote %s (%s) in %.1f s\n", path.c_str(), what.c_str(),
                double(w.nsecsElapsed()) * 1e-9);
  }
  return path;
}

std::string bigStore(std::int64_t events) {
  return storeWrittenOnce("/tmp/clusterscope-bench-gui-" + std::to_string(events) + ".db",
                          std::to_string(events) + " events", [events](const std::string& partial) {
                            return writeBigStore(partial, events);
                          });
}

// Opens `path` in `view` and waits for its first timeline frame, painted:
// the milliseconds that took, or -1 (said) when the store did not open.
double openAndPaint(RunView& view, const std::string& path, const char* what, int timeout_ms) {
  TimelineWidget* t = view.timeline();
  QElapsedTimer clock;
  clock.start();
  view.openStore(QString::fromStdString(path));
  if (!waitUntil([&] { return t->frameJob() != 0 || !view.message().isEmpty(); }, timeout_ms) ||
      !view.message().isEmpty()) {
    std::fprintf(stderr, "bench_gui: %s did not open: %s\n", what, qPrintable(view.message()));
    return -1;
  }
  t->repaint();
  return double(clock.nsecsElapsed()) * 1e-6;
}

// Section 3: the 10-million-event run in the run view.
int benchRun(std::int64_t events) {
  const std::string path = bigStore(events);
  if (path.empty()) return 1;
  std::error_code ec;
  const double store_mb = double(std::filesystem::file_size(path, ec)) / 1e6;
  const long rss_before_kb = procStatusKb("VmRSS");

  RunView view;
  view.resize(1600, 1000);
  view.show();
  TimelineWidget* t = view.timeline();
  const double first_frame_ms = openAndPaint(view, path, "the big store", 60000);
  if (first_frame_ms < 0) return 1;
  std::printf(
      "run store of %lld events (%.0f MB, %d lanes): open -> first timeline frame painted "
      "%.0f ms (target 1000 ms: %s)\n",
      (long long)events, store_mb, t->laneCount(), first_frame_ms,
      first_frame_ms < 1000 ? "under" : "OVER");

  // Zoom in around a point, then pan, frame by frame: each from the request
  // to its frame painted.
  auto frame = [&](auto change) {
    QElapsedTimer f;
    f.start();
    change();
    const std::uint64_t job = t->requestedJob();
    if (!waitUntil([&] { return t->frameJob() >= job; }, 30000)) return -1.0;
    t->repaint();
    return double(f.nsecsElapsed()) * 1e-6;
  };
  const cs::trace::TimeRange full = t->fullRange();
  const std::int64_t anchor = full.start_ns + (full.end_ns - full.start_ns) / 3;
  auto zoomAndPan = [&](const char* when) {
    t->resetZoom();
    waitUntil([&] { return t->frameJob() >= t->requestedJob(); }, 30000);
    std::vector<double> zooms, pans;
    for (int i = 0; i < 40; ++i)
      zooms.push_back(frame([&] { t->zoom(1.4, anchor); }));
    for (int i = 0; i < 40; ++i) {
      const cs::trace::TimeRange win = t->window();
      const std::int64_t shift = (win.end_ns - win.start_ns) / 10;
      pans.push_back(frame([&] { t->setWindow(win.start_ns + shift, win.end_ns + shift); }));
    }
    for (int i = 0; i < 40; ++i)
      zooms.push_back(frame([&] { t->zoom(1 / 1.4, anchor); }));
    const Stats z = stats(zooms);
    const Stats p = stats(pans);
    std::printf(
        "  %s: zoom frames (%zu, around one point, deep and back out): median %.1f ms, p90 %.1f "
        "ms, max %.1f ms; pan frames (%zu): median %.1f ms, p90 %.1f ms, max %.1f ms "
        "(target 16 ms: %s); load average %.1f\n",
        when, zooms.size(), z.median, z.p90, z.max, pans.size(), p.median, p.p90, p.max,
        std::max(z.median, p.median) < 16 ? "under" : "OVER", loadAverage());
  };
  zoomAndPan("while the analyses run");
  // The analyses of the whole run finish in the background; memory is
  // measured after them, at the app's peak.
  QElapsedTimer a;
  a.start();
  waitUntil([&] { return view.analysis() != nullptr; }, 600000);
  const double analysis_s = double(a.nsecsElapsed()) * 1e-9;
  // In MB (10^6 bytes), as the store's size: /proc counts KiB.
  const double peak_mb = double(procStatusKb("VmHWM")) * 1024 / 1e6;
  std::printf(
      "  analyses of the whole run done %.1f s after that; app peak memory %.0f MB "
      "(%.0f MB before opening) = %.2fx the store (target under 2x: %s)\n",
      analysis_s, peak_mb, double(rss_before_kb) * 1024 / 1e6, peak_mb / store_mb,
      peak_mb < 2 * store_mb ? "under" : "OVER");
  zoomAndPan("after the analyses");

  // Looking things up on the run: the instances of the most frequent kernel
  // (a scan of the whole store that keeps the 1000 longest) and a name
  // search to its first match; each from the request to its answer on the
  // GUI thread.
  view.kernelProxy()->sort(3, Qt::DescendingOrder);
  const QString kernel = view.kernelProxy()->index(0, 0).data().toString();
  const long long kernel_count = view.kernelProxy()->index(0, 3).data(Qt::UserRole).toLongLong();
  bool listed = false;
  QObject::connect(&view, &RunView::instancesReady, [&] { listed = true; });
  QElapsedTimer look;
  look.start();
  view.showKernelInstances(0);
  waitUntil([&] { return listed; }, 600000);
  const double instances_ms = double(look.nsecsElapsed()) * 1e-6;
  bool found = false;
  QObject::connect(t, &TimelineWidget::searchMoved, [&] { found = true; });
  look.restart();
  t->findNext(kernel.left(12));
  waitUntil([&] { return found; }, 600000);
  const double search_ms = double(look.nsecsElapsed()) * 1e-6;
  std::printf(
      "  the instances of %s (%lld of them, the longest %d listed): %.0f ms; a search for "
      "\"%s\" to its first of %d matches: %.0f ms; load average %.1f\n",
      qPrintable(kernel), kernel_count, view.instances()->rowCount(), instances_ms,
      qPrintable(kernel.left(12)), t->searchMatches(), search_ms, loadAverage());
  return 0;
}

// Section 5: a run of many lanes (a Chrome trace of 50,000 thread ids, a
// job of thousands of ranks) in the run view: opened until the first frame
// is painted, then scrolled a page at a time and to the end, each from the
// scroll to the lanes in view painted with their spans.
bool writeManyLanes(const std::string& path, int lanes, int per_lane) {
  using namespace cs::trace;
  const auto writer = benchWriter(path, std::to_string(lanes) + " lanes");
  if (!writer) return false;
  TraceWriter& w = *writer;
  constexpr int kRanks = 8;
  const StringId names[] = {w.intern("aten::mm"), w.intern("aten::add"), w.intern("aten::copy_")};
  for (int r = 0; r < kRanks; ++r)
    w.add_rank({r, "bench-host", "CPU", 1000 + r, 0, true});
  for (int i = 0; i < lanes; ++i) {
    const int rank = i * kRanks / lanes;
    const LaneId lane = w.add_lane(rank, LaneKind::cpu_thread, "thread " + std::to_string(i));
    std::int64_t t = 1'700'000'000'000'000'000 + std::int64_t(i) * 777;
    for (int k = 0; k < per_lane; ++k) {
      Event e;
      e.lane = lane;
      e.kind = EventKind::cpu_op;
      e.start_ns = t;
      e.end_ns = t + 40'000 + (k % 5) * 9'000;
      e.name = names[k % 3];
      w.add(e);
      t = e.end_ns + 20'000;
    }
  }
  if (cs::Status s = w.close(); !s) {
    std::fprintf(stderr, "bench_gui: %s\n", s.message().c_str());
    return false;
  }
  return true;
}

int benchManyLanes(int lanes) {
  constexpr int kPerLane = 20;
  const std::string path = storeWrittenOnce(
      "/tmp/clusterscope-bench-gui-lanes-" + std::to_string(lanes) + ".db",
      std::to_string(lanes) + " lanes of " + std::to_string(kPerLane) + " events",
      [lanes](const std::string& partial) { return writeManyLanes(partial, lanes, kPerLane); });
  if (path.empty()) return 1;
  RunView view;
  view.resize(1600, 1000);
  view.show();
  TimelineWidget* t = view.timeline();
  QScrollArea* scroll = nullptr;
  for (QWidget* p = t->parentWidget(); p && !scroll; p = p->parentWidget())
    scroll = qobject_cast<QScrollArea*>(p);
  if (!scroll) {
    std::fprintf(stderr, "bench_gui: the run view's timeline is not in a scroll area\n");
    return 1;
  }
  const double cpu0 = threadCpuMs();
  const double first_ms = openAndPaint(view, path, "the store of many lanes", 120000);
  if (first_ms < 0) return 1;
  std::printf(
      "run store of %d lanes (%d events each): open -> first timeline frame painted %.0f ms "
      "(GUI thread %.0f ms; target 1000 ms: %s); %d spans drawn\n",
      t->laneCount(), kPerLane, first_ms, threadCpuMs() - cpu0, first_ms < 1000 ? "under" : "OVER",
      t->drawnItems());

  // A scroll to the frame that shows the lanes now in view.
  std::vector<double> gui_ms;  // the GUI thread's CPU time in each
  QScrollBar* bar = scroll->verticalScrollBar();
  auto scrollTo = [&](int value) {
    QElapsedTimer f;
    f.start();
    const double c0 = threadCpuMs();
    bar->setValue(value);
    QCoreApplication::processEvents();
    if (!waitUntil([&] { return t->frameJob() >= t->requestedJob() && !t->busy(); }, 60000))
      return -1.0;
    t->repaint();
    gui_ms.push_back(threadCpuMs() - c0);
    return double(f.nsecsElapsed()) * 1e-6;
  };
  // After the analyses of the whole run (a core's work in the background).
  waitUntil([&] { return view.analysis() != nullptr; }, 600000);
  waitUntil([&] { return !t->busy(); }, 60000);
  std::vector<double> pages;
  for (int i = 1; i <= 20; ++i)
    pages.push_back(scrollTo(i * scroll->viewport()->height()));
  const double end_ms = scrollTo(bar->maximum());
  const int drawn_at_end = t->drawnItems();
  const double top_ms = scrollTo(0);
  const Stats p = stats(pages);
  const Stats g = stats(gui_ms);
  std::printf(
      "  scroll a page (%zu): median %.1f ms, p90 %.1f ms, max %.1f ms; to the last lane %.1f "
      "ms (%d spans drawn there); back to the top %.1f ms (target 16 ms: %s); the GUI thread's "
      "CPU in a scroll: median %.1f ms, max %.1f ms; load average %.1f\n",
      pages.size(), p.median, p.p90, p.max, end_ms, drawn_at_end, top_ms,
      std::max({p.median, end_ms, top_ms}) < 16 ? "under" : "OVER", g.median, g.max, loadAverage());
  return 0;
}

// Section 6: a run whose names are `chars` characters long. 2 ranks, each
// with a compute stream of kernels inside forward/backward annotations, the
// CUDA API calls that launched them and an all-reduce stream; 16 kernel
// names, each of `chars` characters (a template argument list repeated)
// with its own start, as the templated kernels of CUTLASS read.
bool writeLongNames(const std::string& path, std::int64_t chars) {
  using namespace cs::trace;
  const auto writer = benchWriter(path, "names of " + std::to_string(chars) + " characters");
  if (!writer) return false;
  TraceWriter& w = *writer;
  auto long_name = [chars](const std::string& start) {
    const std::string unit = "cutlass::gemm::GemmShape<128, 128, 32>, ";
    std::string name = start + "<";
    while (std::int64_t(name.size()) < chars - 1)
      name += unit;
    name.resize(std::size_t(std::max<std::int64_t>(chars - 1, std::int64_t(start.size()))));
    return name + ">";
  };
  std::vector<StringId> kernels;
  for (int k = 0; k < 16; ++k)
    kernels.push_back(w.intern(long_name("void cutlass::Kernel_" + std::to_string(k))));
  const StringId launch = w.intern(long_name("cudaLaunchKernel"));
  const StringId all_reduce = w.intern(long_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  const StringId phase_names[] = {w.intern(long_name("forward")), w.intern(long_name("backward"))};
  constexpr int kRanks = 2, kSteps = 10, kPerPhase = 200;
  for (int r = 0; r < kRanks; ++r) {
    w.add_rank({r, "bench-host", "GPU " + std::to_string(r), 1000 + r, r, true});
    const LaneId compute = w.add_lane(r, LaneKind::gpu_stream, long_name("stream 7"));
    const LaneId comm = w.add_lane(r, LaneKind::gpu_stream, "stream 13 (NCCL)");
    const LaneId api = w.add_lane(r, LaneKind::cpu_thread, "Thread 1");
    const LaneId phases = w.add_lane(r, LaneKind::annotation, "NVTX");
    std::int64_t t = 1'700'000'000'000'000'000 + r * 1000;
    std::int64_t correlation = 1;
    for (int step = 0; step < kSteps * 2; ++step) {
      const std::int64_t phase_start = t;
      for (int k = 0; k < kPerPhase; ++k) {
        Event call;
        call.lane = api;
        call.kind = EventKind::api_call;
        call.category = Category::other;
        call.start_ns = t - 1500;
        call.end_ns = t - 500;
        call.name = launch;
        call.correlation = correlation;
        call.step = step / 2;
        w.add(call);
        Event e;
        e.lane = compute;
        e.start_ns = t;
        e.end_ns = t + 20'000 + (k % 7) * 3000;
        e.name = kernels[std::size_t(k % 16)];
        e.correlation = correlation++;
        e.step = step / 2;
        w.add(e);
        if (k % 20 == 0) {
          Event c;
          c.lane = comm;
          c.kind = EventKind::collective;
          c.category = Category::communication;
          c.collective = Collective::all_reduce;
          c.dtype = DataType::fp32;
          c.bytes = 4 << 20;
          c.group_size = kRanks;
          c.start_ns = t + 500;
          c.end_ns = t + 60'000;
          c.name = all_reduce;
          c.step = step / 2;
          w.add(c);
        }
        t = e.end_ns + 2000;
      }
      Event a;
      a.lane = phases;
      a.kind = EventKind::annotation;
      a.category = Category::other;
      a.start_ns = phase_start;
      a.end_ns = t - 2000;
      a.name = phase_names[step % 2];
      a.step = step / 2;
      w.add(a);
    }
  }
  if (cs::Status s = w.close(); !s) {
    std::fprintf(stderr, "bench_gui: %s\n", s.message().c_str());
    return false;
  }
  return true;
}

// Opens the store of names of `chars` characters and exports it, each
// figure beside the same store's with names of 40 characters.
int benchLongNames(std::int64_t chars) {
  std::printf("a run whose kernel, annotation, API call and lane names are long:\n");
  for (const std::int64_t length : {std::int64_t(40), chars}) {
    const std::string path = storeWrittenOnce(
        "/tmp/clusterscope-bench-gui-names-" + std::to_string(length) + ".db",
        "names of " + std::to_string(length) + " characters",
        [length](const std::string& partial) { return writeLongNames(partial, length); });
    if (path.empty()) return 1;
    MainWindow window;
    window.resize(1500, 950);
    window.show();
    RunView* view = window.runView();
    QElapsedTimer clock;
    clock.start();
    const double first_ms = openAndPaint(*view, path, "the store of long names", 600000);
    if (first_ms < 0) return 1;
    if (!waitUntil([&] { return view->analysis() || !view->message().isEmpty(); }, 1800000) ||
        !view->message().isEmpty()) {
      std::fprintf(stderr, "bench_gui: the store of long names was not analysed: %s\n",
                   qPrintable(view->message()));
      return 1;
    }
    // The tables and the timeline filled and painted with the analyses.
    QCoreApplication::processEvents();
    window.repaint();
    const double analysed_ms = double(clock.nsecsElapsed()) * 1e-6;
    std::printf(
        "  names of %lld characters: open -> first timeline frame painted %.0f ms (target 1000 "
        "ms: %s); analyses done and shown %.0f ms\n",
        (long long)length, first_ms, first_ms < 1000 ? "under" : "OVER", analysed_ms);
    // A search for the kernels' common start: every kernel matches.
    TimelineWidget* t = view->timeline();
    bool found = false;
    const auto moved = QObject::connect(t, &TimelineWidget::searchMoved, [&] { found = true; });
    const long peak_before_kb = procStatusKb("VmHWM");
    QElapsedTimer look;
    look.start();
    t->findNext(QStringLiteral("void cutlass::Kernel_"));
    waitUntil([&] { return found; }, 600000);
    const double search_ms = double(look.nsecsElapsed()) * 1e-6;
    QObject::disconnect(moved);
    std::printf(
        "  names of %lld characters: a search for \"void cutlass::Kernel_\" to its first of %d "
        "matches %.0f ms; the app's peak memory %.0f MB before it, %.0f MB after\n",
        (long long)length, t->searchMatches(), search_ms, double(peak_before_kb) * 1024 / 1e6,
        double(procStatusKb("VmHWM")) * 1024 / 1e6);
    QTemporaryDir out(QDir::tempPath() + QStringLiteral("/clusterscope-bench-names-XXXXXX"));
    struct Kind {
      const char* name;
      RunExport kind;
      const char* file;
    };
    QStringList figures;
    for (const Kind& k :
         {Kind{"HTML report", RunExport::html, "run.html"},
          Kind{"PDF report", RunExport::pdf, "run.pdf"}, Kind{"CSV tables", RunExport::csv, "run"},
          Kind{"Chrome trace", RunExport::chrome_trace, "run.json"}}) {
      QElapsedTimer t;
      t.start();
      auto written = view->exportNow(k.kind, out.filePath(QString::fromUtf8(k.file)));
      const double ms = double(t.nsecsElapsed()) * 1e-6;
      if (!written) {
        std::fprintf(stderr, "bench_gui: %s: %s\n", k.name, written.message().c_str());
        return 1;
      }
      std::int64_t bytes = 0;
      for (const QString& f : written.value())
        bytes += QFileInfo(f).size();
      figures << QStringLiteral("%1 %2 ms (%3 MB)")
                     .arg(QString::fromUtf8(k.name))
                     .arg(ms, 0, 'f', 0)
                     .arg(double(bytes) / 1e6, 0, 'f', 1);
    }
    std::printf("  names of %lld characters: exports on the GUI thread: %s; load average %.1f\n",
                (long long)length, qPrintable(figures.join(QStringLiteral(", "))), loadAverage());
  }
  return 0;
}

// Section 4: a run's exports from the app (File > Export run). Each is
// written once on the GUI thread, as before the exports moved off it (the
// window frozen throughout), then as the app writes it, on a worker thread,
// with the longest the GUI thread went between two turns of its event loop
// meanwhile (target: one frame, 16 ms).
int benchExports(std::int64_t events) {
  const std::string path = bigStore(events);
  if (path.empty()) return 1;
  MainWindow window;
  window.resize(1500, 950);
  window.show();
  window.openRun(QString::fromStdString(path));
  RunView* view = window.runView();
  if (!waitUntil([&] { return view->analysis() || !view->message().isEmpty(); }, 600000) ||
      !view->message().isEmpty()) {
    std::fprintf(stderr, "bench_gui: the export store did not open: %s\n",
                 qPrintable(view->message()));
    return 1;
  }
  QTemporaryDir out(QDir::tempPath() + QStringLiteral("/clusterscope-bench-exports-XXXXXX"));
  QElapsedTimer clock;
  clock.start();
  qint64 last_turn = 0, longest_ns = 0;
  QTimer turns;
  turns.setInterval(1);
  QObject::connect(&turns, &QTimer::timeout, [&] {
    longest_ns = std::max(longest_ns, clock.nsecsElapsed() - last_turn);
    last_turn = clock.nsecsElapsed();
  });
  turns.start();
  int exported = 0;
  QString error;
  QObject::connect(&window, &MainWindow::runExported,
                   [&](const QStringList&, const QString& e) { ++exported, error = e; });
  struct Kind {
    const char* name;
    RunExport kind;
    const char* file;
  };
  std::printf("run exports from the app, a store of %lld events:\n", (long long)events);
  for (const Kind& k : {Kind{"HTML report", RunExport::html, "run.html"},
                        Kind{"PDF report", RunExport::pdf, "run.pdf"},
                        Kind{"CSV tables", RunExport::csv, "run"},
                        Kind{"Chrome trace", RunExport::chrome_trace, "run.json"}}) {
    const QString file = out.filePath(QString::fromUtf8(k.file));
    QElapsedTimer before;
    before.start();
    auto written = view->exportNow(k.kind, out.filePath(QStringLiteral("gui-thread-") + k.file));
    const double frozen_ms = double(before.nsecsElapsed()) * 1e-6;
    if (!written) {
      std::fprintf(stderr, "bench_gui: %s: %s\n", k.name, written.message().c_str());
      return 1;
    }
    std::int64_t bytes = 0;
    for (const QString& f : written.value())
      bytes += QFileInfo(f).size();
    const int done = exported;
    waitUntil([] { return false; }, 20);  // the timer turning before the start
    QElapsedTimer now;
    now.start();
    last_turn = clock.nsecsElapsed();
    longest_ns = 0;
    if (!window.exportRun(k.kind, file) || !waitUntil([&] { return exported > done; }, 600000) ||
        !error.isEmpty()) {
      std::fprintf(stderr, "bench_gui: %s from the app: %s\n", k.name, qPrintable(error));
      return 1;
    }
    const double written_ms = double(now.nsecsElapsed()) * 1e-6;
    const double longest_ms = double(longest_ns) * 1e-6;
    std::printf(
        "  %s (%.1f MB): on the GUI thread, frozen %.0f ms; from the app, written in %.0f ms, "
        "the GUI thread's longest turn meanwhile %.1f ms (target 16 ms: %s; %.0fx shorter)\n",
        k.name, double(bytes) / 1e6, frozen_ms, written_ms, longest_ms,
        longest_ms < 16 ? "under" : "OVER", frozen_ms / std::max(1e-3, longest_ms));
  }
  return 0;
}

constexpr const char* kUsage =
    "bench_gui [--edits N] [--starts N] [--run-events N] [--only-run] [--export-events N] "
    "[--only-exports] [--lanes N] [--only-lanes] [--long-names CHARS] [--only-long-names]";

// The value after argv[i], a whole number from `least` to `most`; i moves past it.
long long countArg(int argc, char** argv, int& i, long long least, long long most) {
  if (i + 1 >= argc)
    cs::bench::usage_error("bench_gui", std::string(argv[i]) + " needs a value", kUsage);
  ++i;
  return cs::bench::count_arg("bench_gui", kUsage, argv[i - 1], argv[i], least, most);
}

}  // namespace

int main(int argc, char** argv) {
  int edits = 60;
  int starts = 6;
  std::int64_t run_events = 10'000'000;
  std::int64_t export_events = 1'000'000;
  bool only_run = false;
  bool only_exports = false;
  int many_lanes = 50'000;
  bool only_lanes = false;
  std::int64_t long_names = 200'000;
  bool only_long_names = false;
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY")) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  QApplication app(argc, argv);
  // Read after QApplication took out its own options (-platform, ...).
  // Every count at least 1: no starts left the first start's time unread
  // (a crash), no edits nothing to take a median of.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--run-events")
      run_events = countArg(argc, argv, i, 1, 1LL << 40);
    else if (arg == "--export-events")
      export_events = countArg(argc, argv, i, 1, 1LL << 40);
    else if (arg == "--lanes")
      many_lanes = int(countArg(argc, argv, i, 1, 10'000'000));
    else if (arg == "--edits")
      edits = int(countArg(argc, argv, i, 1, 1'000'000));
    else if (arg == "--starts")
      starts = int(countArg(argc, argv, i, 1, 1000));
    else if (arg == "--only-run")
      only_run = true;
    else if (arg == "--only-exports")
      only_exports = true;
    else if (arg == "--only-lanes")
      only_lanes = true;
    else if (arg == "--long-names")
      long_names = countArg(argc, argv, i, 41, 100'000'000);
    else if (arg == "--only-long-names")
      only_long_names = true;
    else
      cs::bench::usage_error("bench_gui", "unknown argument '" + arg + "'", kUsage);
  }
  QStandardPaths::setTestModeEnabled(true);  // no user settings read or written
  QApplication::setOrganizationName(QStringLiteral("ClusterScopeBench"));
  QApplication::setApplicationName(QStringLiteral("bench_gui"));
  if (only_exports) return benchExports(export_events);
  if (only_run) return benchRun(run_events);
  if (only_lanes) return benchManyLanes(many_lanes);
  if (only_long_names) return benchLongNames(long_names);

  // --- 1. plan edit -> estimate painted --------------------------------------
  MainWindow window;
  window.resize(1500, 950);
  window.start();
  window.show();
  EstimateView* view = window.estimateView();
  AnalysisService* analysis = window.analysis();
  if (!waitUntil([&] { return view->paintedJob() != 0; }, 30000)) {
    std::fprintf(stderr, "bench_gui: the default project's estimate was never painted\n");
    return 1;
  }
  Workspace* ws = window.workspace();
  auto cluster = ws->catalog().cluster("dgx-a100-1024");
  const cs::Workload* model = ws->catalog().find_model("gpt3-175b");
  if (!cluster || !model) {
    std::fprintf(stderr, "bench_gui: presets dgx-a100-1024 / gpt3-175b missing\n");
    return 1;
  }
  // Megatron-LM's GPT-3 175B plan (Narayanan et al. 2021): TP 8 x PP 8 (x3
  // interleaved) x DP 16, sequence parallel, selective recomputation.
  Project p = ws->project();
  cs::Cluster c = cluster.value();
  c.name = p.plans[0].cluster;
  cs::Workload w = *model;
  w.name = p.plans[0].workload;
  p.clusters[0] = c;
  p.workloads[0] = w;
  cs::ParallelPlan& pp = p.plans[0].parallel;
  pp.tp = 8;
  pp.pp = 8;
  pp.dp = 16;
  pp.virtual_stages = 3;
  pp.schedule = cs::PipelineSchedule::interleaved;
  pp.sequence_parallel = true;
  pp.zero_stage = 1;
  pp.micro_batch = 1;
  pp.global_batch = 1536;
  pp.recompute = cs::Recompute::selective;
  p.plans[0].precision = cs::PrecisionPlan::for_compute(cs::Precision::bf16);
  ws->edit(QStringLiteral("bench plan"), p);
  if (!waitUntil([&] { return view->paintedJob() == analysis->requestedJob(); }, 30000) ||
      !analysis->latest()->estimate) {
    std::fprintf(stderr, "bench_gui: the 175B plan has no estimate: %s\n",
                 analysis->latest() ? analysis->latest()->error.c_str() : "?");
    return 1;
  }
  const cs::plan::Estimate& e = *analysis->latest()->estimate;
  std::printf("machine: %d hardware threads, load average %.1f at the start\n",
              QThread::idealThreadCount(), loadAverage());
  std::printf(
      "plan: GPT-3 175B on 1024 A100 (tp 8, pp 8 x 3, dp 16, SP, selective), "
      "%.1f s per step, %.1f GiB per GPU\n",
      e.time.step(), e.memory.total() / (1024.0 * 1024 * 1024));

  std::vector<double> to_painted;
  std::vector<double> analysis_seconds;
  // Where the time goes: the GUI thread's handling of the edit (every view
  // refreshed), the hop to the worker and back, the views' handling of the
  // result, the paint.
  QElapsedTimer clock;
  clock.start();
  qint64 edited_at = 0, changed_at = 0, delivered_at = 0;
  QObject::connect(ws, &Workspace::projectChanged, &app,
                   [&] { changed_at = clock.nsecsElapsed(); });
  QObject::connect(analysis, &AnalysisService::analysed, &app,
                   [&] { delivered_at = clock.nsecsElapsed(); });
  std::vector<double> gui_edit, hop, gui_result, paint, gui_cpu;
  std::vector<double> to_timeline;
  for (int i = 0; i < edits; ++i) {
    // Alternating micro-batch 1 and 2: every edit changes the estimate.
    const int value = (i % 2 == 0) ? 2 : 1;
    const std::uint64_t timeline_before = view->predictedTimeline()->requestedJob();
    QElapsedTimer t;
    t.start();
    edited_at = clock.nsecsElapsed();
    const double cpu_before = threadCpuMs();
    window.planPanel()->setControl(cs::plan::Control::micro_batch, value);
    const std::uint64_t job = analysis->requestedJob();
    if (!waitUntil([&] { return view->paintedJob() >= job; }, 30000)) {
      std::fprintf(stderr, "bench_gui: edit %d was never painted\n", i);
      return 1;
    }
    to_painted.push_back(double(t.nsecsElapsed()) * 1e-6);
    gui_cpu.push_back(threadCpuMs() - cpu_before);
    const qint64 painted_at = clock.nsecsElapsed();
    analysis_seconds.push_back(analysis->latest()->seconds * 1e3);
    gui_edit.push_back(double(changed_at - edited_at) * 1e-6);
    hop.push_back(double(delivered_at - changed_at) * 1e-6);
    paint.push_back(double(painted_at - delivered_at) * 1e-6);
    // The predicted timeline follows: its store written, opened, queried
    // and painted.
    PredictedTimelineService* predicted = view->predictedTimeline();
    if (waitUntil(
            [&] { return predicted->requestedJob() > timeline_before && view->timelineSettled(); },
            30000)) {
      to_timeline.push_back(double(t.nsecsElapsed()) * 1e-6);
    }
  }
  const Stats painted = stats(to_painted);
  const Stats work = stats(analysis_seconds);
  const Stats tl = stats(to_timeline);
  std::printf(
      "plan edit -> estimate painted (%d edits): median %.2f ms, p90 %.2f ms, max %.2f ms "
      "(target 16 ms: %.1fx %s)\n",
      edits, painted.median, painted.p90, painted.max, 16.0 / std::max(1e-9, painted.median),
      painted.median < 16 ? "under" : "OVER");
  std::printf(
      "  of which: the edit on the GUI thread %.2f ms (undo step, views refreshed, and the "
      "analysis run inline: estimate + every control's options, %.2f ms); its delivery through "
      "the event loop %.2f ms; the views updated and painted %.2f ms (medians)\n",
      stats(gui_edit).median, work.median, stats(hop).median, stats(paint).median);
  std::printf(
      "  CPU time of the GUI thread per edit (what the app spends, apart from waiting for a core): "
      "median %.2f ms, p90 %.2f ms; load average now %.1f\n",
      stats(gui_cpu).median, stats(gui_cpu).p90, loadAverage());
  std::printf(
      "plan edit -> predicted timeline painted (store written, opened, queried): "
      "median %.1f ms, p90 %.1f ms (%zu of %d)\n",
      tl.median, tl.p90, to_timeline.size(), edits);
  ws->closeSession();

  // --- 2. app start -> default project shown ---------------------------------
  QTemporaryDir home;
  std::vector<double> wall;
  std::vector<double> inside;
  for (int i = 0; i < starts; ++i) {
    QProcess ui;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"),
               qEnvironmentVariable("QT_QPA_PLATFORM", QStringLiteral("offscreen")));
    env.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
    env.insert(QStringLiteral("XDG_DATA_HOME"), home.filePath(QStringLiteral("data")));
    ui.setProcessEnvironment(env);
    ui.setProcessChannelMode(QProcess::SeparateChannels);
    QElapsedTimer t;
    t.start();
    ui.start(QStringLiteral(CS_UI_PATH), {QStringLiteral("--startup-time")});
    QByteArray out;
    while (!out.contains('\n') && ui.state() != QProcess::NotRunning) {
      ui.waitForReadyRead(50);
      out += ui.readAllStandardOutput();
    }
    const double ms = double(t.nsecsElapsed()) * 1e-6;
    ui.waitForFinished(10000);
    out += ui.readAllStandardOutput();
    double reported = -1;
    if (const int at = out.indexOf("startup: "); at >= 0)
      reported = out.mid(at + 9).split(' ').front().toDouble();
    if (reported < 0) {
      std::fprintf(stderr, "bench_gui: clusterscope-ui did not report its start: %s\n%s\n",
                   out.constData(), ui.readAllStandardError().constData());
      return 1;
    }
    wall.push_back(ms);
    inside.push_back(reported);
  }
  const Stats warm =
      stats(std::vector<double>(wall.begin() + (wall.size() > 1 ? 1 : 0), wall.end()));
  std::printf(
      "app start -> default project painted (%d starts, a process each): first %.0f ms, "
      "then median %.0f ms, max %.0f ms (target 1000 ms: %.1fx %s); "
      "the app's own count from its process start: median %.0f ms\n",
      starts, wall.front(), warm.median, warm.max, 1000.0 / std::max(1e-9, warm.median),
      warm.median < 1000 ? "under" : "OVER", stats(inside).median);
  if (const int failed = benchRun(run_events)) return failed;
  if (const int failed = benchExports(export_events)) return failed;
  if (const int failed = benchManyLanes(many_lanes)) return failed;
  return benchLongNames(long_names);
}
