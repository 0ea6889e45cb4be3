#include "profiler/cuda/nccl_comm.h"

#include <cstring>
#include <deque>
#include <exception>
#include <stdexcept>
#include <utility>

#include <cuda_runtime.h>
#include <nccl.h>

#include "profiler/worker/op_tracer.h"

namespace cs::worker {

namespace {

[[noreturn]] void nccl_fail(const char* what, ncclResult_t r) {
  throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(r));
}
#define CS_NCCL(call)                                     \
  do {                                                    \
    ncclResult_t r_ = (call);                             \
    if (r_ != ncclSuccess) nccl_fail(#call, r_);          \
  } while (0)
#define CS_CUDA_OK(call)                                                                   \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#call) + " failed: " +     \
                                                    cudaGetErrorString(e_));               \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
  }
  return ncclFloat32;
}

}  // namespace

struct NcclWorld::Impl {
  OpTracer* tracer = nullptr;
};

namespace {

class NcclComm final : public Communicator {
 public:
  NcclComm(ncclComm_t comm, std::string name, cudaStream_t compute, int device,
           NcclWorld::Impl& impl)
      : comm_(comm), name_(std::move(name)), compute_(compute), device_(device), impl_(impl) {
    CS_NCCL(ncclCommUserRank(comm_, &rank_));
    CS_NCCL(ncclCommCount(comm_, &size_));
    CS_CUDA_OK(cudaSetDevice(device_));
    CS_CUDA_OK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  }
  ~NcclComm() override {
    cudaSetDevice(device_);
    // Destroyed while a failure unwinds (an NCCL error, a peer gone): its
    // kernels may spin for a peer that will not come, which a stream sync
    // or ncclCommDestroy (it finalizes: flushes what was issued) would wait
    // on for ever. ncclCommAbort stops them; the rank then exits.
    const bool failing = std::uncaught_exceptions() > 0;
    if (failing) ncclCommAbort(comm_);
    cudaStreamSynchronize(side_);
    for (auto& [ticket, event] : events_) cudaEventDestroy(event);
    cudaStreamDestroy(side_);
    if (barrier_word_) cudaFree(barrier_word_);
    if (!failing) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return name_; }

  void all_reduce(Tensor t) override {
    flush_sends();
    CS_NCCL(ncclAllReduce(t.data, t.data, static_cast<std::size_t>(t.numel), nccl_type(t.dtype),
                          ncclSum, comm_, compute_));
  }

  void reduce_scatter(Tensor full, Tensor shard) override {
    flush_sends();
    CS_NCCL(ncclReduceScatter(full.data, shard.data, static_cast<std::size_t>(shard.numel),
                              nccl_type(full.dtype), ncclSum, comm_, compute_));
  }
  void all_gather(Tensor shard, Tensor full) override {
    flush_sends();
    CS_NCCL(ncclAllGather(shard.data, full.data, static_cast<std::size_t>(shard.numel),
                          nccl_type(shard.dtype), comm_, compute_));
  }

  // Held back until the next receive or wait_sends (see the header).
  void send(Tensor t, int peer) override { pending_.emplace_back(t, peer); }

  void recv(Tensor t, int peer) override {
    in_group([&] {
      issue_pending_sends();
      CS_NCCL(
          ncclRecv(t.data, static_cast<std::size_t>(t.bytes()), ncclUint8, peer, comm_, compute_));
    });
  }

  void wait_sends() override { flush_sends(); }
  // Issued, a send ends on the compute stream before what is queued after
  // it writes t; held back, it would read what they wrote.
  void wait_sends_from(Tensor t) override {
    const char* begin = static_cast<const char*>(t.data);
    const char* end = begin + t.bytes();
    for (const auto& [tensor, to] : pending_) {
      const char* from = static_cast<const char*>(tensor.data);
      if (from < end && begin < from + tensor.bytes()) return flush_sends();
    }
  }

  void barrier() override {
    CS_CUDA_OK(cudaSetDevice(device_));  // the calling thread may be on another GPU
    flush_sends();
    if (!barrier_word_) CS_CUDA_OK(cudaMalloc(&barrier_word_, sizeof(float)));
    CS_NCCL(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, compute_));
    CS_CUDA_OK(cudaStreamSynchronize(compute_));
  }

