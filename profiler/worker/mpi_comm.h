#pragma once
// The CPU engine's communication: MPI (Open MPI) with one sub-communicator
// per parallel dimension. Collectives called from the compute thread block
// it; asynchronous ones run in order on a communication thread, so that data-
// parallel gradient buckets overlap the rest of backward (the DDP design).
// MPI is initialised with MPI_THREAD_MULTIPLE: both threads call MPI.

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "profiler/worker/comm.h"
#include "profiler/worker/world_layout.h"

namespace cs::worker {

class OpTracer;

class MpiWorld {
 public:
  // Initialises MPI (once per process); fails with a message when the world
  // size is not dp x tp x pp or MPI lacks thread support.
  static Result<std::unique_ptr<MpiWorld>> create(int* argc, char*** argv, int dp, int tp, int pp);
  ~MpiWorld();  // finalises MPI

  const WorldLayout& layout() const { return layout_; }
  Communicator& dp() { return *dp_; }
  Communicator& tp() { return *tp_; }
  Communicator& pp() { return *pp_; }
  Communicator& world() { return *world_; }
  // Traces every collective from now on (nullptr: off).
  void set_tracer(OpTracer* tracer);
  // Point-to-point waits sleep between polls after a short spin instead of
  // polling a core the whole time: for ranks whose threads outnumber the
  // cores, where a polling rank takes the core the rank it waits for needs
  // (a pipeline stage waiting for the previous one).
  void set_polite_waits(bool on);
  // Ends the whole job from one rank (a fatal error): every rank exits.
  [[noreturn]] void abort(int code);

  struct Impl;

 private:
  MpiWorld() = default;
  WorldLayout layout_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Communicator> dp_, tp_, pp_, world_;
};

// Keeps memory the process frees for its next allocation (glibc: one heap
// for all threads, no mmap for large blocks, no trimming). By default every
// block of 32 MiB or more is mapped at malloc and unmapped at free (64 MiB
// in a thread's own arena), and Open MPI allocates a temporary buffer for
// each large collective: every call then touched fresh pages. On the
// development VM a 64 MiB all-reduce over 2 ranks ran at 0.31 GB/s instead
// of 3.8 (bench_allreduce). A training process allocates the same sizes
// every step, which is why frameworks cache their allocations. Call it
// once, before MPI starts its threads.
void keep_freed_memory_in_process();

// For the CUDA engine under mpirun: rank 0's bytes (NCCL's unique id) given
// to every rank through MPI, which this initialises when nothing else has.
Result<std::vector<char>> mpi_broadcast_from_rank0(const std::vector<char>& bytes, int* argc,
                                                   char*** argv);
// Finalises MPI when the broadcast above started it.
void mpi_finalize_if_initialized();

}  // namespace cs::worker
