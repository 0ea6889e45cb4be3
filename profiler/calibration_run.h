#pragma once
// Records a calibration of the machine at hand: the worker's sweeps (GEMMs
// per precision, memory bandwidth, the model's loop operations, all-reduces
// over every group size) run through the launcher once per rank count, each
// rank measuring its share of a machine all ranks are using; the traced
// sweeps are merged into one calibration store (core/calibration_meta.h says
// which store ranks belong to which rank count). planners/calibration.h fits
// the device and link profile from that store.
//
// Qt-free; the GUI calls record_calibration on a worker thread with a
// progress callback and a stop request, as the CLI does.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/calibration_meta.h"
#include "core/result.h"

namespace cs::launch {

struct CalibrationRunOptions {
  std::string worker;  // clusterscope-worker (find_worker() when empty)
  std::string mpirun = "mpirun";
  std::string backend = "cpu";               // "cpu", or "cuda" (one rank per GPU)
  std::vector<int> rank_counts = {1, 2, 4};  // CPU: ranks sharing the cores; CUDA: GPUs
  int threads = 0;  // BLAS threads per rank (CPU); 0: the worker's default (cores / ranks)
  // CPU: the GEMM sweep runs in each (one launch); CUDA: one launch per precision.
  std::vector<std::string> precisions = {"fp32", "bf16"};
  std::vector<std::int64_t> gemm_sizes = {64, 128, 256, 384, 512};       // widths of the layer GEMMs
  std::vector<std::int64_t> buffer_sizes = {1 << 16, 1 << 20, 1 << 24};  // bytes
  // From 16 KiB, the smallest tensor a step moves: below a few KiB MPI's
  // eager protocol costs a fraction of the latency larger messages pay, and
  // one such point would pull the fitted latency (α) down for all sizes. Up
  // to 16 MiB, the size of a gradient bucket: a message that leaves the
  // caches moves slower (development VM, 2 ranks: 5.4-5.9 GB/s at 4 MiB,
  // 3.9-4.1 at 16).
  std::vector<std::int64_t> message_sizes = {1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24};
  double seconds_per_size = 0.2;  // per GEMM size; the operation sweep takes a quarter per point
  bool ops = true;                // the operation sweep (the CPU engine's loop costs)
  std::string store;              // the calibration store to write
  std::string title = "Calibration";
  std::string host;              // recorded (default: this host's name)
  double host_memory_bytes = 0;  // recorded
  int cpu_cores = 0;             // recorded
  // CUDA: the smallest GPU's memory, which one rank's sweeps must fit in
  // (0: not checked). The CPU engine's ranks are checked against the
  // host's available memory.
  double gpu_memory_bytes = 0;
  // A phase without progress this long is stopped as hung; 0: never.
  std::chrono::milliseconds hang_timeout{std::chrono::minutes(10)};
};

// The memory one rank of these sweeps holds at most at once (bytes), and
// which sweep holds it ("the layer GEMMs of width 4096 in fp32"): the widest
// layer GEMM's operands, the two largest bandwidth buffers, or the largest
// all-reduce message with MPI's copy of it (and, in a world of several
// ranks, the cold sweep's kColdSweepEvictBytes that evict the caches).
struct SweepMemory {
  double bytes = 0;
  std::string what;
};
SweepMemory calibration_rank_memory(const CalibrationRunOptions& options, int ranks);

// Refuses sweeps that would not fit, before any rank starts (a rank the
// kernel killed for memory lost the phase, and the machine slowed to a
// crawl first): on the CPU engine the ranks of each rank count together in
// `host_available_bytes` (0: not checked), on CUDA one rank in
// options.gpu_memory_bytes. The message names the count, the sweep and the
// options that make it smaller.
Status check_calibration_memory(const CalibrationRunOptions& options, double host_available_bytes);

// Reported at each phase's start, at each point its ranks measured (every
// rank's sample of that point in), and for the launcher's messages. After
// the sweeps' phases the reference runs are phases too, a step a point.
struct CalibrationProgress {
  int phase = 0;  // 0-based
  int phases = 0;
  // Within the phase: the points done of all it has (0 of 0 until its ranks
  // have said how many; a point is a sweep's sample, a reference run's step).
  int point = 0;
  int points = 0;
  bool measured = false;  // reported for a point measured, not a phase's start or a message
  std::string sweep;      // the measured point's sweep ("all-reduces"); "" for a step
  std::string text;       // what is happening, for a status line
  // Of the whole calibration, 0 to 1: the phases done and the done share of
  // this one's points, each phase an equal share. It never goes back while
  // a calibration reports: a phase starts at the share its last one ended on.
  double fraction() const;
};

// Where all ranks of a launch have got to, each counting its own points
// (sweep samples, steps): the lowest count, said once each time it moves on.
class SlowestRank {
 public:
  explicit SlowestRank(int ranks);
  // The new lowest count when `count` (rank's) moves it on; nothing for a
  // rank out of range or no change.
  std::optional<int> advance(int rank, int count);

 private:
  std::vector<int> counts_;
  int lowest_ = 0;
};

struct CalibrationRecord {
  std::string store;
  CalibrationInfo info;
  std::vector<std::string> commands;  // what was run, one mpirun line per phase
  double seconds = 0;
  bool cancelled = false;
};

struct StopRequest;  // profiler/launcher.h

// Runs every phase and writes options.store. `stop` (may be null) stops the
// phase running (every rank closes its store, or is killed when stop->kill
// is set) and ends with an error saying so; the phases' own stores are
// removed either way.
Result<CalibrationRecord> record_calibration(
    const CalibrationRunOptions& options,
    const std::function<void(const CalibrationProgress&)>& progress = {},
    const StopRequest* stop = nullptr);

}  // namespace cs::launch
