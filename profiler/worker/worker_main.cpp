// clusterscope-worker: one rank of a training run. Started by the launcher
// (mpirun, torchrun-style environments, Slurm), it trains the plan's model on
// the CPU engine (OpenBLAS + MPI) or the CUDA engine (cuBLAS + NCCL), records
// its timeline into its own trace store and prints a JSON line per step.

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <mutex>
#include <new>
#include <thread>

#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/calibration_meta.h"
#include "core/host_name.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/machine_probe.h"
#include "core/model_json.h"
#include "core/presets.h"
#include "core/run_clock.h"
#include "core/trace_writer.h"
#include "profiler/launch_env.h"
#include "profiler/worker/corpus.h"
#include "profiler/worker/op_tracer.h"
#include "profiler/worker/sweeps.h"
#include "profiler/worker/trainer.h"
#include "profiler/worker/weights_file.h"
#include "profiler/worker_shape.h"

#ifdef CLUSTERSCOPE_CPU_ENGINE
#include "profiler/worker/cpu_backend.h"
#include "profiler/worker/mpi_comm.h"
#endif
#ifdef CLUSTERSCOPE_CUDA_ENGINE
#include <dlfcn.h>

#include "profiler/cuda/cuda_backend.h"
#include "profiler/cuda/nccl_comm.h"
#include "profiler/cupti/cupti_source.h"
#include "profiler/cupti/tracer.h"
#endif

namespace {

using nlohmann::json;
using namespace cs;
using namespace cs::worker;

struct Options {
  std::string plan_file;
  std::string model;
  std::string backend = "cpu";
  int layers = 0, hidden = 0, heads = 0, seq = 0, ffn = 0;
  int dp = 1, tp = 1, pp = 1, zero = 0, micro_batch = 1, accumulation = 0, global_batch = 0;
  int virtual_stages = 1;
  std::string precision = "fp32";
  std::string recompute = "none";
  int steps = 10;
  float lr = 1e-3f;
  std::uint64_t seed = 1234;
  double bucket_kib = 1024;
  bool no_overlap = false;
  bool sequence_parallel = false;
  std::string out;
  bool no_trace = false;
  std::string dump_weights;
  int threads = 0;
  bool polite_waits = false;  // CPU: point-to-point waits sleep between polls (MpiWorld)
  std::string title;
  std::string run_id;  // the launcher's, else the Slurm job step's
  bool single_process = false;
  int gpus = 0;
  std::string sweep;  // gemm, bandwidth, ops, all_reduce (or a comma list): measure instead of training
  std::vector<std::int64_t> sizes;   // GEMM n, or message / buffer bytes (one sweep)
  std::vector<std::int64_t> gemm_sizes, buffer_sizes, message_sizes;  // per sweep of a list
  std::vector<std::string> sweep_precisions;  // CPU: GEMM sweeps in each (default --precision)
  double sweep_seconds = 0.2;        // per GEMM size (and per point of the operation sweep / 4)
  int trace_rank_offset = 0;         // added to the rank recorded in the store
};

// One JSON line, whole, on stdout (the launcher reads them).
std::mutex g_emit_mutex;
void emit(const json& line) {
  const std::string text = json_text(line) + "\n";
  std::lock_guard lock(g_emit_mutex);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// One line on stderr in a single write, so that mpirun does not interleave it
// with another rank's.
void report_error(const std::string& text) {
  const std::string line = "clusterscope-worker: " + text + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

std::string store_path(const std::string& pattern, int rank) {
  std::string path = pattern;
  const auto at = path.find("{rank}");
  if (at != std::string::npos) return path.replace(at, 6, std::to_string(rank));
  if (path.size() > 3 && path.ends_with(".db")) path.resize(path.size() - 3);
  return path + ".rank" + std::to_string(rank) + ".db";
}

// Signals reach one thread. SIGTERM, SIGINT, SIGHUP: close the stores and
// end the process. SIGUSR1 (what the launcher sends, through mpirun, to
// cancel): close the stores and stop training, then wait to be ended; mpirun
// kills ranks one second after it forwards a SIGTERM, which can be too soon to
// close a large store. Either way a cancelled or aborted run keeps everything
// recorded up to that moment.
std::mutex g_writers_mutex;
std::vector<trace::TraceWriter*> g_writers;  // guarded by g_writers_mutex; open stores
std::atomic<bool> g_stop{false};
std::atomic<int> g_rank{0};
bool g_store_opened = false;  // guarded by g_writers_mutex: a store was ever opened
std::string g_close_error;    // guarded by g_writers_mutex: why a close failed (a full disk)

void register_writer(trace::TraceWriter* w, bool add) {
  std::lock_guard lock(g_writers_mutex);
  if (add) {
    g_writers.push_back(w);
    g_store_opened = true;
  } else {
    std::erase(g_writers, w);
  }
}

// An error as the user reads it: memory that ran out said in words, not as
// "std::bad_alloc".
std::string described(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) {
    return "out of memory: this rank's weights, activations or buffers need more memory than "
           "the host gives it (a sequence, micro-batch, accumulation or sweep size too large?)";
  }
  return e.what();
}

// Commits what is buffered, then records how the run ended; a store is closed
// once. `failed`: why a store could not be closed (a full disk), now or at
// an earlier close, else ""; `store`: what the rank had ("open": closed now,
// "closed" before, "none": it never opened one, as when a signal came before
// it made its store).
struct Closed {
  std::string failed;
  std::string_view store;
};
Closed close_all_writers(std::string_view status) {
  std::lock_guard lock(g_writers_mutex);
  Closed out;
  out.store = !g_writers.empty() ? "open" : g_store_opened ? "closed" : "none";
  for (trace::TraceWriter* w : g_writers) {
    (void)w->flush();  // the rows first: a kill during close keeps them
    if (Status closed = w->close(status); !closed && out.failed.empty())
      out.failed = closed.message();
  }
  g_writers.clear();
  if (g_close_error.empty()) g_close_error = out.failed;
  if (out.failed.empty()) out.failed = g_close_error;
  return out;
}

int g_signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t written = write(g_signal_pipe[1], &byte, 1);
}

// A handler on every thread hands the signal to the signal thread through a
// pipe: blocking signals would not do, as threads that libraries start before
// main (OpenBLAS starts its pool when it is loaded) do not block them, and the
// default action would end the rank with its store open.
void install_signal_handling() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaction(sig, &action, nullptr);
  // A rank of mpirun's (Open MPI forks its ranks from its main thread) gets
  // SIGTERM when mpirun dies, killed with its launcher or on its own, and
  // closes its store; it trained on with its store open until its next
  // progress line met the closed pipe (SIGPIPE, which is ignored here so that
  // such a write cannot end it before its store is closed). A rank whose
  // mpirun died before this line cannot start MPI and ends there.
  if (std::getenv("OMPI_COMM_WORLD_RANK")) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    std::signal(SIGPIPE, SIG_IGN);
  }
  std::thread([] {
    for (;;) {
      unsigned char byte = 0;
      const ssize_t n = read(g_signal_pipe[0], &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n != 1) return;
      const int sig = byte;
      const bool first = !g_stop.exchange(true);
      const Closed closed = close_all_writers("cancelled");
      if (first) {
        json line = {{"event", "cancelled"},
                     {"rank", g_rank.load()},
                     {"signal", sig},
                     {"store", closed.store}};
        if (!closed.failed.empty()) line["close_error"] = closed.failed;
        emit(line);
      }
      if (sig != SIGUSR1) {
        // mpirun kills every rank once one has ended: a rank that closed its
        // store first ended the others' closes (their launcher killed, mpirun
        // sent SIGTERM to all at once). It lingers a moment; mpirun's own
        // SIGKILL comes a second after its SIGTERM at the latest.
        if (closed.store == "open" && std::getenv("OMPI_COMM_WORLD_RANK"))
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::_Exit(128 + sig);
      }
    }
  }).detach();
}

