// libclusterscope-inject.so: records any CUDA program with the CUPTI tracer,
// one trace store per process.
//
// The CUDA driver loads it while it initialises (cuInit) when
// CUDA_INJECTION64_PATH names it, and calls InitializeInjection(). NVTX loads
// it when NVTX_INJECTION64_PATH names it and calls InitializeInjectionNvtx2(),
// which is handed on to the libcupti this library runs on, so that NVTX
// ranges (NCCL's among them) reach the same CUPTI as the activity records.
//
// Environment (set by `clusterscope profile`):
//   CLUSTERSCOPE_PROFILE_DIR       where the store goes: rank<R>-pid<P>.db,
//                                  the rank read from the launcher (launch_env.h)
//   CLUSTERSCOPE_CUPTI_BUFFER_MB   cap on trace buffers (default 128)
//   CLUSTERSCOPE_MEMORY_SAMPLE_MS  GPU memory counter period (default 100, 0: off)
//   CLUSTERSCOPE_CUPTI_CAPTURE     a directory: also keep the raw CUPTI buffers
//                                  (rank<R>-pid<P>.cupti, a replay recording)
//   CLUSTERSCOPE_CAPTURE_RANGE     cudaProfilerApi: record only between the
//                                  program's cudaProfilerStart and Stop calls
//   CLUSTERSCOPE_CUPTI_FINALIZE=0  skip cuptiFinalize() at the end
//   CLUSTERSCOPE_PROFILE_VERBOSE=1 one summary line per process at the end
//
// The store is flushed and closed at exit, and on SIGINT or SIGTERM when the
// program leaves them at their default action (profiler/exit_guard.h), within
// 20 s, so that a wedged GPU cannot hang the exit.
//
// It never breaks the program it is loaded into: any failure is one line on
// stderr ("clusterscope-inject: ...") and the program runs untraced.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <cupti.h>
#include <dlfcn.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cuda_driver.h"
#include "core/host_name.h"
#include "core/json_text.h"
#include "core/parse_count.h"
#include "core/run_clock.h"
#include "core/trace_writer.h"
#include "profiler/cupti/cupti_source.h"
#include "profiler/cupti/tracer.h"
#include "profiler/exit_guard.h"
#include "profiler/launch_env.h"

#define CS_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using cs::Error;
using cs::Result;
using cs::Status;

constexpr auto kFinishTimeout = std::chrono::milliseconds(20'000);

void log_line(const std::string& text) {
  const std::string line = "clusterscope-inject: " + text + "\n";
  const ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

// Non-negative whole number from the environment, or `fallback` when unset.
Result<long> env_number(const char* name, long fallback, long low, long high) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  const std::optional<long> value = cs::parse_count<long>(text);
  if (!value || *value < low || *value > high) {
    return Error{std::string(name) + "=\"" + text + "\" is not a number from " +
                 std::to_string(low) + " to " + std::to_string(high)};
  }
  return *value;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), {});
  std::string line;
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    std::string arg = raw.substr(start, end - start);
    if (!line.empty()) line += ' ';
    line +=
        arg.find_first_of(" \t\"'") == std::string::npos ? arg : cs::json_text(nlohmann::json(arg));
    start = end + 1;
  }
  return line;
}

int cuda_driver_version() {
  const std::unique_ptr<cs::CudaDriver> driver = cs::CudaDriver::loaded();
  int version = 0;
  if (driver && driver->cuDriverGetVersion) driver->cuDriverGetVersion(&version);
  return version;
}

void remove_store(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    std::remove((path + suffix).c_str());
}

// One traced process. Never deleted: exit handlers and CUPTI's threads may
// still look at it while the process ends.
struct Session {
  pid_t pid = 0;
  std::string path;
  std::string capture_path;  // "" unless CLUSTERSCOPE_CUPTI_CAPTURE
  bool verbose = false;
  std::unique_ptr<cs::trace::TraceWriter> writer;
  std::unique_ptr<cs::profiler::Tracer> tracer;
  std::shared_ptr<cs::profiler::CaptureRange> tracer_capture_range;  // null: none asked for
};

