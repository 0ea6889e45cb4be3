// All-reduce bus bandwidth of the CPU engine's communicator (MpiComm: the
// data-parallel group, called on the compute thread, and through the
// communication thread as the trainer's gradient buckets are) against a bare
// MPI_Allreduce loop on the same buffers (target: ratio >= 0.9). First, the
// bare loop with glibc's default allocation policy, against the same loop
// once the process keeps the memory it frees (what the worker does,
// keep_freed_memory_in_process): from 32 MiB, Open MPI's temporary buffer
// otherwise comes as fresh pages at every call.
//
// Run under mpirun, e.g. `mpirun -n 2 bench_allreduce`. Bus bandwidth as
// nccl-tests defines it: bytes / time x 2(n-1)/n. Each size alternates the
// three loops over several rounds and keeps each one's best round.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <mpi.h>

#include "profiler/worker/mpi_comm.h"

using namespace cs::worker;
using Clock = std::chrono::steady_clock;

namespace {

// Seconds per operation of `iterations` calls, timed by rank 0 after a barrier
// (the slowest rank bounds every collective anyway).
template <class F>
double seconds_per_op(int iterations, F&& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i)
    op();
  MPI_Barrier(MPI_COMM_WORLD);
  double s = std::chrono::duration<double>(Clock::now() - t0).count() / iterations;
  MPI_Bcast(&s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int size = 1;
  int rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One rank has no bus bandwidth (the factor 2(n-1)/n is 0): every figure
  // came out 0 GB/s and every ratio nan, with exit status 0.
  if (size < 2 || argc > 1) {
    if (rank == 0) {
      std::fprintf(stderr,
                   size < 2 ? "bench_allreduce: needs 2 or more ranks, it has %d: run it under "
                              "mpirun, e.g. mpirun -n 2 bench_allreduce\n"
                            : "bench_allreduce: takes no arguments (%d ranks): usage: mpirun -n "
                              "RANKS bench_allreduce\n",
                   size);
    }
    MPI_Finalize();
    return 2;
  }
  auto world = MpiWorld::create(&argc, &argv, size, 1, 1);
  if (!world) {
    std::fprintf(stderr, "%s\n", world.message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Communicator& dp = (*world)->dp();
  const double factor = 2.0 * (size - 1) / size;
  if (rank == 0) {
    std::printf("All-reduce bus bandwidth, %d ranks, fp32 sum (best round of 7)\n", size);
  }
  // The bare loop with glibc's default policy (best of 3 rounds), per size.
  std::vector<double> bare_default;
  for (std::int64_t bytes = 4096; bytes <= (64 << 20); bytes *= 4) {
    const std::int64_t count = bytes / 4;
    std::vector<float> buffer(static_cast<std::size_t>(count), 1.0f);
    const int iterations = static_cast<int>(std::clamp<std::int64_t>((200 << 20) / bytes, 5, 2000));
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      best = std::min(best, seconds_per_op(iterations, [&] {
                        MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count),
                                      MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                      }));
    }
    bare_default.push_back(best);
  }
  keep_freed_memory_in_process();
  if (rank == 0) {
    std::printf("%10s %14s %14s %14s %14s %8s %8s %10s\n", "bytes", "bare, default",
                "bare MPI", "engine", "engine async", "ratio", "async", "kept/def");
  }
  double sum_bare = 0, sum_engine = 0, sum_async = 0;
  std::size_t size_index = 0;
  for (std::int64_t bytes = 4096; bytes <= (64 << 20); bytes *= 4, ++size_index) {
    const std::int64_t count = bytes / 4;
    std::vector<float> buffer(static_cast<std::size_t>(count), 1.0f);
    Tensor t{buffer.data(), count, DType::f32};
    // About 0.2 s of traffic per loop at 1 GB/s, at least 5 operations.
    const int iterations = static_cast<int>(std::clamp<std::int64_t>((200 << 20) / bytes, 5, 2000));
    double bare = 1e30, engine = 1e30, async = 1e30;
    for (int round = 0; round < 7; ++round) {
      bare = std::min(bare, seconds_per_op(iterations, [&] {
                        MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count),
                                      MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                      }));
      engine = std::min(engine, seconds_per_op(iterations, [&] { dp.all_reduce(t); }));
      async = std::min(async, seconds_per_op(iterations, [&] { dp.wait(dp.all_reduce_async(t)); }));
    }
    const double bw_bare = bytes / bare * factor;
    const double bw_engine = bytes / engine * factor;
    const double bw_async = bytes / async * factor;
    sum_bare += bw_bare;
    sum_engine += bw_engine;
    sum_async += bw_async;
    if (rank == 0) {
      const double bw_default = bytes / bare_default[size_index] * factor;
      std::printf("%10lld %9.2f GB/s %9.2f GB/s %9.2f GB/s %9.2f GB/s %8.3f %8.3f %10.2f\n",
                  static_cast<long long>(bytes), bw_default * 1e-9, bw_bare * 1e-9,
                  bw_engine * 1e-9, bw_async * 1e-9, bw_engine / bw_bare, bw_async / bw_bare,
                  bw_bare / bw_default);
    }
  }
  if (rank == 0) {
    std::printf(
        "all sizes (bus bandwidths summed): engine/bare %.3f, engine async/bare %.3f "
        "(target >= 0.9)\n",
        sum_engine / sum_bare, sum_async / sum_bare);
  }
  world->reset();  // finalises MPI
  return 0;
}