  Ticket all_reduce_async(Tensor t) override {
    return on_side_stream([&] {
      CS_NCCL(ncclAllReduce(t.data, t.data, static_cast<std::size_t>(t.numel), nccl_type(t.dtype),
                            ncclSum, comm_, side_));
    });
  }
  Ticket reduce_scatter_async(Tensor full, Tensor shard) override {
    return on_side_stream([&] {
      CS_NCCL(ncclReduceScatter(full.data, shard.data, static_cast<std::size_t>(shard.numel),
                                nccl_type(full.dtype), ncclSum, comm_, side_));
    });
  }
  Ticket all_gather_async(Tensor shard, Tensor full) override {
    return on_side_stream([&] {
      CS_NCCL(ncclAllGather(shard.data, full.data, static_cast<std::size_t>(shard.numel),
                            nccl_type(shard.dtype), comm_, side_));
    });
  }

  Ticket reduce_async(Tensor t, int root) override {
    return on_side_stream([&] {
      CS_NCCL(ncclReduce(t.data, t.data, static_cast<std::size_t>(t.numel), nccl_type(t.dtype),
                         ncclSum, root, comm_, side_));
    });
  }

  void wait(Ticket ticket) override {
    for (auto it = events_.begin(); it != events_.end(); ++it) {
      if (it->first == ticket) {
        // The compute stream waits on the GPU; the host does not.
        CS_CUDA_OK(cudaStreamWaitEvent(compute_, it->second, 0));
        cudaEventDestroy(it->second);
        events_.erase(it);
        return;
      }
    }
  }

 private:
  void flush_sends() {
    if (pending_.empty()) return;
    in_group([&] { issue_pending_sends(); });
  }
  void issue_pending_sends() {
    for (auto& [tensor, to] : pending_) {
      CS_NCCL(ncclSend(tensor.data, static_cast<std::size_t>(tensor.bytes()), ncclUint8, to, comm_, compute_));
    }
    pending_.clear();
  }
  // Calls `issue` between ncclGroupStart and ncclGroupEnd. A call inside
  // that fails still ends the group: one left open would hold every later
  // NCCL call of this thread (the communicators' aborts included) in it.
  template <class F>
  void in_group(F&& issue) {
    CS_NCCL(ncclGroupStart());
    try {
      issue();
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    CS_NCCL(ncclGroupEnd());
  }

  // Work on the side stream starts after everything queued on the compute
  // stream so far (the gradients it reduces are final there).
  template <class F>
  Ticket on_side_stream(F&& launch) {
    CS_CUDA_OK(cudaSetDevice(device_));  // events belong to the current device
    cudaEvent_t ready;
    CS_CUDA_OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    CS_CUDA_OK(cudaEventRecord(ready, compute_));
    CS_CUDA_OK(cudaStreamWaitEvent(side_, ready, 0));
    cudaEventDestroy(ready);
    launch();
    cudaEvent_t done;
    CS_CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CS_CUDA_OK(cudaEventRecord(done, side_));
    const Ticket t = ++next_;
    events_.emplace_back(t, done);
    return t;
  }

  ncclComm_t comm_;
  std::string name_;
  cudaStream_t compute_;
  cudaStream_t side_ = nullptr;
  void* barrier_word_ = nullptr;  // barrier()'s one-element all-reduce
  int device_;
  NcclWorld::Impl& impl_;
  int rank_ = 0;
  int size_ = 1;
  Ticket next_ = 0;
  std::deque<std::pair<Ticket, cudaEvent_t>> events_;
  std::vector<std::pair<Tensor, int>> pending_;
};

}  // namespace

Result<std::vector<char>> NcclWorld::make_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return Error{std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r)};
  std::vector<char> bytes(sizeof id.internal);
  std::memcpy(bytes.data(), id.internal, sizeof id.internal);
  return bytes;
}