void finish(Session* s, const char* how) {
  const cs::profiler::TracerReport& report = s->tracer->finalize();
  const Status closed = s->writer->close(how);
  if (!closed) {
    log_line("the trace store " + s->path + " was not closed cleanly: " + closed.message());
  }
  // A process that initialised CUDA but ran nothing on a GPU (torchrun's
  // agent asking for the device count) is not a rank of the run.
  const auto& c = report.counts;
  const bool gpu_work = c.kernels + c.memcpys + c.memsets > 0;
  // With a capture range, what was written counts: none when the range
  // never opened, or held none of the program's GPU work.
  const bool never_captured = s->tracer_capture_range && c.gpu_work_written == 0;
  if ((!gpu_work || never_captured) && closed) {
    s->writer.reset();
    remove_store(s->path);
    if (!s->capture_path.empty()) std::remove(s->capture_path.c_str());
  }
  if (s->verbose || report.dropped_records > 0 || (gpu_work && never_captured)) {
    log_line("pid " + std::to_string(s->pid) + ": " + report.summary() +
             (never_captured ? std::string("; no GPU work in the capture range, no store kept")
              : gpu_work     ? " -> " + s->path
                             : std::string("; no GPU work, no store kept")));
    for (const std::string& warning : report.warnings)
      log_line(warning);
  }
}

Status start_session() {
  const char* dir = std::getenv("CLUSTERSCOPE_PROFILE_DIR");
  if (!dir || !*dir) {
    return Error{
        "CLUSTERSCOPE_PROFILE_DIR is not set (run the program under `clusterscope profile`)"};
  }
  const char* capture_range = std::getenv("CLUSTERSCOPE_CAPTURE_RANGE");
  const bool profiler_api = capture_range && std::string(capture_range) == "cudaProfilerApi";
  if (capture_range && *capture_range && !profiler_api) {
    return Error{std::string("CLUSTERSCOPE_CAPTURE_RANGE=\"") + capture_range +
                 "\" is not a capture range this library knows (cudaProfilerApi, or unset)"};
  }
  if (!cs::CudaDriver::loaded()) {
    return Error{
        "no CUDA driver is loaded in this process (the driver calls InitializeInjection "
        "when CUDA_INJECTION64_PATH names this library)"};
  }
  struct stat info {};
  if (stat(dir, &info) != 0 || !S_ISDIR(info.st_mode)) {
    return Error{std::string("CLUSTERSCOPE_PROFILE_DIR=") + dir + " is not a directory"};
  }
  auto launch = cs::profiler::parse_launch_env(cs::profiler::current_environment());
  if (!launch) return Error{"cannot tell this process's rank: " + launch.message()};
  auto cap_mb = env_number("CLUSTERSCOPE_CUPTI_BUFFER_MB", 128, 8, 1 << 16);
  if (!cap_mb) return cap_mb.error();
  auto sample_ms = env_number("CLUSTERSCOPE_MEMORY_SAMPLE_MS", 100, 0, 60'000);
  if (!sample_ms) return sample_ms.error();
  const char* finalize = std::getenv("CLUSTERSCOPE_CUPTI_FINALIZE");
  const char* verbose = std::getenv("CLUSTERSCOPE_PROFILE_VERBOSE");
  const char* capture = std::getenv("CLUSTERSCOPE_CUPTI_CAPTURE");

  const pid_t pid = getpid();
  const std::string stem = "rank" + std::to_string(launch->rank) + "-pid" + std::to_string(pid);
  const std::string path = std::string(dir) + "/" + stem + ".db";
  const std::string host = cs::this_host_name();
  const std::uint32_t cupti_version = cs::profiler::loaded_cupti_version();

  cs::trace::RunInfo run;
  run.title = "pid " + std::to_string(pid) + ", " + launch->describe();
  run.source = "cupti";
  run.start_utc_ns = cs::trace::run_clock_ns();
  run.clock = cs::trace::kRunClockName;
  run.host = host;
  run.command_line = command_line();
  run.tool_versions_json = cs::json_text(nlohmann::json{{"clusterscope", CLUSTERSCOPE_VERSION},
                                                        {"cupti", cupti_version},
                                                        {"cuda_driver", cuda_driver_version()}});
  auto writer = cs::trace::TraceWriter::create(path, run);
  if (!writer) return writer.error();

  cs::trace::TraceWriter& w = **writer;
  w.set_meta("process.launcher", cs::profiler::to_string(launch->launcher));
  w.set_meta("process.rank", std::to_string(launch->rank));
  w.set_meta("process.world_size", std::to_string(launch->world_size));
  w.set_meta("process.local_rank", std::to_string(launch->local_rank));
  if (launch->local_world_size) {
    w.set_meta("process.local_world_size", std::to_string(*launch->local_world_size));
  }
  if (launch->node_rank) w.set_meta("process.node_rank", std::to_string(*launch->node_rank));
  w.set_meta("process.pid", std::to_string(pid));
  // clusterscope profile's id for its command, else the user's mpirun's or
  // Slurm step's: a merge of processes of two runs is then refused.
  if (const std::string id = cs::profiler::shared_run_id(cs::profiler::current_environment());
      !id.empty())
    w.set_meta(cs::trace::kRunIdMeta, id);

  cs::profiler::TracerOptions options;
  options.rank.rank = launch->rank;
  options.rank.host = host;
  options.rank.pid = pid;
  options.buffer_cap_bytes = static_cast<std::size_t>(*cap_mb) << 20;
  options.memory_sample_period = std::chrono::milliseconds(*sample_ms);
  // A program traced from outside marks its steps, if at all, by NVTX ranges.
  options.steps_from_ranges = true;
  if (profiler_api) options.capture_range = std::make_shared<cs::profiler::CaptureRange>();
  if (capture && *capture) options.capture_path = std::string(capture) + "/" + stem + ".cupti";
  cs::profiler::CuptiSourceOptions cupti;
  cupti.finalize_cupti = !(finalize && std::string(finalize) == "0");
  cupti.capture_range = options.capture_range;

  auto tracer = cs::profiler::Tracer::start(cs::profiler::make_cupti_source(cupti), w, options);
  if (!tracer) {
    (void)w.close("failed");  // removed just below
    writer->reset();
    remove_store(path);
    return tracer.error();
  }
  auto* session = new Session;
  session->pid = pid;
  session->path = path;
  session->capture_path = options.capture_path;
  session->verbose = verbose && std::string(verbose) == "1";
  session->writer = std::move(writer).value();
  session->tracer = std::move(tracer).value();
  session->tracer_capture_range = options.capture_range;
  const Status guarded = cs::profiler::exit_guard::install(
      [session](const char* how) { finish(session, how); }, kFinishTimeout);
  if (!guarded) log_line(guarded.message());
  return {};
}

// The libcupti this library was linked to, as loaded in this process.
void* loaded_cupti() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) || !info.dli_fname) return nullptr;
  return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
}

}  // namespace

