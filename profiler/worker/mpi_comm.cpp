#include "profiler/worker/mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <mpi.h>

#include "profiler/worker/op_tracer.h"

namespace cs::worker {

// The communication thread: runs submitted operations one after another.
struct MpiWorld::Impl {
  std::thread thread;
  std::mutex mutex;
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::deque<std::pair<Communicator::Ticket, std::function<void()>>> queue;
  Communicator::Ticket next = 1;
  Communicator::Ticket completed = 0;
  bool stopping = false;
  OpTracer* tracer = nullptr;
  bool polite = false;  // MpiWorld::set_polite_waits

  Impl() {
    thread = std::thread([this] { run(); });
  }
  ~Impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    work_cv.notify_all();
    thread.join();
  }
  void run() {
    for (;;) {
      std::pair<Communicator::Ticket, std::function<void()>> item;
      {
        std::unique_lock lock(mutex);
        work_cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        item = std::move(queue.front());
        queue.pop_front();
      }
      item.second();
      {
        std::lock_guard lock(mutex);
        completed = item.first;
      }
      done_cv.notify_all();
    }
  }
  Communicator::Ticket submit(std::function<void()> work) {
    std::lock_guard lock(mutex);
    const Communicator::Ticket t = next++;
    queue.emplace_back(t, std::move(work));
    work_cv.notify_one();
    return t;
  }
  void wait(Communicator::Ticket t) {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return completed >= t; });
  }
};

namespace {

// The most elements (or bytes) one MPI call is given: MPI's counts are ints
// (Open MPI 4 has no large-count calls), so a larger transfer goes in
// pieces. CLUSTERSCOPE_MPI_MAX_COUNT lowers it, for the tests.
std::int64_t max_mpi_count() {
  static const std::int64_t limit = [] {
    if (const char* v = std::getenv("CLUSTERSCOPE_MPI_MAX_COUNT")) {
      const long long n = std::atoll(v);
      if (n > 0 && n < INT_MAX) return static_cast<std::int64_t>(n);
    }
    return static_cast<std::int64_t>(INT_MAX);
  }();
  return limit;
}

// Calls piece(offset, count) over [0, total) in pieces MPI can count.
template <class F>
void in_pieces(std::int64_t total, F&& piece) {
  const std::int64_t most = max_mpi_count();
  for (std::int64_t at = 0; at < total; at += most)
    piece(at, static_cast<int>(std::min(most, total - at)));
}

char* bytes_at(const Tensor& t, std::int64_t offset) {
  return static_cast<char*>(t.data) + offset;
}

trace::DataType trace_type(DType t) {
  switch (t) {
    case DType::f32: return trace::DataType::fp32;
    case DType::bf16: return trace::DataType::bf16;
    case DType::f16: return trace::DataType::fp16;
    case DType::i32: return trace::DataType::int32;
  }
  return trace::DataType::none;
}

const char* collective_label(trace::Collective c) {
  switch (c) {
    case trace::Collective::all_reduce: return "all-reduce";
    case trace::Collective::all_gather: return "all-gather";
    case trace::Collective::reduce_scatter: return "reduce-scatter";
    case trace::Collective::reduce:
      return "reduce";
    case trace::Collective::send: return "send";
    case trace::Collective::recv: return "recv";
    default: return "collective";
  }
}

// MPI has no 16-bit float: bf16 travels as 16-bit words and this op sums
// them in fp32, rounding each partial sum back to bf16 (as NCCL's bf16
// all-reduce does). Widening the whole buffer to fp32 sent twice the bytes
// the trace recorded for it.
extern "C" void sum_bf16(void* in, void* inout, int* length, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *length; ++i)
    b[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

MPI_Op bf16_sum_op() {
  static const MPI_Op op = [] {
    MPI_Op created;
    MPI_Op_create(&sum_bf16, /*commute=*/1, &created);
    return created;
  }();
  return op;
}

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm comm, std::string name, MpiWorld::Impl& impl)
      : comm_(comm), name_(std::move(name)), impl_(impl) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // A transfer's peer is recorded as the store numbers ranks, the world's:
    // the group's rank named another rank (or the rank itself) wherever the
    // pipeline group is not the world's first ranks (dp x pp, tp x pp).
    MPI_Group group, world;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> ranks(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r)
      ranks[r] = r;
    world_ranks_.resize(ranks.size());
    MPI_Group_translate_ranks(group, size_, ranks.data(), world, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
  }
  ~MpiComm() override {
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return name_; }

  void all_reduce(Tensor t) override {
    traced(false, trace::Collective::all_reduce, t, -1, [&] { all_reduce_now(t); });
  }

