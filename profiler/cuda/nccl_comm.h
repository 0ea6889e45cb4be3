#pragma once
// The CUDA engine's communication: NCCL, one communicator per parallel
// dimension (split from the world's), operations on the backend's compute
// stream in program order, and data-parallel buckets on a stream of their own
// so that they overlap the rest of backward. Pipeline sends are held back and
// issued in one NCCL group with the next receive (as Megatron pairs them), so
// that two stages sending to each other never wait on each other.

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "profiler/worker/comm.h"
#include "profiler/worker/world_layout.h"

namespace cs::worker {

class OpTracer;

// How the ranks find each other: the id rank 0 made, given to every rank
// (over MPI, or through NCCL_COMM_ID=host:port, or in one process).
struct NcclBootstrap {
  int world_rank = 0;
  int world_size = 1;
  std::vector<char> unique_id;  // ncclUniqueId bytes; empty: make one (world of 1, or NCCL_COMM_ID set)
};

class NcclWorld {
 public:
  // `stream` is the backend's compute stream (cuda_compute_stream()).
  static Result<std::unique_ptr<NcclWorld>> create(const NcclBootstrap& boot, int dp, int tp, int pp,
                                                   int device, void* stream);
  // One process driving `devices` GPUs of pure data parallelism
  // (ncclCommInitAll): one world per GPU, each on its backend's stream.
  static Result<std::vector<std::unique_ptr<NcclWorld>>> create_all(const std::vector<int>& devices,
                                                                     const std::vector<void*>& streams);
  ~NcclWorld();

  const WorldLayout& layout() const { return layout_; }
  Communicator& dp() { return *dp_; }
  Communicator& tp() { return *tp_; }
  Communicator& pp() { return *pp_; }
  Communicator& world() { return world_ ? *world_ : *dp_; }  // single-process: the world is dp
  void set_tracer(OpTracer* tracer);
  static std::string version();  // "2.28.9"
  // A fresh id for rank 0 to hand out.
  static Result<std::vector<char>> make_unique_id();

  struct Impl;

 private:
  NcclWorld() = default;
  WorldLayout layout_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Communicator> dp_, tp_, pp_, world_;
};

}  // namespace cs::worker
