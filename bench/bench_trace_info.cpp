// `clusterscope trace info` on a store whose plan is huge: the run store of
// a plan over a large cluster records the whole plan (meta plan_json, tens of
// MB). info prints a few lines of the run and its ranks and lanes, and
// should take about as long as on a store with a small plan.
//
//   bench_trace_info [--plan-mb M] [--runs N] [--dir D] [--keep]
//
// Writes two stores alike but for their plan (M MB, default 40; and a few
// hundred bytes), then runs the CLI's `trace info` on each N times (default
// 3), text and --json, its output thrown away, and prints the fastest wall
// time of each. --json prints the plan whole, so it pays for reading it
// (it is copied from its text, not parsed into a tree).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_args.h"
#include "core/trace_writer.h"

using namespace cs::trace;
using Clock = std::chrono::steady_clock;

namespace {

const char* kUsage = "bench_trace_info [--plan-mb M] [--runs N] [--dir D] [--keep]";

// A plan as the app records it, its cluster made of `nodes` nodes of 8 GPUs.
std::string plan_of(std::int64_t nodes) {
  std::string plan = R"({"cluster":{"name":"huge","nodes":[)";
  for (std::int64_t n = 0; n < nodes; ++n) {
    if (n) plan += ',';
    plan += R"({"name":"node-)" + std::to_string(n) + R"(","gpus":[)";
    for (int g = 0; g < 8; ++g)
      plan += std::string(g ? "," : "") +
              R"({"model":"H100 SXM","memory_gb":80,"nvlink_gbps":900,"index":)" +
              std::to_string(g) + "}";
    plan += R"(],"links":[{"kind":"InfiniBand NDR","gbps":400,"count":8}]})";
  }
  plan += R"(]},"workload":{"name":"LLaMA-2 70B","layers":80,"hidden":8192},)"
          R"("parallel":{"dp":64,"tp":8,"pp":4},"precision":{"compute":"bf16"}})";
  return plan;
}

int write_store(const std::string& path, const std::string& plan) {
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(path + suffix);
  RunInfo run{"benchmark", "bench_trace_info", 0, "synthetic"};
  run.command_line = "bench_trace_info";
  run.plan_json = plan;
  auto created = TraceWriter::create(path, run);
  if (!created) {
    std::fprintf(stderr, "%s\n", created.message().c_str());
    return 1;
  }
  TraceWriter& w = **created;
  const StringId kernel = w.intern("gemm");
  for (int r = 0; r < 8; ++r) {
    w.add_rank({r, "node0", "GPU " + std::to_string(r), 1000 + r, 0, false});
    const LaneId lane = w.add_lane(r, LaneKind::gpu_stream, "GPU stream 7", 1);
    for (int i = 0; i < 1000; ++i) {
      Event e;
      e.lane = lane;
      e.kind = EventKind::kernel;
      e.category = Category::compute;
      e.start_ns = 1'000'000LL * i;
      e.end_ns = e.start_ns + 500'000;
      e.name = kernel;
      w.add(e);
    }
  }
  if (auto closed = w.close(); !closed) {
    std::fprintf(stderr, "%s\n", closed.message().c_str());
    return 1;
  }
  return 0;
}

// One run of the CLI, its output to /dev/null: its wall seconds, or -1.
double run_cli(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string program = CS_CLI;
  argv.push_back(program.data());
  std::vector<std::string> copy(args);
  for (std::string& a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s %s failed\n", CS_CLI, args.front().c_str());
    return -1;
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  long long plan_mb = 40, runs = 3;
  std::string dir = std::filesystem::temp_directory_path().string();
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--plan-mb" && has_value) {
      plan_mb = cs::bench::count_arg(argv[0], kUsage, "--plan-mb", argv[++i], 1, 1000);
    } else if (a == "--runs" && has_value) {
      runs = cs::bench::count_arg(argv[0], kUsage, "--runs", argv[++i], 1, 100);
    } else if (a == "--dir" && has_value) {
      dir = argv[++i];
    } else if (a == "--keep") {
      keep = true;
    } else {
      cs::bench::usage_error(argv[0], "unknown option '" + a + "'", kUsage);
    }
  }
  const std::int64_t node_bytes = static_cast<std::int64_t>(plan_of(2).size() - plan_of(1).size());
  const std::string big = plan_of(plan_mb * 1'000'000 / node_bytes);
  const std::string small_store = dir + "/bench-trace-info-small.db";
  const std::string big_store = dir + "/bench-trace-info-big.db";
  if (write_store(small_store, plan_of(1)) != 0 || write_store(big_store, big) != 0) return 1;
  std::printf("trace info, fastest of %lld runs (wall seconds)\n", runs);
  std::printf("%-28s %10s %10s\n", "store", "text", "--json");
  for (const auto& [name, path] :
       {std::pair<std::string, std::string>{"small plan", small_store},
        {std::to_string((big.size() + 500'000) / 1'000'000) + " MB plan", big_store}}) {
    double text = 1e9, json = 1e9;
    for (long long r = 0; r < runs; ++r) {
      const double t = run_cli({"trace", "info", path});
      const double j = run_cli({"trace", "info", "--json", path});
      if (t < 0 || j < 0) return 1;
      text = std::min(text, t);
      json = std::min(json, j);
    }
    std::printf("%-28s %10.3f %10.3f\n", name.c_str(), text, json);
  }
  if (!keep) {
    for (const std::string& path : {small_store, big_store})
      for (const char* suffix : {"", "-wal", "-shm"})
        std::filesystem::remove(path + suffix);
  }
  return 0;
}
