// bench_gui: the desktop app's speed targets, measured on the real app.
//  1. A plan edit to the updated estimate painted, for GPT-3 175B on 1024
//     A100s (target: under 16 ms, one frame at 60 Hz). The edit goes through
//     the plan panel as a user's does (undo step, background analysis with
//     every control's options, bars and headline repainted); the predicted
//     timeline that follows it (written to a trace store, then queried) is
//     timed too.
//  2. The app started as a process until the default project's estimate is
//     painted (target: under 1 s), cold and warm.
// Usage: bench_gui [--edits N] [--starts N]   (offscreen unless a display is set)

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "app/gui/analysis.h"
#include "app/gui/estimate_view.h"
#include "app/gui/main_window.h"
#include "app/gui/plan_panel.h"
#include "app/gui/predicted_timeline.h"
#include "app/gui/workspace.h"
#include "core/presets.h"

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

}  // namespace

int main(int argc, char** argv) {
  int edits = 60;
  int starts = 6;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--edits") == 0 && i + 1 < argc) edits = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--starts") == 0 && i + 1 < argc) starts = std::atoi(argv[++i]);
  }
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY")) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  QApplication app(argc, argv);
  QStandardPaths::setTestModeEnabled(true);  // no user settings read or written
  QApplication::setOrganizationName(QStringLiteral("ClusterScopeBench"));
  QApplication::setApplicationName(QStringLiteral("bench_gui"));

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
  return 0;
}