// CPU time of every thread of this process (compute, communication, BLAS,
// the trace writer's): what a step costs whatever else the machine runs.
double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// After SIGUSR1: the store is closed; the rank idles until it is ended.
[[noreturn]] void wait_to_be_ended() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// A line about what the store holds, unless a stop has come: the store is
// then closed as cancelled and the rank, having said so, says nothing more
// (no sample, no "done") and idles until it is ended.
void emit_unless_stopped(const json& line) {
  {
    std::lock_guard lock(g_writers_mutex);
    if (!g_stop) {
      emit(line);
      return;
    }
  }
  wait_to_be_ended();
}

// The shape to train: a plan's workload scaled to this machine, or flags.
struct Job {
  WorkerShape shape;
  std::string plan_json;
};

Job resolve_job(const Options& o) {
  Job job;
  if (!o.plan_file.empty() || !o.model.empty()) {
    auto catalog = PresetCatalog::load_default();
    if (!catalog) throw std::runtime_error(catalog.message());
    Workload workload;
    if (!o.plan_file.empty()) {
      auto j = read_json_file(o.plan_file);
      if (!j) throw std::runtime_error(j.message());
      auto plan = plan_from_json(*j, o.plan_file, &*catalog);
      if (!plan) throw std::runtime_error(plan.message());
      workload = plan->workload;
      job.plan_json = json_text(to_json(*plan));
    } else {
      const Workload* w = catalog->find_model(o.model);
      if (!w) {
        throw std::runtime_error(
            catalog->unknown_name_message("model preset", o.model, catalog->model_names()));
      }
      workload = *w;
    }
    auto scaled = worker_shape_for(workload, o.tp, o.pp, o.virtual_stages);
    if (!scaled) throw std::runtime_error(scaled.message());
    job.shape = *scaled;
  }
  GptConfig& c = job.shape.config;
  if (o.layers) c.layers = o.layers;
  if (o.hidden) c.hidden = o.hidden;
  if (o.heads) c.heads = o.heads;
  if (o.seq) c.seq = o.seq;
  c.ffn = o.ffn ? o.ffn : (o.hidden ? 4 * c.hidden : c.ffn);
  return job;
}

TrainConfig train_config(const Options& o, const GptConfig& c, const WorldLayout& layout, DType storage) {
  TrainConfig tc;
  tc.model = c;
  tc.dp = o.dp;
  tc.tp = o.tp;
  tc.pp = o.pp;
  tc.dp_rank = layout.dp_rank;
  tc.tp_rank = layout.tp_rank;
  tc.pp_rank = layout.pp_rank;
  tc.virtual_stages = o.virtual_stages;
  tc.zero_stage = o.zero;
  tc.recompute = recompute_from_string(o.recompute).value();  // the option's check took it
  tc.micro_batch = o.micro_batch;
  tc.accumulation = o.accumulation;
  tc.compute = storage;
  tc.lr = o.lr;
  tc.seed = o.seed;
  tc.bucket_bytes = static_cast<std::int64_t>(o.bucket_kib * 1024);
  tc.overlap_dp = !o.no_overlap;
  tc.sequence_parallel = o.sequence_parallel;
  tc.dynamic_loss_scale = o.precision == "fp16";
  return tc;
}

// The store of one rank, and the tracer that fills it.
struct RankTrace {
  std::unique_ptr<trace::TraceWriter> writer;
  std::unique_ptr<OpTracer> tracer;
  std::string path;

  RankTrace() = default;
  RankTrace(RankTrace&&) = default;
  ~RankTrace() {
    if (writer) register_writer(writer.get(), false);
  }
};

// The run every rank of this one shares, which a merge checks: the
// launcher's --run-id, else what the launcher that started the ranks set for
// each (clusterscope profile, the user's own mpirun, a Slurm job step).
std::string run_id(const Options& o) {
  if (!o.run_id.empty()) return o.run_id;
  return profiler::shared_run_id(profiler::current_environment());
}