std::string NcclWorld::version() {
  int v = 0;
  ncclGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

Result<std::unique_ptr<NcclWorld>> NcclWorld::create(const NcclBootstrap& boot, int dp, int tp,
                                                     int pp, int device, void* stream) {
  if (boot.world_size != dp * tp * pp) {
    return Error{"the plan needs dp x tp x pp = " + std::to_string(dp * tp * pp) + " ranks, but " +
                 std::to_string(boot.world_size) + " were started"};
  }
  ncclComm_t world_comm = nullptr;
  try {
    CS_CUDA_OK(cudaSetDevice(device));
    ncclUniqueId id;
    if (!boot.unique_id.empty()) {
      std::memcpy(id.internal, boot.unique_id.data(), sizeof id.internal);
    } else {
      // With NCCL_COMM_ID set every rank derives the same id from rank 0's address.
      CS_NCCL(ncclGetUniqueId(&id));
    }
    CS_NCCL(ncclCommInitRank(&world_comm, boot.world_size, id, boot.world_rank));
    std::unique_ptr<NcclWorld> w(new NcclWorld);
    w->layout_ = WorldLayout::of(boot.world_rank, dp, tp, pp);
    w->impl_ = std::make_unique<Impl>();
    const WorldLayout& l = w->layout_;
    auto s = static_cast<cudaStream_t>(stream);
    auto split = [&](int colour, const char* name) -> std::unique_ptr<Communicator> {
      ncclComm_t comm = nullptr;
      CS_NCCL(ncclCommSplit(world_comm, colour, boot.world_rank, &comm, nullptr));
      try {
        return std::make_unique<NcclComm>(comm, name, s, device, *w->impl_);
      } catch (...) {
        ncclCommAbort(comm);  // no NcclComm took it
        throw;
      }
    };
    w->dp_ = split(l.order().data_parallel_group(l.coordinates()), "dp");
    w->tp_ = split(l.order().tensor_parallel_group(l.coordinates()), "tp");
    w->pp_ = split(l.order().pipeline_group(l.coordinates()), "pp");
    w->world_ = std::make_unique<NcclComm>(world_comm, "world", s, device, *w->impl_);
    world_comm = nullptr;  // w->world_ owns it
    return w;
  } catch (const std::exception& e) {
    // The world communicator no NcclComm took yet (a split failed); the
    // split ones went with `w`, aborted as it unwound.
    if (world_comm) ncclCommAbort(world_comm);
    return Error{e.what()};
  }
}

Result<std::vector<std::unique_ptr<NcclWorld>>> NcclWorld::create_all(
    const std::vector<int>& devices, const std::vector<void*>& streams) {
  if (devices.empty() || devices.size() != streams.size()) {
    return Error{"single-process mode needs one stream per GPU and at least one GPU"};
  }
  // Communicators made and not yet taken by an NcclComm: aborted on a
  // failure (those taken go with their worlds as the failure unwinds).
  const int n = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  ncclComm_t tp_comm = nullptr, pp_comm = nullptr;
  try {
    CS_NCCL(ncclCommInitAll(comms.data(), n, devices.data()));
    std::vector<std::unique_ptr<NcclWorld>> worlds;
    for (int r = 0; r < n; ++r) {
      std::unique_ptr<NcclWorld> w(new NcclWorld);
      w->layout_ = WorldLayout::of(r, n, 1, 1);
      w->impl_ = std::make_unique<Impl>();
      auto s = static_cast<cudaStream_t>(streams[r]);
      // Pure data parallelism: the world is the data-parallel group; tp and pp are single ranks.
      ncclUniqueId solo;
      CS_NCCL(ncclGetUniqueId(&solo));
      CS_CUDA_OK(cudaSetDevice(devices[r]));
      CS_NCCL(ncclCommInitRank(&tp_comm, 1, solo, 0));
      CS_NCCL(ncclGetUniqueId(&solo));
      CS_NCCL(ncclCommInitRank(&pp_comm, 1, solo, 0));
      w->dp_ = std::make_unique<NcclComm>(comms[r], "dp", s, devices[r], *w->impl_);
      comms[r] = nullptr;  // taken
      w->tp_ = std::make_unique<NcclComm>(tp_comm, "tp", s, devices[r], *w->impl_);
      tp_comm = nullptr;  // taken
      w->pp_ = std::make_unique<NcclComm>(pp_comm, "pp", s, devices[r], *w->impl_);
      pp_comm = nullptr;  // taken
      worlds.push_back(std::move(w));
    }
    return worlds;
  } catch (const std::exception& e) {
    for (ncclComm_t c : comms)
      if (c) ncclCommAbort(c);
    if (tp_comm) ncclCommAbort(tp_comm);
    if (pp_comm) ncclCommAbort(pp_comm);
    return Error{e.what()};
  }
}

NcclWorld::~NcclWorld() = default;

void NcclWorld::set_tracer(OpTracer* tracer) { impl_->tracer = tracer; }

}  // namespace cs::worker
