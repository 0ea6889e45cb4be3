#pragma once
// Where a process sits in a distributed job, read from the environment its
// launcher set: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, ...), Open MPI's
// mpirun (OMPI_COMM_WORLD_*), a PMI launcher (MPICH / Intel MPI hydra, srun
// --mpi=pmi2: PMI_RANK, PMI_SIZE), or a Slurm job step started by srun
// (SLURM_PROCID, ...). A process started by none of them is rank 0 of 1.
// Also NCCL's rendezvous address (NCCL_COMM_ID=host:port).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace cs::profiler {

// An environment as name -> value; tests build one, processes read theirs.
using Environment = std::map<std::string, std::string, std::less<>>;

// The environment of this process.
Environment current_environment();

enum class Launcher : std::uint8_t {
  none = 0,      // a single process
  torchrun = 1,  // torchrun / torch.distributed.run (also python -m torch.distributed.launch)
  open_mpi = 2,  // mpirun / mpiexec of Open MPI
  pmi = 3,       // a PMI launcher: MPICH or Intel MPI hydra, srun --mpi=pmi2
  slurm = 4,     // a task of a Slurm job step (srun)
};

std::string_view to_string(Launcher launcher);

struct LaunchEnv {
  Launcher launcher = Launcher::none;
  int rank = 0;  // global rank, [0, world_size)
  int world_size = 1;
  int local_rank = 0;                       // rank among the processes of this node
  std::optional<int> local_world_size = 1;  // processes on this node, when the launcher says
  std::optional<int> node_rank;             // index of this node in the job, when the launcher says

  // "rank 3 of 8 (local 1 of 4, node 0) from torchrun"
  std::string describe() const;
};

// Reads the launcher's variables. When several launchers are visible (torchrun
// inside a Slurm allocation, mpirun inside sbatch), the one that started this
// process directly wins: torchrun, then Open MPI, then PMI, then Slurm.
// Errors name the variable: not a number, negative, a rank not below its size,
// half of a pair set (RANK without WORLD_SIZE).
Result<LaunchEnv> parse_launch_env(const Environment& env);

// A run's id, recorded by each of its ranks (trace::kRunIdMeta) so that a
// merge refuses rank stores of two runs: a new one is its start in UTC and
// 32 random bits, "20261205T155901Z-3f9a2c1b".
std::string new_run_id();

// Where a launcher handed every rank the same id, clusterscope profile
// (`kRunIdVariable`) or an mpirun or srun of the user's: that id, read from
// the environment the launcher set for each rank alike.
//   - `kRunIdVariable`: "20261205T155901Z-3f9a2c1b";
//   - Open MPI: its job's PMIx namespace, with a digest of the address of
//     the mpirun that started it (a namespace comes again when an mpirun's
//     pid does): "openmpi-307036161-5c1e07a2";
//   - a Slurm job step: "slurm-<job>.<step>" ("slurm-<job>" outside a step).
// The first found, in that order (mpirun inside a Slurm job: Open MPI's).
// Empty when none is set: a single process, torchrun.
inline constexpr const char* kRunIdVariable = "CLUSTERSCOPE_RUN_ID";
std::string shared_run_id(const Environment& env);

// NCCL_COMM_ID: where rank 0 listens for NCCL's bootstrap, "host:port",
// "[ipv6]:port" or "ipv4:port".
struct NcclRendezvous {
  std::string host;  // without brackets for IPv6
  int port = 0;

  std::string to_string() const;  // as NCCL_COMM_ID spells it
};

// Parses one NCCL_COMM_ID value; the error names the variable and says what is wrong.
Result<NcclRendezvous> parse_nccl_comm_id(std::string_view value);

// NCCL_COMM_ID from the environment, or nothing when it is unset or empty.
Result<std::optional<NcclRendezvous>> nccl_rendezvous_from(const Environment& env);

}  // namespace cs::profiler