  void send(Tensor t, int peer) override {
    traced(false, trace::Collective::send, t, peer, [&] {
      // Pieces of one pair and tag arrive in the order sent.
      in_pieces(t.bytes(), [&](std::int64_t at, int count) {
        PendingSend& sent = pending_sends_.emplace_back();
        sent.from = bytes_at(t, at);
        sent.bytes = count;
        MPI_Isend(sent.from, count, MPI_BYTE, peer, kTag, comm_, &sent.request);
      });
    });
  }

  void recv(Tensor t, int peer) override {
    traced(false, trace::Collective::recv, t, peer, [&] {
      std::vector<MPI_Request> requests;
      in_pieces(t.bytes(), [&](std::int64_t at, int count) {
        MPI_Irecv(bytes_at(t, at), count, MPI_BYTE, peer, kTag, comm_, &requests.emplace_back());
      });
      for (MPI_Request& request : requests)
        complete(request);
    });
  }

  void wait_sends() override {
    // A large send completes once the other stage posts its receive: time
    // this stage stands still, waiting for the other one.
    const std::int64_t start = impl_.tracer ? OpTracer::now_ns() : 0;
    for (PendingSend& sent : pending_sends_)
      complete(sent.request);
    pending_sends_.clear();
    record_wait(start);
  }

  void wait_sends_from(Tensor t) override {
    const char* begin = static_cast<const char*>(t.data);
    const char* end = begin + t.bytes();
    auto reads_t = [&](const PendingSend& sent) {
      return sent.from < end && begin < sent.from + sent.bytes;
    };
    if (std::none_of(pending_sends_.begin(), pending_sends_.end(), reads_t)) return;
    const std::int64_t start = impl_.tracer ? OpTracer::now_ns() : 0;
    for (PendingSend& sent : pending_sends_) {
      if (reads_t(sent)) complete(sent.request);
    }
    std::erase_if(pending_sends_, reads_t);
    record_wait(start);
  }

  void barrier() override { MPI_Barrier(comm_); }

  Ticket all_reduce_async(Tensor t) override {
    return impl_.submit([this, t] {
      traced(true, trace::Collective::all_reduce, t, -1, [&] { all_reduce_now(t); });
    });
  }

  void reduce_scatter(Tensor full, Tensor shard) override {
    traced(false, trace::Collective::reduce_scatter, full, -1,
           [&] { reduce_scatter_now(full, shard); });
  }
  void all_gather(Tensor shard, Tensor full) override {
    traced(false, trace::Collective::all_gather, full, -1, [&] { all_gather_now(shard, full); });
  }

  Ticket reduce_scatter_async(Tensor full, Tensor shard) override {
    return impl_.submit([this, full, shard] {
      traced(true, trace::Collective::reduce_scatter, full, -1,
             [&] { reduce_scatter_now(full, shard); });
    });
  }

  Ticket all_gather_async(Tensor shard, Tensor full) override {
    return impl_.submit([this, shard, full] {
      traced(true, trace::Collective::all_gather, full, -1, [&] { all_gather_now(shard, full); });
    });
  }

  Ticket reduce_async(Tensor t, int root) override {
    if (t.dtype != DType::f32)
      throw std::invalid_argument("the CPU engine reduces fp32 gradients, not " +
                                  std::string(to_string(t.dtype)));
    return impl_.submit([this, t, root] {
      traced(true, trace::Collective::reduce, t, -1, [&] { reduce_now(t, root, t); });
    });
  }

  void wait(Ticket ticket) override {
    const std::int64_t start = impl_.tracer ? OpTracer::now_ns() : 0;
    impl_.wait(ticket);
    record_wait(start);
  }

 private:
  // "wait <group>" on the compute lane from `start` to now. Only a real wait
  // is worth a row: the compute thread stood still.
  void record_wait(std::int64_t start) {
    OpTracer* tracer = impl_.tracer;
    if (!tracer) return;
    const std::int64_t end = OpTracer::now_ns();
    if (end - start > 1000) {
      tracer->record(tracer->compute_lane(), trace::EventKind::sync,
                     trace::Category::synchronization, start, end, "wait " + name_);
    }
  }

  // The shard is this rank's slice of full: the collective runs in place.
  // Any other overlap MPI forbids (Communicator's contract).
  bool is_own_slice(const Tensor& shard, const Tensor& full) const {
    const char* s = static_cast<const char*>(shard.data);
    const char* f = static_cast<const char*>(full.data);
    if (s == f + rank_ * shard.bytes()) return true;
    if (s < f + full.bytes() && f < s + shard.bytes())
      throw std::logic_error("a shard inside the full tensor but not at this rank's slice");
    return false;
  }