RankTrace open_trace(const Options& o, const Job& job, int rank, const std::string& device,
                     const char* source, const json& versions, int argc, char** argv,
                     bool write_rank_row = true) {
  RankTrace t;
  if (o.no_trace || o.out.empty()) return t;
  t.path = store_path(o.out, rank);
  trace::RunInfo info;
  info.title = o.title.empty() ? std::string(source) + " run" : o.title;
  info.source = source;
  info.start_utc_ns = trace::run_clock_ns();
  info.clock = trace::kRunClockName;
  info.host = this_host_name();
  for (int i = 0; i < argc; ++i) info.command_line += (i ? " " : "") + std::string(argv[i]);
  info.plan_json = job.plan_json;
  info.tool_versions_json = json_text(versions);
  auto created = trace::TraceWriter::create(t.path, info);
  if (!created) throw std::runtime_error(created.message());
  t.writer = std::move(created).value();
  if (const std::string id = run_id(o); !id.empty()) t.writer->set_meta(trace::kRunIdMeta, id);
  const int recorded_rank = rank + o.trace_rank_offset;
  if (write_rank_row) t.writer->add_rank({recorded_rank, info.host, device, getpid(), 0});
  const GptConfig& c = job.shape.config;
  t.writer->set_meta("worker_shape", json_text(json{{"layers", c.layers},
                                                    {"hidden", c.hidden},
                                                    {"heads", c.heads},
                                                    {"seq", c.seq},
                                                    {"ffn", c.ffn},
                                                    {"vocab", c.vocab},
                                                    {"scaled", job.shape.scaled}}));
  t.writer->set_meta("parallel", json_text(json{{"dp", o.dp},
                                                {"tp", o.tp},
                                                {"pp", o.pp},
                                                {"virtual_stages", o.virtual_stages},
                                                {"zero_stage", o.zero},
                                                {"recompute", o.recompute},
                                                {"micro_batch", o.micro_batch},
                                                {"accumulation", o.accumulation},
                                                {"precision", o.precision},
                                                {"backend", o.backend},
                                                {"threads", o.threads},
                                                {"polite_waits", o.polite_waits},
                                                {"bucket_kib", o.bucket_kib},
                                                {"overlap", !o.no_overlap},
                                                {"sequence_parallel", o.sequence_parallel}}));
  t.tracer = std::make_unique<OpTracer>(*t.writer, recorded_rank);
  register_writer(t.writer.get(), true);
  return t;
}

// Before the first step, untraced: the machine probe (core/machine_probe.h),
// kept in the store for the comparison with the prediction. Every rank of
// the run calls it at once.
void record_machine_probe(RankTrace& trace, Backend& backend, Communicator& world, DType storage,
                          std::string_view precision) {
  if (!trace.writer) return;
  const MachineProbeShape shape = machine_probe_shape(backend.name(), precision, world.size());
  const MachineProbe probe = probe_machine(backend, world, storage, shape, 0.02);
  trace.writer->set_meta(kMachineProbeMetaKey, machine_probe_json(probe));
}

void close_trace(RankTrace& t) {
  if (!t.writer) return;
  register_writer(t.writer.get(), false);
  if (Status s = t.writer->close("complete"); !s) {
    {
      std::lock_guard lock(g_writers_mutex);
      if (g_close_error.empty()) g_close_error = s.message();
    }
    throw std::runtime_error(s.message());
  }
}

// The steps, with a progress line each; extra() adds engine figures. A
// store that can no longer be written (a full disk) ends the run: training
// on untraced would report steps the store does not hold.
void train_steps(Trainer& trainer, const Options& o, int rank, Backend& backend,
                 const RankTrace& trace, const std::function<void(json&)>& extra,
                 const std::function<void(int, bool)>& around_step = {}) {
  for (int s = 0; s < o.steps; ++s) {
    if (g_stop) wait_to_be_ended();
    if (trace.writer) {
      if (Status written = trace.writer->error(); !written) {
        // Counted from 1, as the progress lines count steps.
        const std::int64_t kept = trace.writer->committed_steps();
        throw std::runtime_error(
            "the run stops before step " + std::to_string(s + 1) +
            ": its trace store could not be written (" + written.message() + "); " +
            (kept == 0 ? "nothing was committed to " + trace.path +
                             " before the failure: it holds no step"
                       : "the " + std::to_string(kept) + (kept == 1 ? " step" : " steps") +
                             " committed before the failure stay in " + trace.path));
      }
    }
    const double cpu_before = process_cpu_seconds();
    if (around_step) around_step(s, true);
    const StepResult r = trainer.step();
    if (around_step) around_step(s, false);
    const double cpu_seconds = process_cpu_seconds() - cpu_before;
    json line = {{"event", "step"},
                 {"rank", rank},
                 {"step", r.step},
                 {"steps", o.steps},
                 {"loss", r.loss},
                 {"grad_norm", r.grad_norm},
                 {"step_seconds", r.seconds},
                 {"cpu_seconds", cpu_seconds},
                 {"tokens_per_second", r.tokens / r.seconds},
                 {"memory_bytes", backend.bytes_in_use()}};
    if (r.loss_scale > 0) line["loss_scale"] = r.loss_scale;
    if (r.skipped) line["skipped"] = true;
    if (extra) extra(line);
    // A step line only for a step the store holds (once a signal has come,
    // the store may be closed): the launcher relies on it.
    emit_unless_stopped(line);
  }
}

