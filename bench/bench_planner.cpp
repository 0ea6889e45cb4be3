// bench_planner: the planner's speed targets, measured.
//  1. One estimate of a GPT-3 175B plan (target: under 20 us).
//  2. The exhaustive search for GPT-3 175B on 1024 A100s (dgx-a100-1024) over
//     the full space (target: about a million candidates in under 1 s), with
//     the ratio against the 18 ms per plan of the best open planner
//     (Calculon, Isaev et al. SC23, in Python).
// Usage: bench_planner [--threads N] [--quick]
// Times are wall time; the search's CPU time is printed beside it, since on a
// shared machine the wall time includes waiting for a core.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "bench/bench_args.h"
#include "core/presets.h"
#include "planners/estimate.h"
#include "planners/search.h"

using Clock = std::chrono::steady_clock;

namespace {

constexpr double kCalculonSecondsPerPlan = 18e-3;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr const char* kUsage = "bench_planner [--threads N] [--quick]";

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      // 0: every hardware thread.
      threads = static_cast<int>(
          cs::bench::count_arg("bench_planner", kUsage, "--threads", argv[++i], 0, 4096));
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      cs::bench::usage_error("bench_planner", std::string("unknown argument '") + argv[i] + "'",
                             kUsage);
    }
  }
  auto catalog = cs::PresetCatalog::load_default();
  if (!catalog) {
    std::fprintf(stderr, "bench_planner: %s\n", catalog.message().c_str());
    return 1;
  }
  auto cluster = catalog->cluster("dgx-a100-1024");
  const cs::Workload* model = catalog->find_model("gpt3-175b");
  if (!cluster || !model) {
    std::fprintf(stderr, "bench_planner: presets dgx-a100-1024 / gpt3-175b missing\n");
    return 1;
  }

  // 1. One estimate: Megatron's GPT-3 175B plan on 1024 A100s.
  cs::Plan plan;
  plan.cluster = *cluster;
  plan.workload = *model;
  plan.parallel.tp = 8;
  plan.parallel.pp = 8;
  plan.parallel.dp = 16;
  plan.parallel.virtual_stages = 3;
  plan.parallel.schedule = cs::PipelineSchedule::interleaved;
  plan.parallel.sequence_parallel = true;
  plan.parallel.recompute = cs::Recompute::selective;
  plan.parallel.micro_batch = 1;
  plan.parallel.global_batch = 1536;
  plan.parallel.zero_stage = 1;
  plan.precision = cs::PrecisionPlan::for_compute(cs::Precision::bf16);
  auto first = cs::plan::estimate(plan);
  if (!first) {
    std::fprintf(stderr, "bench_planner: %s\n", first.message().c_str());
    return 1;
  }
  const int reps = quick ? 2000 : 20000;
  double sink = 0;
  std::vector<double> samples;
  for (int round = 0; round < 5; ++round) {
    const auto t = Clock::now();
    for (int i = 0; i < reps; ++i) {
      plan.parallel.micro_batch = 1 + (i & 1);  // defeat any caching across calls
      auto e = cs::plan::estimate(plan);
      if (!e) {
        std::fprintf(stderr, "bench_planner: micro-batch %d: %s\n", plan.parallel.micro_batch,
                     e.message().c_str());
        return 1;
      }
      sink += e->time.step();
    }
    samples.push_back(seconds_since(t) / reps);
  }
  std::sort(samples.begin(), samples.end());
  const double per_estimate = samples[samples.size() / 2];
  std::printf("estimate, GPT-3 175B on 1024 A100 (tp 8, pp 8 x 3, dp 16, SP + selective):\n");
  std::printf("  %.2f us per estimate (median of 5 x %d; target < 20 us)\n", per_estimate * 1e6,
              reps);
  std::printf("  step %.2f s, %.0f tokens/s, MFU %.1f %%, %.1f GiB per GPU\n", first->time.step(),
              first->throughput.tokens_per_second, first->throughput.mfu * 100,
              first->memory.total() / (1024.0 * 1024 * 1024));
  std::printf("  vs 18 ms per plan (Calculon, Python): %.0fx faster\n\n",
              kCalculonSecondsPerPlan / per_estimate);

  // 2. Exhaustive search over the full space.
  cs::plan::SearchSpace space;
  space.global_batches = {1536};
  space.use_all_gpus = false;  // every dp, not only those that fill the cluster
  space.micro_batches = {};    // default: powers of two up to 64
  cs::plan::SearchLimits limits;
  limits.top_k = 10;
  limits.threads = threads;
  const double c0 = cs::bench::cpu_seconds();
  const auto t = Clock::now();
  auto result = cs::plan::search(*cluster, *model, space, cs::plan::Objective::throughput, limits);
  const double wall = seconds_since(t);
  const double cpu = cs::bench::cpu_seconds() - c0;
  if (!result) {
    std::fprintf(stderr, "bench_planner: %s\n", result.message().c_str());
    return 1;
  }
  const double rate = result->candidates / wall;
  std::printf(
      "search, GPT-3 175B on dgx-a100-1024, global batch 1536, every dp/tp/pp/v/SP/ZeRO/\n"
      "micro-batch/recompute/precision/fused-attention combination, %d threads:\n",
      result->threads);
  std::printf(
      "  %lld candidates (%lld valid, %lld fit in memory, timed) in %.3f s (target < 1 s; "
      "CPU time %.3f s)\n",
      static_cast<long long>(result->candidates), static_cast<long long>(result->valid),
      static_cast<long long>(result->fitting), wall, cpu);
  std::printf(
      "  %.2f M candidates/s, %.2f us per candidate per thread\n", rate / 1e6,
      wall * result->threads / std::max<double>(static_cast<double>(result->candidates), 1) * 1e6);
  std::printf(
      "  vs 18 ms per plan (Calculon, Python): %.0fx faster; the same search there: %.1f h\n",
      kCalculonSecondsPerPlan * rate, result->candidates * kCalculonSecondsPerPlan / 3600);
  // The candidates are listed per unit as each is searched, not all kept up
  // front (20 bytes each: 1.3 GB at the 50 M a search may hold).
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("  peak resident memory of the process: %.1f MiB\n", usage.ru_maxrss / 1024.0);
  if (!result->best.empty()) {
    const auto& b = result->best.front();
    std::printf(
        "  best: dp %d tp %d pp %d v %d SP %s ZeRO %d micro-batch %d recompute %s %s%s: "
        "%.2f s per step, MFU %.1f %%\n",
        b.parallel.dp, b.parallel.tp, b.parallel.pp, b.parallel.virtual_stages,
        b.parallel.sequence_parallel ? "on" : "off", b.parallel.zero_stage, b.parallel.micro_batch,
        std::string(cs::to_string(b.parallel.recompute)).c_str(),
        std::string(cs::to_string(b.precision.compute)).c_str(),
        b.parallel.flash_attention ? " flash" : "", b.estimate.time.step(),
        b.estimate.throughput.mfu * 100);
  }
  return sink > 0 ? 0 : 1;
}