CS_EXPORT int InitializeInjection(void) {
  static std::mutex once;
  static int result = -1;
  std::lock_guard lock(once);
  if (result >= 0) return result;
  result = 0;
  try {
    const Status started = start_session();
    if (started) {
      result = 1;
    } else {
      log_line(started.message() + "; not tracing this process");
    }
  } catch (const std::exception& e) {
    log_line(std::string("internal error: ") + e.what() + "; not tracing this process");
  } catch (...) {
    log_line("internal error; not tracing this process");
  }
  return result;
}

// NVTX's entry points, handed on to libcupti's (NVTX_INJECTION64_PATH may
// name this library instead of libcupti, so that both load the same CUPTI).
CS_EXPORT int InitializeInjectionNvtx2(const void* (*get_export_table)(std::uint32_t)) {
  void* cupti = loaded_cupti();
  if (!cupti) return 0;
  using Init = int (*)(const void* (*)(std::uint32_t));
  auto init = reinterpret_cast<Init>(dlsym(cupti, "InitializeInjectionNvtx2"));
  const int result = init ? init(get_export_table) : 0;
  dlclose(cupti);
  return result;
}

CS_EXPORT int InitializeInjectionNvtxExtension(void* module_info) {
  void* cupti = loaded_cupti();
  if (!cupti) return 0;
  using Init = int (*)(void*);
  auto init = reinterpret_cast<Init>(dlsym(cupti, "InitializeInjectionNvtxExtension"));
  const int result = init ? init(module_info) : 0;
  dlclose(cupti);
  return result;
}