void dump_weights(Trainer& trainer, Communicator& world, const GptConfig& c, int rank,
                  const std::string& path) {
  std::vector<float> full = trainer.gather_full_weights(world);
  if (rank != 0) return;
  NamedWeights named;
  for (const ParamInfo& p : gpt_parameter_layout(c, ModelParallel{})) {
    named[p.name].assign(full.begin() + p.offset, full.begin() + p.offset + p.numel());
  }
  if (Status s = write_weights(path, named); !s) throw std::runtime_error(s.message());
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

DType cpu_storage(const std::string& precision) {
  if (precision == "fp32" || precision == "tf32") return DType::f32;
  if (precision == "bf16") return DType::bf16;
  throw std::runtime_error("the CPU engine computes in fp32 or bf16, not " + precision);
}

// Measures instead of training; one JSON line per sample. Each sweep of the
// list runs in turn; all ranks run every sweep together (so that each
// measures its share of a machine every rank is using). All-reduces run on
// every group size the layout has: the tensor-parallel groups, then the world.
void run_sweep(const Options& o, Backend& backend, const std::vector<Communicator*>& groups,
               DType storage, int rank, OpTracer* tracer) {
  const std::vector<std::string> sweeps = split_list(o.sweep);
  auto sizes_for = [&](const std::vector<std::int64_t>& own) {
    return !own.empty() ? own : (sweeps.size() == 1 ? o.sizes : std::vector<std::int64_t>{});
  };
  // Each sweep's sizes, and what it runs in, settled before any runs: the
  // start line counts the samples to come (a calibration's progress).
  auto gemm_sizes = [&](bool layer) {
    std::vector<std::int64_t> sizes = sizes_for(o.gemm_sizes);
    if (sizes.empty()) {
      sizes = layer ? std::vector<std::int64_t>{256, 512, 1024, 2048, 4096}
                    : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096, 8192};
    }
    return sizes;
  };
  const std::vector<std::string> gemm_precisions =
      backend.name() == "cpu" && !o.sweep_precisions.empty()
          ? o.sweep_precisions
          : std::vector<std::string>{o.precision};
  std::vector<std::int64_t> buffer_sizes = sizes_for(o.buffer_sizes);
  if (buffer_sizes.empty()) buffer_sizes = {1 << 20, 16 << 20, 256 << 20};
  std::vector<std::int64_t> message_sizes = sizes_for(o.message_sizes);
  if (message_sizes.empty()) {
    for (std::int64_t b = 1024; b <= (64 << 20); b *= 4)
      message_sizes.push_back(b);
  }
  // On the CPU the all-reduces run again as training meets its gradients:
  // out of the caches.
  const bool cold_all_reduces = backend.name() == "cpu" && groups.back()->size() > 1;
  std::int64_t points = 0;
  for (const std::string& sweep : sweeps) {
    const auto count = [](const auto& list) { return static_cast<std::int64_t>(list.size()); };
    if (sweep == "gemm" || sweep == "layer_gemm") {
      // A layer's two GEMM shapes in three layouts each, a square one.
      points += count(gemm_precisions) * count(gemm_sizes(sweep == "layer_gemm")) *
                (sweep == "layer_gemm" ? 6 : 1);
    } else if (sweep == "bandwidth") {
      points += count(buffer_sizes);
    } else if (sweep == "ops") {
      points += op_sweep_points(backend, storage);
    } else if (sweep == "all_reduce") {
      points += count(groups) * count(message_sizes) * (cold_all_reduces ? 2 : 1);
    }
  }
  // Where the sweeps ran: `clusterscope calibrate --from-sweeps` names the
  // presets for this host and takes the datasheet of this device.
  emit({{"event", "sweep_start"},
        {"rank", rank},
        {"host", this_host_name()},
        {"pid", static_cast<std::int64_t>(getpid())},
        {"backend", std::string(backend.name())},
        {"device", backend.device_name()},
        {"precision", o.precision},
        {"sweeps", o.sweep},
        {"points", points}});
  for (const std::string& sweep : sweeps) {
    if (sweep == "gemm" || sweep == "layer_gemm") {
      // Squares (the GPU check's peak rates) or a layer's GEMMs (calibration).
      const bool layer = sweep == "layer_gemm";
      const std::vector<std::int64_t> sizes = gemm_sizes(layer);
      const std::vector<int> n(sizes.begin(), sizes.end());
      for (const std::string& precision : gemm_precisions) {
        const DType type = backend.name() == "cpu" ? cpu_storage(precision) : storage;
        auto on_sample = [&](const GemmSample& s) {
          json line = {{"event", "gemm"},
                       {"rank", rank},
                       {"precision", precision},
                       {"m", s.m},
                       {"n", s.n},
                       {"k", s.k},
                       {"layout", s.layout},
                       {"seconds", s.seconds},
                       {"tflops", s.flops_per_second / 1e12}};
          // What the GEMMs really ran in, where the backend tells: an fp8
          // sample that cuBLASLt turned down ran in BF16 ("ran_as": "bf16"),
          // and calibration files it so.
          if (!s.ran_as.empty()) line["ran_as"] = s.ran_as;
          emit_unless_stopped(line);
        };
        if (layer) {
          layer_gemm_sweep(backend, type, n, o.sweep_seconds, on_sample);
        } else {
          gemm_sweep(backend, type, n, o.sweep_seconds, on_sample);
        }
      }
    } else if (sweep == "bandwidth") {
      bandwidth_sweep(backend, buffer_sizes, 20, [&](const BandwidthSample& s) {
        emit_unless_stopped({{"event", "bandwidth"},
                             {"rank", rank},
                             {"bytes", s.bytes},
                             {"seconds", s.seconds},
                             {"gb_per_s", s.bytes_per_second / 1e9}});
      });
    } else if (sweep == "ops") {
      op_sweep(backend, storage, o.sweep_seconds / 4, [&](const OpSample& s) {
        emit_unless_stopped({{"event", "op"},
                             {"rank", rank},
                             {"operation", s.operation},
                             {"elements", s.elements},
                             {"flops", s.flops},
                             {"repetitions", s.repetitions},
                             {"seconds", s.seconds}});
      });
    } else if (sweep == "all_reduce") {
      auto emit_sample = [&](const Communicator& group, const CollectiveSample& s, bool cold) {
        emit_unless_stopped({{"event", "collective"},
                             {"rank", rank},
                             {"operation", s.operation},
                             {"group", std::string(group.name())},
                             {"bytes", s.bytes},
                             {"ranks", s.ranks},
                             {"seconds", s.seconds},
                             {"algbw_gb_per_s", s.algorithm_bandwidth / 1e9},
                             {"busbw_gb_per_s", s.bus_bandwidth / 1e9},
                             {"cold", cold}});
      };
      for (Communicator* group : groups) {
        all_reduce_sweep(backend, *group, message_sizes, 20,
                         [&](const CollectiveSample& s) { emit_sample(*group, s, false); });
      }
      if (cold_all_reduces) {
        const std::int64_t start = OpTracer::now_ns();
        for (Communicator* group : groups) {
          cold_all_reduce_sweep(backend, *group, message_sizes, 20,
                                [&](const CollectiveSample& s) { emit_sample(*group, s, true); });
        }
        if (tracer) {
          tracer->record(tracer->phase_lane(), trace::EventKind::annotation,
                         trace::Category::other, start, OpTracer::now_ns(),
                         kColdCollectivesAnnotation);
        }
      }
    } else {
      throw std::runtime_error("--sweep: unknown sweep \"" + sweep +
                               "\" (gemm, layer_gemm, bandwidth, ops, all_reduce)");
    }
  }
}

// The communicators an all-reduce sweep measures: the tensor-parallel groups
// when they are smaller than the world, then the world.
template <class World>
std::vector<Communicator*> sweep_groups(World& w) {
  std::vector<Communicator*> groups;
  if (w.tp().size() > 1 && w.tp().size() < w.world().size()) groups.push_back(&w.tp());
  groups.push_back(&w.world());
  return groups;
}

