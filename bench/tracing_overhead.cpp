// The CPU engine's tracing overhead: step time of the worker with tracing on
// (every op, collective, step and counter written to its trace store) versus
// --no-trace, on the same model and batch (target: under 3 %).
//
// Real runs through the launcher and mpirun; runs with and without tracing
// alternate, and each side's figure is the median step time over all its
// runs (the first steps of a run, warm-up, left out).
//
// Usage: bench_tracing_overhead [ranks] [runs per side] [steps] [BLAS threads per rank]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/bench_args.h"
#include "core/median.h"
#include "profiler/launcher.h"

using namespace cs::launch;

namespace {

constexpr int kWarmup = 3;
constexpr const char* kUsage =
    "bench_tracing_overhead [ranks] [runs per side] [steps, more than 3] [BLAS threads per rank]";

struct Steps {
  std::vector<double> wall, cpu;  // seconds per step, warm-up left out
};

Steps run_once(int ranks, int steps, int threads, bool trace, const std::string& store) {
  RunSpec spec;
  spec.worker = CS_WORKER;
  spec.ranks = ranks;
  spec.worker_args = {"--layers",       "4",
                      "--hidden",       "256",
                      "--heads",        "8",
                      "--seq",          "128",
                      "--micro-batch",  "4",
                      "--dp",           std::to_string(ranks),
                      "--global-batch", std::to_string(4 * ranks),
                      "--steps",        std::to_string(steps)};
  if (threads > 0) {
    spec.worker_args.push_back("--threads");
    spec.worker_args.push_back(std::to_string(threads));
  }
  if (trace) {
    spec.run_store = store;
  } else {
    spec.worker_args.push_back("--no-trace");
  }
  Steps out;
  std::mutex mutex;
  Launcher launcher(spec, [&](const LaunchEvent& e) {
    if (e.kind != LaunchEvent::Kind::step || e.step < kWarmup) return;
    std::lock_guard lock(mutex);
    out.wall.push_back(e.step_seconds);
    out.cpu.push_back(e.cpu_seconds);
  });
  if (auto s = launcher.start(); !s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(1);
  }
  const RunReport r = launcher.wait();
  if (r.outcome != Outcome::completed) {
    std::fprintf(stderr, "run failed: %s\n", r.message.c_str());
    std::exit(1);
  }
  return out;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return v.empty() ? 0 : s / v.size();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 5) cs::bench::usage_error("bench_tracing_overhead", "too many arguments", kUsage);
  auto arg = [&](int i, const char* name, int fallback, int least, int most) {
    if (i >= argc) return fallback;
    return static_cast<int>(
        cs::bench::count_arg("bench_tracing_overhead", kUsage, name, argv[i], least, most));
  };
  const int ranks = arg(1, "ranks", 1, 1, 64);
  const int runs = arg(2, "runs per side", 4, 1, 1000);
  // Steps past the warm-up are the ones measured.
  const int steps = arg(3, "steps", 25, kWarmup + 1, 100000);
  // BLAS threads per rank (0: the worker's default, cores / ranks). With more
  // than one, OpenBLAS's threads spin while they wait, and CPU time follows
  // wall time: one thread gives the cleaner CPU figure.
  const int threads = arg(4, "BLAS threads per rank", 1, 0, 4096);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("cs-bench-tracing-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  Steps on, off;
  for (int r = 0; r < runs; ++r) {
    const Steps a = run_once(ranks, steps, threads, false, {});
    const Steps b = run_once(ranks, steps, threads, true, dir + "/run.db");
    off.wall.insert(off.wall.end(), a.wall.begin(), a.wall.end());
    off.cpu.insert(off.cpu.end(), a.cpu.begin(), a.cpu.end());
    on.wall.insert(on.wall.end(), b.wall.begin(), b.wall.end());
    on.cpu.insert(on.cpu.end(), b.cpu.begin(), b.cpu.end());
  }
  const double m_on = cs::median(on.wall);
  const double m_off = cs::median(off.wall);
  // CPU time per step, all threads of the rank (the writer's too): what
  // tracing costs, whatever else the machine is running.
  const double c_on = mean(on.cpu);
  const double c_off = mean(off.cpu);
  std::error_code ec;
  const std::uintmax_t store_bytes = std::filesystem::file_size(dir + "/run.db", ec);
  if (ec) {
    std::fprintf(stderr, "bench_tracing_overhead: the traced run left no store at %s/run.db: %s\n",
                 dir.c_str(), ec.message().c_str());
    std::filesystem::remove_all(dir, ec);
    return 1;
  }
  std::printf(
      "Tracing overhead, %d rank%s x %d BLAS threads, GPT 4 x 256 (seq 128, micro-batch 4), %d "
      "runs x %d steps per side\n",
      ranks, ranks == 1 ? "" : "s", threads, runs, steps);
  std::printf("median wall time per step: tracing off %.2f ms, on %.2f ms: %+.2f %%\n", m_off * 1e3,
              m_on * 1e3, (m_on / m_off - 1) * 100);
  std::printf(
      "mean CPU time per step (each rank's process, all its threads): off %.2f ms, on %.2f ms: "
      "overhead %+.2f %% "
      "(target < 3 %%)\n",
      c_off * 1e3, c_on * 1e3, (c_on / c_off - 1) * 100);
  std::printf("run store of the last traced run: %.1f KiB\n", store_bytes / 1024.0);
  std::filesystem::remove_all(dir, ec);
  return 0;
}
