#pragma once
// A plan made into a run of the engines: which engine (CUDA when a GPU is
// here, else the CPU engine, said in a note), what the engines run instead of
// what they lack (notes), the model scaled to this machine, and the launcher's
// RunSpec with the worker's arguments. `clusterscope run` builds the same
// arguments from the same plan; the desktop app calls this. Qt-free.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plans.h"
#include "core/result.h"
#include "profiler/launcher.h"

namespace cs::launch {

struct PlanRunOptions {
  std::string backend = "auto";  // cpu, cuda or auto
  int steps = 20;
  std::string run_store;  // absolute path of the run store (.db)
  std::string title;      // default: "<model> on N ranks"
  double lr = 1e-3;
  std::uint64_t seed = 1234;
  int threads = 0;  // BLAS threads per rank (CPU); 0: the worker's default
  std::chrono::milliseconds hang_timeout{std::chrono::minutes(5)};
  std::string worker;  // clusterscope-worker (find_worker() when empty)
  std::string mpirun = "mpirun";
  Placement placement = Placement::local;
  std::string hostfile;  // Placement::hostfile
  SlurmOptions slurm;    // Placement::slurm
  std::string command_line;
  // False where nothing runs (merging what a run left): the plan beside the
  // store stays the run's own.
  bool write_plan = true;
  // The plan was read, unchanged, from the file the run writes its plan to
  // (RUN.plan.json given as --plan): it is left as the user wrote it.
  bool plan_file_is_the_plan = false;
  // Start CPU-engine ranks on this machine past what check_local_cpu_ranks allows.
  bool oversubscribe = false;
  // Messages name the engine's setting as the CLI's flag (--backend cpu);
  // false: as the app's Engine box.
  bool settings_are_flags = true;
};

// CPU-engine ranks one core of this machine runs at most (docs/runs.md: "More
// ranks than cores"): 4 ranks on 2 cores are measured and run well; 100,000
// on 2 spun mpirun at full CPU for minutes and never started a rank.
inline constexpr int kMaxRanksPerCore = 8;

// What this machine gives a run's ranks: its cores, and its memory not in use
// (bytes; 0 when unknown).
struct LocalCapacity {
  int cores = 1;
  double available_memory_bytes = 0;
};
LocalCapacity local_capacity();

// What a CPU-engine rank's process holds of its own besides its tensors
// (Open MPI, OpenBLAS, the trace writer): its anonymous memory with a
// model of 0.1 M parameters, or with a calibration's smallest sweeps, was
// 103 to 111 MiB on a 2-core VM at 1, 2 and 4 BLAS threads (the shared
// libraries' pages, shared between ranks, come on top).
inline constexpr double kCpuRankProcessBytes = 104.0 * 1024 * 1024;

// The memory a CPU-engine rank of `plan` takes at least (bytes): its share of
// the scaled model's weights, gradients and optimizer state, and its process.
Result<double> cpu_rank_memory_bytes(const Plan& plan);

// Refuses a run of the CPU engine on this machine (`backend` cpu, or auto
// without a GPU) with more ranks than kMaxRanksPerCore a core, or than the
// available memory holds: the message names the count, the cores or the
// memory, and the override (run --oversubscribe).
Status check_local_cpu_ranks(const Plan& plan, const std::string& backend,
                             const LocalCapacity& capacity = local_capacity());
// Where those ranks outnumber the cores but check_local_cpu_ranks lets them
// start: the warning to give before they do, that they take turns on the
// cores (naming the count and the cores); "" otherwise.
std::string local_cpu_ranks_warning(const Plan& plan, const std::string& backend,
                                    const LocalCapacity& capacity = local_capacity());

struct PlanRun {
  RunSpec spec;
  std::string backend;             // the engine that runs: "cpu" or "cuda"
  std::vector<std::string> notes;  // what runs differently from the plan, and why
  std::string plan_path;           // the plan the workers read, written beside the store
};

// The data-parallel gradient bucket (KiB) the workers get for `plan`: the
// plan's, scaled with the model when the model is scaled to this machine
// (the plan's bucket would hold a scaled model whole), at least 16 KiB.
Result<double> worker_bucket_kib(const Plan& plan);

// Fails (naming the field) when the engines cannot run the plan: a
// precision the CPU engine lacks, no clusterscope-worker, an unwritable folder.
Result<PlanRun> plan_run(const Plan& plan, const PlanRunOptions& options);

}  // namespace cs::launch