json start_line(int rank, const WorldLayout& layout, const char* engine, const std::string& device,
                const Trainer& trainer, const Job& job, const Options& o, const std::string& store) {
  const GptConfig& c = job.shape.config;
  return {{"event", "start"},
          {"rank", rank},
          {"host", this_host_name()},
          {"pid", static_cast<std::int64_t>(getpid())},
          {"world_size", layout.world_size},
          {"dp_rank", layout.dp_rank},
          {"tp_rank", layout.tp_rank},
          {"pp_rank", layout.pp_rank},
          {"backend", engine},
          {"device", device},
          {"precision", o.precision},
          {"parameters", trainer.num_params()},
          {"model",
           {{"layers", c.layers},
            {"hidden", c.hidden},
            {"heads", c.heads},
            {"seq", c.seq},
            {"ffn", c.ffn},
            {"vocab", c.vocab}}},
          {"scaled", job.shape.scaled},
          {"steps", o.steps},
          {"store", store}};
}

#ifdef CLUSTERSCOPE_CPU_ENGINE
int run_cpu(Options o, const Job& job, int argc, char** argv) {
  if (o.precision != "fp32" && o.precision != "bf16") {
    throw std::runtime_error("the CPU engine computes in fp32 or bf16, not " + o.precision);
  }
  const DType storage = o.precision == "bf16" ? DType::bf16 : DType::f32;
  keep_freed_memory_in_process();
  install_signal_handling();  // before MPI starts its threads
  auto world = MpiWorld::create(&argc, &argv, o.dp, o.tp, o.pp);
  if (!world) throw std::runtime_error(world.message());
  MpiWorld& w = **world;
  const WorldLayout& layout = w.layout();
  g_rank = layout.world_rank;
  try {
    int threads = o.threads;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int local_ranks = local ? std::max(1, std::atoi(local)) : layout.world_size;
    if (threads <= 0) threads = static_cast<int>(std::max(1L, cores / local_ranks));
    o.threads = threads;  // recorded in the store
    // More compute threads than cores: a rank polling MPI would take the
    // core the rank it waits for needs.
    o.polite_waits = static_cast<long>(local_ranks) * threads > cores;
    if (const char* forced = std::getenv("CLUSTERSCOPE_POLITE_WAITS")) {
      o.polite_waits = forced[0] == '1';
    }
    w.set_polite_waits(o.polite_waits);
    auto backend = make_cpu_backend(threads);
    RankTrace trace =
        open_trace(o, job, layout.world_rank, backend->device_name(), cs::trace::kCpuEngineSource,
                   {{"clusterscope", CLUSTERSCOPE_VERSION}}, argc, argv);
    if (o.sweep.empty()) record_machine_probe(trace, *backend, w.world(), storage, o.precision);
    // On one thread an op's own CPU time is the thread's: the rest of its
    // time it was descheduled (ranks sharing cores).
    if (trace.tracer) {
      trace.tracer->set_times_off_cpu(threads == 1);
      trace.tracer->record_timing_cost();
    }
    backend->set_tracer(trace.tracer.get());
    w.set_tracer(trace.tracer.get());
    if (!o.sweep.empty()) {
      run_sweep(o, *backend, sweep_groups(w), storage, layout.world_rank, trace.tracer.get());
      w.set_tracer(nullptr);
      close_trace(trace);
      emit_unless_stopped({{"event", "done"}, {"rank", layout.world_rank}, {"store", trace.path}});
      return 0;
    }
    Trainer trainer(*backend, w.dp(), w.tp(), w.pp(), train_config(o, job.shape.config, layout, storage),
                    builtin_corpus(), trace.tracer.get());
    emit(start_line(layout.world_rank, layout, "cpu", backend->device_name(), trainer, job, o, trace.path));
    train_steps(trainer, o, layout.world_rank, *backend, trace, nullptr);
    // The weights' gather is no part of the last step: untraced.
    w.set_tracer(nullptr);
    if (!o.dump_weights.empty())
      dump_weights(trainer, w.world(), job.shape.config, layout.world_rank, o.dump_weights);
    close_trace(trace);
    emit_unless_stopped({{"event", "done"}, {"rank", layout.world_rank}, {"store", trace.path}});
    return 0;
  } catch (const std::exception& e) {
    // One rank failing alone would leave the others waiting in a collective:
    // end the whole job.
    report_error("rank " + std::to_string(layout.world_rank) + ": error: " + described(e));
    emit({{"event", "error"}, {"rank", layout.world_rank}, {"message", described(e)}});
    close_all_writers("failed");
    w.abort(1);
  }
}
#endif

#ifdef CLUSTERSCOPE_CUDA_ENGINE
json cuda_versions(const CudaDeviceInfo& info) {
  return {{"clusterscope", CLUSTERSCOPE_VERSION},
          {"cuda_runtime", info.runtime_version},
          {"cuda_driver", info.driver_version},
          {"nccl", NcclWorld::version()}};
}

// NVTX ranges reach CUPTI only through an NVTX injection: name the libcupti
// this process loaded, before the first NVTX call.
void route_nvtx_to_cupti() {
  if (std::getenv("NVTX_INJECTION64_PATH")) return;
  Dl_info info{};
  void* symbol = dlsym(RTLD_DEFAULT, "cuptiGetVersion");
  if (symbol && dladdr(symbol, &info) && info.dli_fname) setenv("NVTX_INJECTION64_PATH", info.dli_fname, 1);
}

// The rank's CUPTI tracer, unless the process is already traced by the
// injection library (clusterscope profile): CUPTI allows one subscriber.
// `pipeline_ranks`: the store's rank of each stage of this rank's pipeline
// group, which NCCL numbers its sends' and receives' peers in.
std::unique_ptr<profiler::Tracer> start_cupti(RankTrace& trace, int rank, const std::string& device,
                                              std::vector<std::int32_t> pipeline_ranks) {
  if (!trace.writer || std::getenv("CLUSTERSCOPE_PROFILE_DIR")) return nullptr;
  profiler::TracerOptions options;
  options.rank = {rank, this_host_name(), device, getpid(), 0};
  options.p2p_peer_ranks = std::move(pipeline_ranks);
  if (const char* capture = std::getenv("CLUSTERSCOPE_CUPTI_CAPTURE")) options.capture_path = capture;
  auto tracer = profiler::Tracer::start(profiler::make_cupti_source(), *trace.writer, options);
  if (!tracer) throw std::runtime_error("the CUPTI tracer did not start: " + tracer.message());
  return std::move(tracer).value();
}

