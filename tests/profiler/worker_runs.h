#pragma once
// Runs of the real worker through the real launcher (mpirun), for the
// profiler suites: each rank's step losses, the final weights, the report.

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/launcher.h"
#include "profiler/worker/weights_file.h"

namespace cs::test {

// The tiny model every suite trains: fast on two cores, big enough for every split.
inline std::vector<std::string> tiny_model_args() {
  return {"--layers", "2", "--hidden", "32", "--heads", "4", "--seq", "16", "--ffn", "128"};
}

struct WorkerRun {
  launch::RunReport report;
  std::map<int, std::vector<double>> losses;  // rank -> loss of each step, in order
  worker::NamedWeights weights;               // when dumped
  std::string weights_error;
};

inline launch::RunSpec worker_spec(int ranks, std::vector<std::string> args) {
  launch::RunSpec spec;
  spec.worker = CS_BIN_DIR "/clusterscope-worker";
  spec.worker_args = std::move(args);
  spec.ranks = ranks;
  spec.hang_timeout = std::chrono::seconds(60);
  spec.kill_grace = std::chrono::seconds(5);
  return spec;
}

// Runs to the end; `weights_path` non-empty adds --dump-weights.
inline WorkerRun run_worker(launch::RunSpec spec, const std::string& weights_path = {}) {
  WorkerRun run;
  if (!weights_path.empty()) {
    spec.worker_args.push_back("--dump-weights");
    spec.worker_args.push_back(weights_path);
  }
  std::mutex mutex;
  launch::Launcher launcher(spec, [&](const launch::LaunchEvent& e) {
    if (e.kind != launch::LaunchEvent::Kind::step) return;
    std::lock_guard lock(mutex);
    run.losses[e.rank].push_back(e.loss);
  });
  if (Status s = launcher.start(); !s) {
    run.report.message = s.message();
    return run;
  }
  run.report = launcher.wait();
  if (!weights_path.empty() && run.report.outcome == launch::Outcome::completed) {
    auto w = worker::read_weights(weights_path);
    if (w) {
      run.weights = std::move(w).value();
    } else {
      run.weights_error = w.message();
    }
  }
  return run;
}

// Polls `ready` until it holds or `timeout` passes.
template <class F>
bool wait_until(F ready, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ready();
}

}  // namespace cs::test