  static constexpr int kTag = 7;
  static constexpr int kSpinPolls = 64;
  static constexpr std::chrono::microseconds kPoliteSleep{20};

  // Waits for a point-to-point request: MPI_Wait, or with polite waits
  // (MpiWorld::set_polite_waits) polls that sleep after a short spin. Only
  // point-to-point: the pipeline's receives wait for whole stages, while a
  // collective's rounds progress only as it is polled (measured: polite
  // collectives slowed 4 ranks on 2 cores by 10-20 %, polite receives sped
  // pipelines up 5-10 %).
  void complete(MPI_Request& request) {
    if (!impl_.polite) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      return;
    }
    int done = 0;
    for (int polls = 0;; ++polls) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (polls >= kSpinPolls) std::this_thread::sleep_for(kPoliteSleep);
    }
  }

  void all_reduce_now(Tensor t) {
    if (t.dtype != DType::f32 && t.dtype != DType::bf16)
      throw std::invalid_argument("the CPU engine all-reduces fp32 or bf16, not " +
                                  std::string(to_string(t.dtype)));
    const bool f32 = t.dtype == DType::f32;
    in_pieces(t.numel, [&](std::int64_t at, int count) {
      MPI_Allreduce(MPI_IN_PLACE, bytes_at(t, at * dtype_bytes(t.dtype)), count,
                    f32 ? MPI_FLOAT : MPI_UINT16_T, f32 ? MPI_SUM : bf16_sum_op(), comm_);
    });
  }

  // fp32 or bf16 `from` summed over the group into root's `to` (from
  // itself: in place).
  void reduce_now(Tensor from, int root, Tensor to) {
    const bool f32 = from.dtype == DType::f32;
    const int element = dtype_bytes(from.dtype);
    const MPI_Datatype type = f32 ? MPI_FLOAT : MPI_UINT16_T;
    const MPI_Op sum = f32 ? MPI_SUM : bf16_sum_op();
    in_pieces(from.numel, [&](std::int64_t at, int count) {
      char* send = bytes_at(from, at * element);
      if (rank_ != root) {
        MPI_Reduce(send, nullptr, count, type, sum, root, comm_);
      } else if (to.data == from.data) {
        MPI_Reduce(MPI_IN_PLACE, send, count, type, sum, root, comm_);
      } else {
        MPI_Reduce(send, bytes_at(to, at * element), count, type, sum, root, comm_);
      }
    });
  }

  void reduce_scatter_now(Tensor full, Tensor shard) {
    if (full.dtype != DType::f32 && full.dtype != DType::bf16)
      throw std::invalid_argument("the CPU engine reduce-scatters fp32 or bf16, not " +
                                  std::string(to_string(full.dtype)));
    const bool in_place = is_own_slice(shard, full);
    if (shard.numel > max_mpi_count()) {
      // More than MPI counts: each rank's block reduced to it, in pieces.
      for (int root = 0; root < size_; ++root) {
        const Tensor block = full.slice(root * shard.numel, shard.numel);
        reduce_now(block, root, root == rank_ && !in_place ? shard : block);
      }
      return;
    }
    const int count = static_cast<int>(shard.numel);
    const bool f32 = full.dtype == DType::f32;
    const MPI_Datatype type = f32 ? MPI_FLOAT : MPI_UINT16_T;
    const MPI_Op sum = f32 ? MPI_SUM : bf16_sum_op();
    if (in_place) {
      // MPI leaves the in-place result at the front of the buffer.
      MPI_Reduce_scatter_block(MPI_IN_PLACE, full.data, count, type, sum, comm_);
      if (rank_ != 0) std::memcpy(shard.data, full.data, static_cast<std::size_t>(shard.bytes()));
    } else {
      MPI_Reduce_scatter_block(full.data, shard.data, count, type, sum, comm_);
    }
  }

  void all_gather_now(Tensor shard, Tensor full) {
    if (shard.bytes() > max_mpi_count()) {
      // More than MPI counts: each rank's block broadcast from it, in pieces.
      const std::int64_t block = shard.bytes();
      if (!is_own_slice(shard, full))
        std::memcpy(bytes_at(full, rank_ * block), shard.data, static_cast<std::size_t>(block));
      for (int root = 0; root < size_; ++root) {
        in_pieces(block, [&](std::int64_t at, int count) {
          MPI_Bcast(bytes_at(full, root * block + at), count, MPI_BYTE, root, comm_);
        });
      }
      return;
    }
    const int bytes = static_cast<int>(shard.bytes());
    // MPI forbids the send buffer inside the receive buffer: say it is in place.
    if (is_own_slice(shard, full)) {
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full.data, bytes, MPI_BYTE, comm_);
    } else {
      MPI_Allgather(shard.data, bytes, MPI_BYTE, full.data, bytes, MPI_BYTE, comm_);
    }
  }

  template <class F>
  void traced(bool on_comm_thread, trace::Collective what, Tensor t, int peer, F&& op) {
    OpTracer* tracer = impl_.tracer;
    if (!tracer) {
      op();
      return;
    }
    const std::int64_t start = OpTracer::now_ns();
    op();
    const std::int64_t end = OpTracer::now_ns();
    const bool p2p = what == trace::Collective::send || what == trace::Collective::recv;
    // The store's rank is the world's plus the run's offset (--trace-rank-offset).
    const int recorded_peer =
        peer < 0 ? -1 : tracer->rank() - world_ranks_[rank_] + world_ranks_[peer];
    std::string label = name_ + " " + collective_label(what);
    tracer->record(on_comm_thread ? tracer->communication_lane() : tracer->compute_lane(),
                   p2p ? trace::EventKind::p2p : trace::EventKind::collective,
                   trace::Category::communication, start, end, label, 0, t.bytes(), what,
                   trace_type(t.dtype), t.numel, recorded_peer, size_);
  }

  MPI_Comm comm_;
  std::string name_;
  MpiWorld::Impl& impl_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;  // of each rank of this group
  struct PendingSend {
    MPI_Request request;
    const char* from;
    int bytes;
  };
  std::vector<PendingSend> pending_sends_;
};

}  // namespace