// GEMMs as host-side ops with their FLOPs and operand bytes; the kernels
// they launch are the CUPTI launches inside each op's interval on the same
// thread (what learning from the run fits: planners/calibration.cpp).
void trace_gemms(Backend& backend, OpTracer* tracer) {
  if (!tracer) return;
  struct Open {
    std::int64_t start_ns;
    std::string name;
    double flops;
    std::int64_t bytes;
  };
  auto open = std::make_shared<std::vector<Open>>();
  GemmHooks hooks;
  hooks.before = [open](std::uint64_t, std::string_view name, double flops, std::int64_t bytes) {
    open->push_back({OpTracer::now_ns(), std::string(name), flops, bytes});
  };
  hooks.after = [open, tracer](std::uint64_t, trace::DataType computed_in) {
    const Open& op = open->back();
    tracer->record(tracer->compute_lane(), trace::EventKind::cpu_op, trace::Category::compute,
                   op.start_ns, OpTracer::now_ns(), "gemm " + op.name, op.flops, op.bytes,
                   trace::Collective::none, computed_in);
    open->pop_back();
  };
  set_gemm_hooks(backend, std::move(hooks));
}

int run_cuda_rank(Options o, const Job& job, int argc, char** argv);

// A failing rank closes its store as "failed" while everything is alive.
int run_cuda(Options o, const Job& job, int argc, char** argv) {
  try {
    return run_cuda_rank(o, job, argc, argv);
  } catch (...) {
    close_all_writers("failed");
    throw;
  }
}

int run_cuda_rank(Options o, const Job& job, int argc, char** argv) {
  route_nvtx_to_cupti();
  auto compute = cuda_compute_from_string(o.precision);
  if (!compute) throw std::runtime_error(compute.message());
  auto launch = profiler::parse_launch_env(profiler::current_environment());
  if (!launch) throw std::runtime_error(launch.message());
  auto count = cuda_device_count();
  if (!count) throw std::runtime_error(count.message());
  const int device = launch->local_rank;
  if (device >= *count) {
    throw std::runtime_error("local rank " + std::to_string(device) + " has no GPU of its own (" +
                             std::to_string(*count) + " on this node); start one rank per GPU");
  }
  auto info = cuda_device_info(device);
  if (!info) throw std::runtime_error(info.message());
  install_signal_handling();
  g_rank = launch->rank;

  auto backend_result = make_cuda_backend(device, *compute);
  if (!backend_result) throw std::runtime_error(backend_result.message());
  std::unique_ptr<Backend> backend = std::move(backend_result).value();

  NcclBootstrap boot;
  boot.world_rank = launch->rank;
  boot.world_size = launch->world_size;
  auto rendezvous = profiler::nccl_rendezvous_from(profiler::current_environment());
  if (!rendezvous) throw std::runtime_error(rendezvous.message());
  if (boot.world_size > 1 && !rendezvous->has_value()) {
#ifdef CLUSTERSCOPE_CPU_ENGINE
    if (launch->launcher == profiler::Launcher::open_mpi) {
      std::vector<char> id;
      if (launch->rank == 0) {
        auto made = NcclWorld::make_unique_id();
        if (!made) throw std::runtime_error(made.message());
        id = *made;
      }
      auto shared = mpi_broadcast_from_rank0(id, &argc, &argv);
      if (!shared) throw std::runtime_error(shared.message());
      boot.unique_id = *shared;
    } else
#endif
    {
      throw std::runtime_error(
          "several ranks need a rendezvous: set NCCL_COMM_ID=host:port (rank 0's address) or "
          "launch with mpirun");
    }
  }
  auto world = NcclWorld::create(boot, o.dp, o.tp, o.pp, device, cuda_compute_stream(*backend));
  if (!world) throw std::runtime_error(world.message());
  NcclWorld& w = **world;
  const WorldLayout& layout = w.layout();

  const bool cupti = !o.no_trace && !o.out.empty() && !std::getenv("CLUSTERSCOPE_PROFILE_DIR");
  RankTrace trace =
      open_trace(o, job, launch->rank, backend->device_name(), cs::trace::kCudaEngineSource,
                 cuda_versions(*info), argc, argv, /*write_rank_row=*/!cupti);
  if (o.sweep.empty()) {
    // As training computes: an fp8 run's GEMMs take bf16 tensors and
    // compute in FP8 (or fall back to BF16, which the probe then shows).
    record_machine_probe(trace, *backend, w.world(), cuda_storage_type(*compute), o.precision);
  }
  // The pipeline group is split from the world keyed by world rank: its
  // rank i is stage i of this rank's replica and tensor slice.
  std::vector<std::int32_t> pipeline_ranks;
  for (int stage = 0; stage < layout.pp; ++stage)
    pipeline_ranks.push_back(layout.order().rank({layout.dp_rank, layout.tp_rank, stage}) +
                             o.trace_rank_offset);
  std::unique_ptr<profiler::Tracer> tracer = start_cupti(
      trace, launch->rank + o.trace_rank_offset, backend->device_name(), std::move(pipeline_ranks));
  trace_gemms(*backend, trace.tracer.get());
  auto finish_tracer = [&] {
    if (!tracer) return;
    backend->synchronize();
    const profiler::TracerReport& report = tracer->finalize();
    emit({{"event", "tracer"}, {"rank", launch->rank}, {"summary", report.summary()},
          {"dropped_records", report.dropped_records}, {"events", report.counts.events}});
    tracer.reset();
  };
  auto report_fp8 = [&] {
    if (*compute != CudaCompute::fp8) return;
    const auto [fp8, fallbacks] = cuda_fp8_gemm_counts(*backend);
    emit({{"event", "fp8"}, {"rank", launch->rank}, {"fp8_gemms", fp8}, {"bf16_fallbacks", fallbacks}});
    if (trace.writer) {
      trace.writer->set_meta("fp8_gemms",
                             json_text(json{{"fp8", fp8}, {"bf16_fallbacks", fallbacks}}));
    }
  };
  if (!o.sweep.empty()) {
    run_sweep(o, *backend, sweep_groups(w), cuda_storage_type(*compute), launch->rank, nullptr);
    report_fp8();
    finish_tracer();
    close_trace(trace);
    emit_unless_stopped({{"event", "done"}, {"rank", launch->rank}, {"store", trace.path}});
    world->reset();
    return 0;
  }
  Trainer trainer(*backend, w.dp(), w.tp(), w.pp(),
                  train_config(o, job.shape.config, layout, cuda_storage_type(*compute)),
                  builtin_corpus(), trace.tracer.get());
  emit(start_line(launch->rank, layout, "cuda", backend->device_name(), trainer, job, o, trace.path));
  train_steps(
      trainer, o, launch->rank, *backend, trace,
      [&](json& line) { line["device_memory_bytes"] = cuda_device_memory_used(device); },
      [&](int step, bool begin) {
        if (!tracer) return;
        if (begin) {
          profiler::push_step_correlation(step);
        } else {
          profiler::pop_step_correlation();
        }
      });
  if (!o.dump_weights.empty()) dump_weights(trainer, w.world(), job.shape.config, launch->rank, o.dump_weights);
  report_fp8();
  finish_tracer();
  close_trace(trace);
  emit_unless_stopped({{"event", "done"}, {"rank", launch->rank}, {"store", trace.path}});
  world->reset();
#ifdef CLUSTERSCOPE_CPU_ENGINE
  mpi_finalize_if_initialized();
#endif
  return 0;
}

