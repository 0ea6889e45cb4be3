// A real writer process for the crash-safety tests: it writes a trace store
// and reports on stdout, one line at a time, how many events are committed.
//
//   trace_writer_child crash PATH   writes batches forever (the test kills it)
//   trace_writer_child live PATH    commits one batch, then waits to be killed
//   trace_writer_child fsize PATH BYTES
//                                   writes under a file-size limit until a
//                                   write fails; prints the error and close()'s

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <sys/resource.h>

#include "core/trace_writer.h"

using namespace cs::trace;

namespace {

constexpr int kBatch = 5000;

void write_batch(TraceWriter& w, LaneId gpu, LaneId cpu, StringId kernel, StringId launch,
                 std::int64_t& t, std::int64_t& correlation) {
  for (int i = 0; i < kBatch; ++i) {
    ++correlation;
    Event api;
    api.lane = cpu;
    api.kind = EventKind::api_call;
    api.category = Category::other;
    api.start_ns = t;
    api.end_ns = t + 2000;
    api.name = launch;
    api.correlation = correlation;
    w.add(api);
    Event k;
    k.lane = gpu;
    k.kind = EventKind::kernel;
    k.start_ns = t + 3000;
    k.end_ns = t + 9000;
    k.name = kernel;
    k.correlation = correlation;
    w.add(k);
    t += 10000;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: trace_writer_child crash|live|fsize PATH [BYTES]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::string path = argv[2];
  if (mode == "fsize") {
    if (argc < 4) return 2;
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = std::strtoull(argv[3], nullptr, 10);
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      std::perror("setrlimit");
      return 2;
    }
  }

  RunInfo run;
  run.title = "writer child (" + mode + ")";
  run.source = "test";
  WriterOptions options;
  options.flush_rows = 1 << 30;  // commits happen on flush() only, so the counts are exact
  options.flush_interval = std::chrono::hours(1);
  auto created = TraceWriter::create(path, run, options);
  if (!created) {
    std::printf("error %s\n", created.message().c_str());
    return 1;
  }
  TraceWriter& w = **created;
  w.add_rank({0, "localhost", "test", 1, 0, false});
  const LaneId gpu = w.add_lane(0, LaneKind::gpu_stream, "stream 7", 0);
  const LaneId cpu = w.add_lane(0, LaneKind::cpu_thread, "thread 1", 1);
  const StringId kernel = w.intern("saxpy");
  const StringId launch = w.intern("cudaLaunchKernel");
  std::int64_t t = 1'000'000'000;
  std::int64_t correlation = 0;
  std::int64_t committed = 0;

  for (;;) {
    write_batch(w, gpu, cpu, kernel, launch, t, correlation);
    const cs::Status s = w.flush();
    if (!s) {
      std::printf("error %s\n", s.message().c_str());
      const cs::Status c = w.close("crashed");
      std::printf("close %s\n", c ? "ok" : c.message().c_str());
      std::fflush(stdout);
      return 0;
    }
    committed += 2 * kBatch;
    std::printf("committed %lld\n", static_cast<long long>(committed));
    std::fflush(stdout);
    if (mode == "live") {
      for (;;)
        std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
}