Result<std::unique_ptr<MpiWorld>> MpiWorld::create(int* argc, char*** argv, int dp, int tp,
                                                    int pp) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      MPI_Finalize();
      return Error{"MPI does not provide MPI_THREAD_MULTIPLE, which the communication thread needs"};
    }
  }
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size != dp * tp * pp) {
    const std::string message = "the plan needs dp x tp x pp = " + std::to_string(dp) + " x " +
                                std::to_string(tp) + " x " + std::to_string(pp) + " = " +
                                std::to_string(dp * tp * pp) + " ranks, but " +
                                std::to_string(world_size) + " were started";
    MPI_Finalize();
    return Error{message};
  }
  std::unique_ptr<MpiWorld> world(new MpiWorld);
  world->layout_ = WorldLayout::of(world_rank, dp, tp, pp);
  world->impl_ = std::make_unique<Impl>();
  const WorldLayout& l = world->layout_;
  // Colours group the ranks that share the other two coordinates.
  auto split = [&](int colour, const char* name) -> std::unique_ptr<Communicator> {
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, colour, world_rank, &comm);
    return std::make_unique<MpiComm>(comm, name, *world->impl_);
  };
  world->dp_ = split(l.order().data_parallel_group(l.coordinates()), "dp");
  world->tp_ = split(l.order().tensor_parallel_group(l.coordinates()), "tp");
  world->pp_ = split(l.order().pipeline_group(l.coordinates()), "pp");
  world->world_ = std::make_unique<MpiComm>(MPI_COMM_WORLD, "world", *world->impl_);
  return world;
}

MpiWorld::~MpiWorld() {
  impl_.reset();  // the communication thread ends before MPI does
  dp_.reset();
  tp_.reset();
  pp_.reset();
  world_.reset();
  MPI_Finalize();
}

void MpiWorld::set_tracer(OpTracer* tracer) { impl_->tracer = tracer; }

void MpiWorld::set_polite_waits(bool on) { impl_->polite = on; }

void MpiWorld::abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); std::abort(); }

Result<std::vector<char>> mpi_broadcast_from_rank0(const std::vector<char>& bytes, int* argc,
                                                   char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int size = static_cast<int>(bytes.size());
  MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<char> out = rank == 0 ? bytes : std::vector<char>(static_cast<std::size_t>(size));
  MPI_Bcast(out.data(), size, MPI_BYTE, 0, MPI_COMM_WORLD);
  return out;
}

void mpi_finalize_if_initialized() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

void keep_freed_memory_in_process() {
  mallopt(M_MMAP_MAX, 0);  // glibc still maps when the heap cannot grow
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  // One heap for every thread: a thread's own arena holds 64 MiB at most,
  // and larger blocks (the communication thread's collectives) would be
  // mapped and unmapped each call again.
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace cs::worker