// One process, every local GPU a data-parallel rank on its own thread.
int run_cuda_single_process(Options o, const Job& job, int argc, char** argv) {
  auto compute = cuda_compute_from_string(o.precision);
  if (!compute) throw std::runtime_error(compute.message());
  auto count = cuda_device_count();
  if (!count) throw std::runtime_error(count.message());
  const int gpus = o.gpus > 0 ? o.gpus : *count;
  if (gpus > *count) {
    throw std::runtime_error("--gpus " + std::to_string(gpus) + " asks for more GPUs than the " +
                             std::to_string(*count) + " here");
  }
  if (o.tp != 1 || o.pp != 1 || o.dp != gpus) {
    throw std::runtime_error("single-process mode runs pure data parallelism: use --dp " +
                             std::to_string(gpus) + " --tp 1 --pp 1 (one rank per GPU)");
  }
  install_signal_handling();
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<int> devices;
  std::vector<void*> streams;
  for (int d = 0; d < gpus; ++d) {
    auto b = make_cuda_backend(d, *compute);
    if (!b) throw std::runtime_error(b.message());
    streams.push_back(cuda_compute_stream(**b));
    backends.push_back(std::move(b).value());
    devices.push_back(d);
  }
  auto worlds = NcclWorld::create_all(devices, streams);
  if (!worlds) throw std::runtime_error(worlds.message());
  auto info = cuda_device_info(0);
  std::vector<std::thread> threads;
  for (int r = 0; r < gpus; ++r) {
    threads.emplace_back([&, r] {
      try {
        // A new thread starts on GPU 0: rank r's tensors, events and
        // launches belong on GPU r.
        cuda_use_device(devices[r]);
        std::string store;
        {
          NcclWorld& w = *(*worlds)[r];
          RankTrace trace =
              open_trace(o, job, r, backends[r]->device_name(), cs::trace::kCudaEngineSource,
                         cuda_versions(*info), argc, argv);
          trace_gemms(*backends[r], trace.tracer.get());  // as a rank of its own process does
          Trainer trainer(
              *backends[r], w.dp(), w.tp(), w.pp(),
              train_config(o, job.shape.config, w.layout(), cuda_storage_type(*compute)),
              builtin_corpus(), trace.tracer.get());
          emit(start_line(r, w.layout(), "cuda", backends[r]->device_name(), trainer, job, o,
                          trace.path));
          train_steps(trainer, o, r, *backends[r], trace, nullptr);
          close_trace(trace);
          store = trace.path;
        }
        // Each rank's communicators go in its own thread, as separate
        // processes' would: ncclCommDestroy finalizes, which waits for every
        // rank of the communicator, so one thread destroying them all in
        // turn waited on the first for ever (NCCL asks for a group there).
        (*worlds)[r].reset();
        emit_unless_stopped({{"event", "done"}, {"rank", r}, {"store", store}});
      } catch (const std::exception& e) {
        // The other ranks would wait in their next all-reduce for this one,
        // and their threads never join: end the whole job, as a failing rank
        // of the multi-process mode does, every store closed as failed.
        report_error("rank " + std::to_string(r) + ": error: " + described(e));
        emit({{"event", "error"}, {"rank", r}, {"message", described(e)}});
        close_all_writers("failed");
        std::_Exit(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  return 0;
}
#endif

int run(Options o, int argc, char** argv) {
  if (o.accumulation == 0) {
    const int per_step = o.dp * o.micro_batch;
    if (o.global_batch == 0) {
      o.accumulation = 1;
    } else if (o.global_batch % per_step != 0) {
      throw std::runtime_error("--global-batch " + std::to_string(o.global_batch) +
                               " must be a multiple of dp x micro-batch = " + std::to_string(per_step));
    } else {
      o.accumulation = o.global_batch / per_step;
    }
  }
  const Job job = resolve_job(o);
  if (o.virtual_stages > 1) {
    // Said once here, not by every rank's trainer after the world started.
    if (o.backend == "cuda") {
      // NCCL's sends and receives block the stream until the peer's match:
      // the interleaved schedule needs Megatron's batched exchanges, which
      // the CUDA engine does not have yet.
      throw std::runtime_error(
          "--virtual-stages: the CUDA engine runs the 1F1B schedule only; the CPU engine runs "
          "the interleaved one");
    }
    if (o.pp < 2)
      throw std::runtime_error("--virtual-stages: the interleaved schedule needs --pp >= 2");
    if (o.accumulation % o.pp != 0) {
      throw std::runtime_error(
          "--virtual-stages: the interleaved schedule needs the micro-batches per step (" +
          std::to_string(o.accumulation) + ") to be a multiple of --pp " + std::to_string(o.pp));
    }
    if (job.shape.config.layers % (o.pp * o.virtual_stages) != 0) {
      throw std::runtime_error(
          "--virtual-stages: pp x virtual stages = " + std::to_string(o.pp * o.virtual_stages) +
          " must divide the " + std::to_string(job.shape.config.layers) + " layers");
    }
  }
  if (o.backend == "cpu") {
#ifdef CLUSTERSCOPE_CPU_ENGINE
    return run_cpu(o, job, argc, argv);
#else
    throw std::runtime_error("this worker was built without the CPU engine (MPI and OpenBLAS were not found)");
#endif
  }
#ifdef CLUSTERSCOPE_CUDA_ENGINE
  return o.single_process ? run_cuda_single_process(o, job, argc, argv) : run_cuda(o, job, argc, argv);
#else
  throw std::runtime_error("this worker was built without the CUDA engine (no CUDA toolkit at build time)");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit the store's writes fail and are counted in its
  // meta (as on a full disk) instead of the rank being killed.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"clusterscope-worker: one rank of a ClusterScope training run", "clusterscope-worker"};
  // Number checks that say the rule and the value ("--tp: must be > 0 (got 0)").
  auto number_in = [](cs::Range range, std::string description) {
    return CLI::Validator([range](std::string& text) { return range.broken_by(text); },
                          std::move(description));
  };
  const CLI::Validator positive = number_in(cs::Range::positive(), "POSITIVE");
  const CLI::Validator non_negative = number_in(cs::Range::non_negative(), "NONNEGATIVE");
  Options o;
  app.add_option("--plan", o.plan_file, "Plan JSON (its workload is scaled to this machine)");
  app.add_option("--model", o.model, "Model preset to scale to this machine");
  app.add_option("--backend", o.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--layers", o.layers, "Layers (overrides the scaled shape)")->check(positive);
  app.add_option("--hidden", o.hidden, "Hidden size")->check(positive);
  app.add_option("--heads", o.heads, "Attention heads")->check(positive);
  app.add_option("--seq", o.seq, "Sequence length")->check(positive);
  app.add_option("--ffn", o.ffn, "MLP width (default 4 x hidden)")->check(positive);
  app.add_option("--dp", o.dp, "Data-parallel degree")->check(positive);
  app.add_option("--tp", o.tp, "Tensor-parallel degree")->check(positive);
  app.add_option("--pp", o.pp, "Pipeline stages")->check(positive);
  app.add_option(
         "--virtual-stages", o.virtual_stages,
         "Model chunks per pipeline rank (> 1: Megatron's interleaved schedule; CPU engine)")
      ->check(number_in(cs::Range::between(1, 1024), "1 to 1024"));
  app.add_option("--zero", o.zero, "ZeRO stage (0 to 3)")
      ->check(number_in(cs::Range::between(0, 3), "0, 1, 2 or 3"));
  app.add_option(
         "--recompute", o.recompute,
         "Activation recomputation: none, selective (attention scores) or full (each layer)")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  app.add_option("--micro-batch", o.micro_batch, "Sequences per micro-batch")->check(positive);
  auto* acc = app.add_option("--accumulation", o.accumulation, "Micro-batches per replica per step")
                  ->check(positive);
  app.add_option("--global-batch", o.global_batch, "Sequences per step (all replicas)")
      ->check(positive)
      ->excludes(acc);
  app.add_option("--precision", o.precision, "fp32 or bf16 (CPU); tf32, fp16 and fp8 too on CUDA")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16", "fp8"}));
  app.add_option("--steps", o.steps, "Optimizer steps")->check(non_negative);
  app.add_option("--lr", o.lr, "AdamW learning rate")->check(positive);
  app.add_option("--seed", o.seed, "Seed of the weights and the data order")->check(non_negative);
  app.add_option("--bucket-kib", o.bucket_kib, "Data-parallel gradient bucket (KiB)")->check(positive);
  app.add_flag("--no-overlap", o.no_overlap, "Reduce gradients after backward instead of during it");
  app.add_flag("--sequence-parallel", o.sequence_parallel,
               "Megatron's sequence parallelism (with tp > 1): norms on a tp-th of the tokens");
  app.add_option("--out", o.out, "Trace store per rank: {rank} is replaced, else .rank<N>.db is added");
  app.add_flag("--no-trace", o.no_trace, "Record nothing (to measure the tracer's overhead)");
  app.add_option("--dump-weights", o.dump_weights, "Write the final weights (rank 0, unsplit layout)");
  app.add_option("--threads", o.threads, "BLAS threads (default: cores / local ranks)")
      ->check(number_in(cs::Range::between(1, cs::kMaxSweepRanks), "1 to 4096"));
  app.add_option("--title", o.title, "Run title");
  app.add_option(
      "--run-id", o.run_id,
      "The run's id, the same on every rank (recorded; a merge refuses stores of two runs)");
  app.add_flag("--single-process", o.single_process,
               "CUDA: drive every local GPU from this one process (ncclCommInitAll), data parallel");
  app.add_option("--sweep", o.sweep,
                 "Measure instead of training: gemm (squares), layer_gemm (a layer's GEMMs, forward and "
                 "backward), bandwidth, ops, all_reduce, or a comma list");
  // Sizes no host holds (a GEMM n past 65536, buffers past 16 GiB) are
  // refused here rather than failing as a bare std::bad_alloc.
  const CLI::Validator sweep_bytes =
      number_in(cs::Range::between(1, static_cast<double>(cs::kMaxSweepBytes)), "1 to 2^34");
  const CLI::Validator gemm_n = number_in(cs::Range::between(1, 65536), "1 to 65536");
  app.add_option("--sizes", o.sizes, "Sweep sizes: GEMM n, or bytes per buffer / message")
      ->check(sweep_bytes);
  app.add_option("--sweep-seconds", o.sweep_seconds, "Time spent per GEMM size")->check(positive);
  app.add_option("--gemm-sizes", o.gemm_sizes, "GEMM sweeps: n of each square GEMM, or each layer's width")
      ->delimiter(',')
      ->check(gemm_n);
  app.add_option("--buffer-sizes", o.buffer_sizes, "Bandwidth sweep: bytes per buffer")
      ->delimiter(',')
      ->check(sweep_bytes);
  app.add_option("--message-sizes", o.message_sizes, "All-reduce sweep: bytes per message")
      ->delimiter(',')
      ->check(sweep_bytes);
  app.add_option("--sweep-precisions", o.sweep_precisions,
                 "CPU GEMM sweep: every precision listed (fp32, bf16), else --precision")
      ->delimiter(',');
  app.add_option("--trace-rank-offset", o.trace_rank_offset,
                 "Added to the rank recorded in the store (calibration merges several runs)")
      ->check(non_negative);
  app.add_option("--gpus", o.gpus, "GPUs in single-process mode (default all)")->check(positive);
  try {
    app.parse(argc, argv);
    if (o.single_process && o.backend != "cuda") {
      throw std::runtime_error("--single-process drives GPUs: it needs --backend cuda");
    }
    return run(o, argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    report_error("error: " + described(e));
    emit({{"event", "error"}, {"rank", g_rank.load()}, {"message", described(e)}});
    close_all_writers("failed");
    return 1;
  }
}
