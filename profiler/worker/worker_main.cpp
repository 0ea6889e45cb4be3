// clusterscope-worker: one rank of a training run. Started by the launcher
// (mpirun, Slurm), it trains the plan's model on a backend, records its
// timeline into its own trace store and prints a JSON line per step.

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <mutex>
#include <thread>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/presets.h"
#include "core/trace_writer.h"
#include "profiler/worker/corpus.h"
#include "profiler/worker/cpu_backend.h"
#include "profiler/worker/mpi_comm.h"
#include "profiler/worker/op_tracer.h"
#include "profiler/worker/trainer.h"
#include "profiler/worker/weights_file.h"
#include "profiler/worker_shape.h"

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
  std::string precision = "fp32";
  int steps = 10;
  float lr = 1e-3f;
  std::uint64_t seed = 1234;
  double bucket_kib = 1024;
  bool no_overlap = false;
  std::string out;
  bool no_trace = false;
  std::string dump_weights;
  int threads = 0;
  std::string title;
};

// One JSON line, whole, on stdout (the launcher reads them).
void emit(const json& line) {
  const std::string text = line.dump() + "\n";
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

// Signals reach one thread. SIGTERM, SIGINT, SIGHUP: close the store and
// end the process. SIGUSR1 (what the launcher sends, through mpirun, to
// cancel): close the store and stop training, then wait to be ended; mpirun
// kills ranks one second after it forwards a SIGTERM, which can be too soon
// to close a large store. Either way a cancelled or aborted run keeps
// everything recorded up to that moment.
std::mutex g_store_mutex;
trace::TraceWriter* g_writer = nullptr;  // guarded by g_store_mutex; null once closed
std::atomic<bool> g_stop{false};
std::atomic<int> g_rank{0};

void set_store(trace::TraceWriter* writer) {
  std::lock_guard lock(g_store_mutex);
  g_writer = writer;
}

// Commits what is buffered, then records how the run ended; the first call
// closes the store, later ones do nothing.
Status close_store(std::string_view status) {
  std::lock_guard lock(g_store_mutex);
  trace::TraceWriter* writer = std::exchange(g_writer, nullptr);
  if (!writer) return {};
  (void)writer->flush();  // the rows first: a kill during close keeps them
  return writer->close(status);
}

int g_signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t written = write(g_signal_pipe[1], &byte, 1);
}

// A handler on every thread hands the signal to the signal thread through a
// pipe: blocking signals would not do, as threads that libraries start
// before main (OpenBLAS starts its pool when it is loaded) do not block them,
// and the default action would end the rank with its store open.
void install_signal_handlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaction(sig, &action, nullptr);
}

