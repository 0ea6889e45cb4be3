// clusterscope profile --out RUN.db [--keep-parts DIR] [--no-nvtx] [--wait all|primary]
//                      [--capture-range none|cudaProfilerApi] [--plan PLAN.json]
//                      -- COMMAND ARGS...

#include <iostream>

#include <CLI/CLI.hpp>

#include "app/calibration/calibration_workflow.h"
#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/output_folder.h"
#include "core/format.h"
#include "core/host_probe.h"
#include "core/json_text.h"
#include "core/predicted_step.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "profiler/profile_run.h"

namespace cs::cli {

namespace {

struct ProfileOptions {
  std::vector<std::string> command;
  std::string out;
  std::string keep_parts;
  bool no_nvtx = false;
  std::string wait = "all";
  std::string capture_range = "none";
  std::string plan_file;  // the plan the program runs: its prediction goes into the store
};

std::string file_names(const std::vector<std::string>& paths) {
  std::string text;
  for (const std::string& path : paths) {
    if (!text.empty()) text += ", ";
    text += path.substr(path.find_last_of('/') + 1);
  }
  return text;
}

// The steps the program marked, or how to mark them: without steps the
// analyses take the whole run as one step.
void say_steps(const std::string& store) {
  auto reader = trace::TraceReader::open(store);
  if (!reader) return;
  auto steps = trace::job_step_windows(**reader);
  if (!steps) return;
  if (steps->empty()) {
    std::cerr << "clusterscope: note: the program marked no steps, so the analyses take the run "
                 "as one step; NVTX ranges named step N around each iteration "
                 "(torch.cuda.nvtx.range_push(f\"step {i}\")) mark them\n";
  } else {
    std::cerr << "clusterscope: note: " << steps->size()
              << (steps->size() == 1 ? " step" : " steps")
              << ", from the program's NVTX ranges named as steps\n";
  }
}

void run(const ProfileOptions& o, Context& ctx) {
  // A plan that cannot be predicted is refused before the command runs.
  std::vector<std::pair<std::string, std::string>> meta;
  std::optional<PlanFilePrediction> planned;
  if (!o.plan_file.empty()) {
    planned = plan_file_prediction(ctx.catalog(), o.plan_file);
    const trace::PredictedStep& predicted = planned->step;
    meta.emplace_back(trace::kPredictedStepMetaKey, json_text(trace::to_json(predicted)));
    std::cerr << "clusterscope: note: the planner predicts "
              << format_seconds(predicted.step_seconds) << " per step for "
              << predicted.workload.value_or("?") << " on " << predicted.cluster.value_or("?")
              << " (" << document_name(o.plan_file) << ")\n";
  }
  // Said before the command runs, not after (a long job ran to its end and
  // only then heard that nothing could be traced).
  const HostInfo before = probe_host();
  if (before.gpus.empty()) {
    std::cerr << "clusterscope: note: no GPU here (" << before.gpu_status
              << "): the command runs, but no CUDA process can be traced\n";
  }
  profiler::ProfileRequest request;
  request.command = o.command;
  const OutputFolder out_folder(o.out);
  request.out = o.out;
  request.keep_parts = o.keep_parts;
  request.nvtx = !o.no_nvtx;
  request.wait = o.wait == "primary" ? profiler::WaitFor::primary : profiler::WaitFor::all;
  request.capture_profiler_api = o.capture_range == "cudaProfilerApi";
  request.meta = meta;
  const profiler::ProfileOutcome outcome = take(profiler::run_profiled(request));

  for (const std::string& note : outcome.notes)
    std::cerr << "clusterscope: note: " << note << '\n';
  const std::string program = o.command.front();
  if (!outcome.status.success()) {
    std::cerr << "clusterscope: " << program << ' ' << outcome.status.describe() << '\n';
  }
  if (outcome.parts.empty() && !outcome.still_written.empty()) {
    std::cerr << "clusterscope: error: no process that ended left a store, so " << o.out
              << " was not written (the stores still being written by processes left running "
                 "stay in "
              << outcome.parts_dir << ")\n";
    throw CliExitCode{outcome.status.success() ? 1 : outcome.status.shell_code()};
  }
  if (outcome.parts.empty()) {
    const HostInfo& host = before;
    std::string why =
        host.gpus.empty() ? host.gpu_status
        : request.capture_profiler_api
            ? "with --capture-range cudaProfilerApi, only what the program runs between its "
              "cudaProfilerStart and cudaProfilerStop calls is recorded: did it call them? Or "
              "the command did not initialise CUDA, or tracing failed in it (see any "
              "clusterscope-inject line above)"
            : "the command did not initialise CUDA, or tracing failed in it (see any "
              "clusterscope-inject line above)";
    std::cerr << "clusterscope: error: no CUDA process was traced, so " << o.out
              << " was not written (" << why << ")\n";
    throw CliExitCode{outcome.status.success() ? 1 : outcome.status.shell_code()};
  }
  if (!outcome.gathered.ok()) {
    std::cerr << "clusterscope: error: " << outcome.gathered.message() << "; the "
              << outcome.parts.size() << " per-process stores are kept in " << outcome.parts_dir
              << '\n';
    throw CliExitCode{outcome.status.success() ? 1 : outcome.status.shell_code()};
  }
  if (planned) {
    const std::string note =
        calib::plan_size_note(planned->plan, static_cast<int>(outcome.parts.size()));
    if (!note.empty()) std::cerr << "clusterscope: warning: " << note << '\n';
  }
  std::cout << "Wrote " << o.out << ": " << outcome.parts.size()
            << (outcome.parts.size() == 1 ? " process" : " processes") << " traced ("
            << file_names(outcome.parts) << ")";
  if (outcome.parts_kept) std::cout << "; per-process stores in " << outcome.parts_dir;
  std::cout << '\n';
  say_steps(o.out);
  if (!outcome.status.success()) throw CliExitCode{outcome.status.shell_code()};
}

}  // namespace

void register_profile(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Run a CUDA program under the CUPTI tracer and write one run store. Every CUDA process it "
      "starts is traced (torchrun's and mpirun's workers too), each as the rank its launcher gave "
      "it. It waits for every process the command starts, even those it leaves running, and passes "
      "an interrupt on to them all (--wait primary: for the command alone). NVTX ranges named "
      "step N, iteration N or ProfilerStep#N mark the program's steps. Example: clusterscope "
      "profile --out run.db -- torchrun --nproc_per_node 8 train.py");
  cmd->add_option("-o,--out,--output", o->out,
                  "The run store to write (SQLite); an earlier trace store there is replaced, "
                  "any other file refused")
      ->required();
  cmd->add_option("--keep-parts", o->keep_parts,
                  "Keep the per-process stores in this directory (created if missing)");
  cmd->add_flag("--no-nvtx", o->no_nvtx,
                "Do not route NVTX ranges to CUPTI (no NCCL call sizes, no NVTX lanes)");
  cmd->add_option("--wait", o->wait,
                  "What to wait for, as nsys profile --wait: all (the default), every process the "
                  "command starts; primary, the command alone: the processes it leaves running "
                  "run on, unsignalled, and the stores they still write are not gathered (stderr "
                  "names them). An interrupt reaches them all either way, and they are then "
                  "waited for")
      ->check(CLI::IsMember({"all", "primary"}));
  cmd->add_option("--capture-range", o->capture_range,
                  "What to record, as nsys profile --capture-range: none (the default), the whole "
                  "run; cudaProfilerApi, only between the program's cudaProfilerStart and "
                  "cudaProfilerStop calls (torch.cuda.profiler.start() and stop(), Megatron-LM's "
                  "--profile), each process's own; GPU work launched inside and run after the "
                  "stop is kept")
      ->check(CLI::IsMember({"none", "cudaProfilerApi"}));
  cmd->add_option("--plan", o->plan_file,
                  "The plan the program runs (a plan JSON document, as `clusterscope plan --plan` "
                  "reads): the planner's prediction of it goes into the run store, and `trace "
                  "stats` and the app hold the run against it, part by part (mark the steps with "
                  "NVTX ranges, step N)");
  cmd->add_option("command", o->command, "The command to run and its arguments, after --")
      ->required();
  cmd->callback([o, &ctx] { run(*o, ctx); });
}

}  // namespace cs::cli
