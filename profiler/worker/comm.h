#pragma once
// Collectives and point-to-point transfers of one parallel dimension's group
// (its data-, tensor- or pipeline-parallel communicator). The CPU engine runs
// them through MPI, the CUDA engine through NCCL. Reductions are sums.

#include <cstdint>
#include <string_view>

#include "profiler/worker/tensor.h"

namespace cs::worker {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;   // rank inside this group
  virtual int size() const = 0;
  virtual std::string_view name() const = 0;  // "dp", "tp", "pp"

  // In program order on the compute thread (CUDA: on the compute stream).
  virtual void all_reduce(Tensor t) = 0;
  // Sequence parallelism's: as reduce_scatter_async and all_gather_async
  // below, fp32 or bf16, the shard never inside full.
  virtual void reduce_scatter(Tensor full, Tensor shard) = 0;
  virtual void all_gather(Tensor shard, Tensor full) = 0;
  // Point-to-point with `peer` (a rank of this group). send may return before
  // the data has left; wait_sends() ends every pending send.
  virtual void send(Tensor t, int peer) = 0;
  virtual void recv(Tensor t, int peer) = 0;
  virtual void wait_sends() = 0;
  // Ends the pending sends that read any byte of t (before t is written
  // again), leaving the others pending: the interleaved pipeline schedule
  // deadlocks if each rank waits for all its sends.
  virtual void wait_sends_from(Tensor t) = 0;
  // Returns once every rank of the group has called it; untraced (a sweep
  // lines its ranks up before timing a call).
  virtual void barrier() = 0;

  // Overlapping the compute thread (the communication thread or stream): a
  // ticket per operation, waited on before its result is used. The tensors
  // must stay untouched until then.
  using Ticket = std::uint64_t;
  virtual Ticket all_reduce_async(Tensor t) = 0;
  // full (size() equal shards) -> this rank's shard, summed over the group.
  // The shard may be this rank's own slice of full (in place, as ZeRO-1
  // reduces inside the gradient buffer); otherwise the two must not overlap.
  virtual Ticket reduce_scatter_async(Tensor full, Tensor shard) = 0;
  // this rank's shard -> full (every rank's shard in rank order). In place
  // likewise when the shard is this rank's slice of full.
  virtual Ticket all_gather_async(Tensor shard, Tensor full) = 0;
  // fp32 t summed over the group into root's t, in place (ZeRO-2: each
  // piece of a gradient bucket to the rank whose shard holds it, as
  // DeepSpeed's stage 2 reduces); the other ranks' t is left as it was.
  virtual Ticket reduce_async(Tensor t, int root) = 0;
  virtual void wait(Ticket ticket) = 0;
};

}  // namespace cs::worker