void start_signal_thread() {
  std::thread([] {
    for (;;) {
      unsigned char byte = 0;
      const ssize_t n = read(g_signal_pipe[0], &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n != 1) return;
      const int sig = byte;
      const bool first = !g_stop.exchange(true);
      (void)close_store("cancelled");
      if (first) emit({{"event", "cancelled"}, {"rank", g_rank.load()}, {"signal", sig}});
      if (sig != SIGUSR1) std::_Exit(128 + sig);
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

// A step line only for a step the store holds (once a signal has come, the
// store may be closed): the launcher relies on it.
void emit_step(const json& line) {
  std::lock_guard lock(g_store_mutex);
  if (!g_stop) emit(line);
}

// After SIGUSR1: the store is closed; the rank idles until it is ended.
[[noreturn]] void wait_to_be_ended() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

DType compute_type(const std::string& precision) {
  if (precision == "fp32") return DType::f32;
  if (precision == "bf16") return DType::bf16;
  throw CLI::ValidationError("--precision", "the CPU engine computes in fp32 or bf16, not " + precision);
}

int train(Options o, int argc, char** argv, const WorkerShape& shape, const std::string& plan_json,
          DType compute, MpiWorld& world);

int run(Options o, int argc, char** argv) {
  // The model shape: a plan's workload scaled to this machine, or given directly.
  WorkerShape shape;
  std::string plan_json;
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
      plan_json = to_json(*plan).dump();
    } else {
      const Workload* w = catalog->find_model(o.model);
      if (!w) throw std::runtime_error(catalog->unknown_name_message("model preset", o.model, catalog->model_names()));
      workload = *w;
    }
    auto scaled = worker_shape_for(workload, o.tp, o.pp);
    if (!scaled) throw std::runtime_error(scaled.message());
    shape = *scaled;
  }
  GptConfig& c = shape.config;
  if (o.layers) c.layers = o.layers;
  if (o.hidden) c.hidden = o.hidden;
  if (o.heads) c.heads = o.heads;
  if (o.seq) c.seq = o.seq;
  c.ffn = o.ffn ? o.ffn : (o.hidden ? 4 * c.hidden : c.ffn);

  if (o.backend != "cpu") {
    throw std::runtime_error("the CUDA engine is not built into this worker; use --backend cpu");
  }
  const DType compute = compute_type(o.precision);

  install_signal_handlers();  // before MPI starts its threads
  auto world = MpiWorld::create(&argc, &argv, o.dp, o.tp, o.pp);
  if (!world) throw std::runtime_error(world.message());
  const WorldLayout& layout = (*world)->layout();
  g_rank = layout.world_rank;
  start_signal_thread();
  try {
    return train(o, argc, argv, shape, plan_json, compute, **world);
  } catch (const std::exception& e) {
    // One rank failing alone would leave the others waiting in a collective:
    // end the whole job.
    report_error("rank " + std::to_string(layout.world_rank) + ": error: " + e.what());
    emit({{"event", "error"}, {"rank", layout.world_rank}, {"message", e.what()}});
    (void)close_store("failed");
    (*world)->abort(1);
  }
}

int train(Options o, int argc, char** argv, const WorkerShape& shape, const std::string& plan_json,
          DType compute, MpiWorld& world_ref) {
  MpiWorld* world = &world_ref;
  const WorldLayout& layout = world->layout();
  const GptConfig& c = shape.config;

  if (o.accumulation == 0) {
    const int per_step = o.dp * o.micro_batch;
    if (o.global_batch % per_step != 0 || o.global_batch == 0) {
      throw std::runtime_error("--global-batch must be a multiple of dp x micro-batch = " +
                               std::to_string(per_step));
    }
    o.accumulation = o.global_batch / per_step;
  }

  TrainConfig tc;
  tc.model = c;
  tc.dp = o.dp;
  tc.tp = o.tp;
  tc.pp = o.pp;
  tc.dp_rank = layout.dp_rank;
  tc.tp_rank = layout.tp_rank;
  tc.pp_rank = layout.pp_rank;
  tc.zero_stage = o.zero;
  tc.micro_batch = o.micro_batch;
  tc.accumulation = o.accumulation;
  tc.compute = compute;
  tc.lr = o.lr;
  tc.seed = o.seed;
  tc.bucket_bytes = static_cast<std::int64_t>(o.bucket_kib * 1024);
  tc.overlap_dp = !o.no_overlap;

  int threads = o.threads;
  if (threads <= 0) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int local_ranks = local ? std::max(1, std::atoi(local)) : layout.world_size;
    threads = std::max(1L, cores / local_ranks);
  }
  auto backend = make_cpu_backend(threads);
  (void)argc;

  std::unique_ptr<trace::TraceWriter> writer;
  // Closes the store before the writer goes, also when an error unwinds.
  struct StoreCloser {
    ~StoreCloser() { (void)close_store(std::uncaught_exceptions() > 0 ? "failed" : "complete"); }
  } store_closer;
  std::unique_ptr<OpTracer> tracer;
  std::string path;
  if (!o.no_trace && !o.out.empty()) {
    path = store_path(o.out, layout.world_rank);
    trace::RunInfo info;
    info.title = o.title.empty() ? "CPU engine run" : o.title;
    info.source = "cpu-engine";
    info.start_utc_ns = OpTracer::now_ns();
    info.clock = "CLOCK_REALTIME";
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    info.host = host;
    for (int i = 0; i < argc; ++i) info.command_line += (i ? " " : "") + std::string(argv[i]);
    info.plan_json = plan_json;
    info.tool_versions_json = json{{"clusterscope", CLUSTERSCOPE_VERSION}}.dump();
    auto created = trace::TraceWriter::create(path, info);
    if (!created) throw std::runtime_error(created.message());
    writer = std::move(created).value();
    writer->add_rank({layout.world_rank, host, backend->device_name(), getpid(), 0});
    writer->set_meta("worker_shape", json{{"layers", c.layers}, {"hidden", c.hidden},
                                           {"heads", c.heads}, {"seq", c.seq}, {"ffn", c.ffn},
                                           {"vocab", c.vocab}, {"scaled", shape.scaled}}.dump());
    writer->set_meta("parallel", json{{"dp", o.dp}, {"tp", o.tp}, {"pp", o.pp}, {"zero_stage", o.zero},
                                      {"micro_batch", o.micro_batch},
                                      {"accumulation", o.accumulation},
                                      {"precision", o.precision}}.dump());
    tracer = std::make_unique<OpTracer>(*writer, layout.world_rank);
    set_store(writer.get());
    backend->set_tracer(tracer.get());
    world->set_tracer(tracer.get());
  }

  Trainer trainer(*backend, world->dp(), world->tp(), world->pp(), tc, builtin_corpus(),
                  tracer.get());
  char host_name[256] = {};
  gethostname(host_name, sizeof host_name - 1);
  emit({{"event", "start"},
        {"rank", layout.world_rank},
        {"host", host_name},
        {"pid", static_cast<std::int64_t>(getpid())},
        {"world_size", layout.world_size},
        {"dp_rank", layout.dp_rank},
        {"tp_rank", layout.tp_rank},
        {"pp_rank", layout.pp_rank},
        {"backend", "cpu"},
        {"device", backend->device_name()},
        {"parameters", trainer.model().num_params()},
        {"model", {{"layers", c.layers}, {"hidden", c.hidden}, {"heads", c.heads}, {"seq", c.seq},
                   {"ffn", c.ffn}, {"vocab", c.vocab}}},
        {"scaled", shape.scaled},
        {"steps", o.steps},
        {"store", path}});

  for (int s = 0; s < o.steps; ++s) {
    if (g_stop) wait_to_be_ended();
    const double cpu_before = process_cpu_seconds();
    const StepResult r = trainer.step();
    const double cpu_seconds = process_cpu_seconds() - cpu_before;
    emit_step({{"event", "step"},
          {"rank", layout.world_rank},
          {"step", r.step},
          {"steps", o.steps},
          {"loss", r.loss},
          {"grad_norm", r.grad_norm},
          {"step_seconds", r.seconds},
          {"cpu_seconds", cpu_seconds},
          {"tokens_per_second", r.tokens / r.seconds},
          {"memory_bytes", backend->bytes_in_use()}});
  }

  if (!o.dump_weights.empty()) {
    std::vector<float> full = trainer.gather_full_weights(world->world());
    if (layout.world_rank == 0) {
      NamedWeights named;
      for (const ParamInfo& p : gpt_parameter_layout(c, ModelParallel{})) {
        named[p.name].assign(full.begin() + p.offset, full.begin() + p.offset + p.numel());
      }
      if (Status s = write_weights(o.dump_weights, named); !s) throw std::runtime_error(s.message());
    }
  }
  if (Status s = close_store("complete"); !s) throw std::runtime_error(s.message());
  emit({{"event", "done"}, {"rank", layout.world_rank}, {"store", path}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"clusterscope-worker: one rank of a ClusterScope training run", "clusterscope-worker"};
  Options o;
  app.add_option("--plan", o.plan_file, "Plan JSON (its workload is scaled to this machine)");
  app.add_option("--model", o.model, "Model preset to scale to this machine");
  app.add_option("--backend", o.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--layers", o.layers, "Layers (overrides the scaled shape)")->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden, "Hidden size")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads, "Attention heads")->check(CLI::PositiveNumber);
  app.add_option("--seq", o.seq, "Sequence length")->check(CLI::PositiveNumber);
  app.add_option("--ffn", o.ffn, "MLP width (default 4 x hidden)")->check(CLI::PositiveNumber);
  app.add_option("--dp", o.dp, "Data-parallel degree")->check(CLI::PositiveNumber);
  app.add_option("--tp", o.tp, "Tensor-parallel degree")->check(CLI::PositiveNumber);
  app.add_option("--pp", o.pp, "Pipeline stages")->check(CLI::PositiveNumber);
  app.add_option("--zero", o.zero, "ZeRO stage (0 or 1)")->check(CLI::Range(0, 1));
  app.add_option("--micro-batch", o.micro_batch, "Sequences per micro-batch")->check(CLI::PositiveNumber);
  auto* acc = app.add_option("--accumulation", o.accumulation, "Micro-batches per replica per step")
                  ->check(CLI::PositiveNumber);
  app.add_option("--global-batch", o.global_batch, "Sequences per step (all replicas)")
      ->check(CLI::PositiveNumber)
      ->excludes(acc);
  app.add_option("--precision", o.precision, "fp32 or bf16 (CPU); tf32, fp16, fp8 too on CUDA");
  app.add_option("--steps", o.steps, "Optimizer steps")->check(CLI::NonNegativeNumber);
  app.add_option("--lr", o.lr, "AdamW learning rate");
  app.add_option("--seed", o.seed, "Seed of the weights and the data order");
  app.add_option("--bucket-kib", o.bucket_kib, "Data-parallel gradient bucket (KiB)")->check(CLI::PositiveNumber);
  app.add_flag("--no-overlap", o.no_overlap, "Reduce gradients after backward instead of during it");
  app.add_option("--out", o.out, "Trace store per rank: {rank} is replaced, else .rank<N>.db is added");
  app.add_flag("--no-trace", o.no_trace, "Record nothing (to measure the tracer's overhead)");
  app.add_option("--dump-weights", o.dump_weights, "Write the final weights (rank 0, unsplit layout)");
  app.add_option("--threads", o.threads, "BLAS threads (default: cores / local ranks)");
  app.add_option("--title", o.title, "Run title");
  try {
    app.parse(argc, argv);
    if (o.accumulation == 0 && o.global_batch == 0) o.accumulation = 1;
    return run(o, argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    report_error(std::string("error: ") + e.what());
    emit({{"event", "error"}, {"rank", g_rank.load()}, {"message", e.what()}});
    return 1;
  }
}
