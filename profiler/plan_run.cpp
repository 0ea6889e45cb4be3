#include "profiler/plan_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/format.h"
#include "core/host_probe.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/model_json.h"
#include "core/trace_writer.h"
#include "core/workload.h"
#include "profiler/hostfile.h"
#include "profiler/worker/gpt_model.h"
#include "profiler/worker_shape.h"

namespace cs::launch {

namespace {

namespace fs = std::filesystem;

std::string format_float(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", v);
  return buffer;
}

}  // namespace

Result<double> worker_bucket_kib(const Plan& plan) {
  const ParallelPlan& p = plan.parallel;
  auto shape = worker_shape_for(plan.workload, p.tp, p.pp, p.virtual_stages);
  if (!shape) return Error{shape.message()};
  double scaled_params = 0;
  for (const worker::ParamInfo& info : worker::gpt_parameter_layout(shape->config, {}))
    scaled_params += static_cast<double>(info.numel());
  const double plan_bucket_kib = p.bucket_mib * 1024;
  const double full_params = parameter_count(plan.workload);
  return full_params > 0
             ? std::clamp(plan_bucket_kib * scaled_params / full_params, 16.0, plan_bucket_kib)
             : plan_bucket_kib;
}

LocalCapacity local_capacity() {
  LocalCapacity c;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  c.cores = cores > 0 ? static_cast<int>(cores) : 1;
  // MemAvailable: what can be taken without swapping (free pages and the
  // page cache that can be dropped); free pages alone where it is not given.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      c.available_memory_bytes = kib * 1024;
      return c;
    }
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) c.available_memory_bytes = static_cast<double>(pages) * page;
  return c;
}

Result<double> cpu_rank_memory_bytes(const Plan& plan) {
  const ParallelPlan& p = plan.parallel;
  const int chunks = std::max(1, p.virtual_stages);
  auto shape = worker_shape_for(plan.workload, p.tp, p.pp, chunks);
  if (!shape) return Error{shape.message()};
  // The first stage's share (each of its chunks: virtual stages 0, pp, ...),
  // which holds the embeddings, and its largest group of parameters (what
  // ZeRO-3 gathers at once).
  double held = 0, largest_group = 0;
  for (int c = 0; c < chunks; ++c) {
    const auto layout =
        worker::gpt_parameter_layout(shape->config, {p.tp, 0, p.pp * chunks, c * p.pp});
    for (const worker::ParamInfo& info : layout)
      held += static_cast<double>(info.numel());
    for (const worker::ParameterGroup& g : worker::gpt_parameter_groups(layout))
      largest_group = std::max(largest_group, static_cast<double>(g.end - g.begin));
  }
  // fp32 weights and gradients, and AdamW's two moments (the moments split
  // over dp from ZeRO-1 on, the gradients from ZeRO-2 on, staged there in
  // two buckets of at most the whole model, the weights from ZeRO-3 on,
  // each group gathered into one of two buffers, the gradients staged a
  // group a bucket); the activations and the other buffers come on top.
  const int dp = std::max(1, p.dp);
  const double optimizer = 8.0 / (p.zero_stage >= 1 ? dp : 1);
  double weights = 4.0 * held;
  double gradients = 4.0 * held;
  if (p.zero_stage == 2 && dp > 1) {
    auto bucket_kib = worker_bucket_kib(plan);
    if (!bucket_kib) return Error{bucket_kib.message()};
    gradients = 4.0 * held / dp + 2 * std::min(*bucket_kib * 1024, 4.0 * held);
  } else if (p.zero_stage >= 3 && dp > 1) {
    weights = 4.0 * held / dp + 2 * 4.0 * largest_group;
    gradients = 4.0 * held / dp + 2 * 4.0 * largest_group;
  }
  return weights + held * optimizer + gradients + kCpuRankProcessBytes;
}

namespace {

// The ranks of `plan` the CPU engine runs with `backend`; 0 where the CUDA
// engine runs.
long long cpu_engine_ranks(const Plan& plan, const std::string& backend) {
  if (backend == "cuda") return 0;
  if (backend == "auto" && !probe_host().gpus.empty()) return 0;
  return static_cast<long long>(plan.parallel.dp) * plan.parallel.tp * plan.parallel.pp;
}

std::string ranks_on_cores(long long ranks, int cores) {
  return std::to_string(ranks) + " ranks of the CPU engine on this machine's " +
         std::to_string(cores) + (cores == 1 ? " core" : " cores");
}

}  // namespace

std::string local_cpu_ranks_warning(const Plan& plan, const std::string& backend,
                                    const LocalCapacity& capacity) {
  const long long ranks = cpu_engine_ranks(plan, backend);
  const int cores = std::max(1, capacity.cores);
  if (ranks <= cores || ranks > static_cast<long long>(cores) * kMaxRanksPerCore) return {};
  return ranks_on_cores(ranks, cores) +
         ": more ranks than cores, so they take turns on the cores, and each step takes longer "
         "than it would with a core a rank (at most " +
         std::to_string(static_cast<long long>(cores) * kMaxRanksPerCore) + " start here)";
}

Status check_local_cpu_ranks(const Plan& plan, const std::string& backend,
                             const LocalCapacity& capacity) {
  const long long ranks = cpu_engine_ranks(plan, backend);
  if (ranks == 0) return {};
  const int cores = std::max(1, capacity.cores);
  const long long most = static_cast<long long>(cores) * kMaxRanksPerCore;
  const std::string override_hint =
      ": run fewer, or start them anyway with clusterscope run --oversubscribe";
  if (ranks > most) {
    return Error{ranks_on_cores(ranks, cores) + ": at most " + std::to_string(most) +
                 " run here (" + std::to_string(kMaxRanksPerCore) +
                 " a core; more only wait for the cores, and mpirun starts them slowly)" +
                 override_hint};
  }
  if (capacity.available_memory_bytes > 0) {
    auto per_rank = cpu_rank_memory_bytes(plan);
    if (!per_rank) return per_rank.error();
    const double needed = *per_rank * static_cast<double>(ranks);
    if (needed > capacity.available_memory_bytes) {
      return Error{std::to_string(ranks) + " ranks of the CPU engine need at least " +
                   format_bytes(needed) + " of memory (" + format_bytes(*per_rank) +
                   " a rank: its share of the model's weights, gradients and optimizer state, "
                   "and its process), and this machine has " +
                   format_bytes(capacity.available_memory_bytes) + " available" + override_hint};
    }
  }
  return {};
}

Result<PlanRun> plan_run(const Plan& plan, const PlanRunOptions& o) {
  PlanRun run;
  run.backend = o.backend;
  // The hosts first: a hostfile that does not read is the first thing to fix.
  std::vector<Host> hosts;
  if (o.placement == Placement::hostfile) {
    auto read = read_hostfile(o.hostfile);
    if (!read) return read.error();
    hosts = std::move(*read);
  }
  if (run.backend == "auto" && o.placement != Placement::local) {
    // Decided here, a GPU partition's job trained on the CPU engine because
    // the login node has no GPU.
    return Error{
        std::string("backend auto decides on this machine, but the ranks run ") +
        (o.placement == Placement::slurm ? "on the Slurm job's nodes" : "on the hostfile's hosts") +
        (o.settings_are_flags ? ": name their engine with --backend cpu or --backend cuda"
                              : ": choose their engine, CPU or CUDA, under Engine")};
  }
  if (run.backend == "cuda" && o.placement == Placement::local && o.write_plan) {
    // Refused here in one sentence, not by every rank after mpirun started.
    const HostInfo host = probe_host();
    if (host.gpus.empty())
      return Error{"backend cuda: " + host.gpu_status +
                   (o.settings_are_flags ? ": run with --backend cpu (or auto)"
                                         : ": choose the CPU engine (or Automatic) under Engine")};
  }
  if (run.backend == "auto") {
    const HostInfo host = probe_host();
    if (!host.gpus.empty()) {
      run.backend = "cuda";
      run.notes.push_back("backend auto: " + host.gpu_status + ": the CUDA engine runs");
    } else {
      run.backend = "cpu";
      run.notes.push_back("backend auto: no GPU here (" + host.gpu_status +
                          "): the CPU engine runs (OpenBLAS + MPI)");
    }
  } else if (run.backend != "cpu" && run.backend != "cuda") {
    return Error{"backend: \"" + run.backend + "\" is not cpu, cuda or auto"};
  }
  const ParallelPlan& p = plan.parallel;
  // What no engine can run, whatever the cluster: the app launched a plan
  // its panel flagged (tp = 10^6 ran it out of memory; dp = 2^31 - 1
  // wrapped the rank count and read "a run needs at least one rank").
  if (const auto problems = check_parallel_plan(p); !problems.empty())
    return Error{"/parallel" + problems.front().pointer + ": " + problems.front().message};
  constexpr long long kMaxRunRanks = 1 << 20;
  if (const long long world = static_cast<long long>(p.dp) * p.tp * p.pp; world > kMaxRunRanks) {
    return Error{"/parallel: dp x tp x pp = " + std::to_string(world) +
                 " ranks; a run starts at most " + std::to_string(kMaxRunRanks)};
  }
  // check_parallel_plan holds virtual_stages > 1 to the interleaved schedule.
  const bool interleaved = p.virtual_stages > 1;
  if (interleaved) {
    const long long micro_batches = p.global_batch / p.samples_per_micro_step();
    if (micro_batches % p.pp != 0) {
      return Error{
          "/parallel/virtual_stages: the interleaved schedule needs the micro-batches "
          "per step (" +
          std::to_string(micro_batches) + ") to be a multiple of pp (" + std::to_string(p.pp) +
          ")"};
    }
    if (run.backend == "cuda") {
      run.notes.push_back(
          "the CUDA engine runs the interleaved pipeline schedule as plain 1F1B, on the same "
          "model (the CPU engine runs it interleaved)");
    }
  }
  const Precision compute = plan.precision.compute;
  std::string precision(to_string(compute));
  if (run.backend == "cpu") {
    if (compute == Precision::tf32) {
      run.notes.push_back("tf32 has no meaning on the CPU: it computes in fp32");
      precision = "fp32";
    } else if (compute != Precision::fp32 && compute != Precision::bf16) {
      return Error{
          "/precision/compute: the CPU engine computes in fp32 or bf16; the plan asks "
          "for " +
          precision};
    }
  }
  if (o.steps < 1) return Error{"steps: must be >= 1 (got " + std::to_string(o.steps) + ")"};
  if (o.run_store.empty()) return Error{"run store: no path given"};

  // The plan's model scaled to this machine, with the data-parallel buckets
  // scaled alike.
  auto shape = worker_shape_for(plan.workload, p.tp, p.pp, p.virtual_stages);
  if (!shape) return Error{shape.message()};
  if (!shape->scaled.empty()) {
    const ShapeLimits limits;
    run.notes.push_back("the model is reshaped to what the engines run (at most hidden " +
                        std::to_string(limits.max_hidden) + ", " +
                        std::to_string(limits.max_layers) + " layers, sequence " +
                        std::to_string(limits.max_seq) + "): " + shape->scaled);
  }
  {
    // What the engines' GPT lacks of the plan's model, said as the reshape
    // is (the run trained them otherwise without a word).
    const TransformerShape& t = plan.workload.transformer;
    std::string unlike;
    if (t.tied_embeddings)
      unlike = "an LM head of its own (the plan's model ties it to the token embedding)";
    if (t.dropout) {
      unlike += std::string(unlike.empty() ? "" : " and ") +
                "no dropout (the plan's model drops out after attention and the MLP)";
    }
    if (!unlike.empty())
      run.notes.push_back("the engines train " + unlike + "; the prediction is of what they train");
  }
  auto bucket = worker_bucket_kib(plan);
  if (!bucket) return bucket.error();
  const double bucket_kib = *bucket;
  if (p.dp > 1 && bucket_kib < p.bucket_mib * 1024) {
    run.notes.push_back("data-parallel buckets of " + format_bytes(bucket_kib * 1024) +
                        ", scaled with the model from the plan's " +
                        format_bytes(p.bucket_mib * 1024 * 1024) + " (about as many buckets)");
  }

  // Ranks this machine cannot run side by side: refused before mpirun is
  // asked to start them.
  if (run.backend == "cpu" && o.placement == Placement::local && o.write_plan && !o.oversubscribe) {
    if (Status s = check_local_cpu_ranks(plan, run.backend); !s) return s.error();
  }

  const std::string out = fs::absolute(o.run_store).lexically_normal().string();
  if (Status s = trace::check_store_path(out); !s) return s.error();
  if (Status s = check_run_store_free(out); !s) return s.error();
  std::error_code ec;
  if (const fs::path parent = fs::path(out).parent_path(); !parent.empty())
    fs::create_directories(parent, ec);
  run.plan_path = run_store_stem(out) + ".plan.json";
  // The plan beside the store replaces an earlier run's plan, not a file of
  // the user's that only shares the name.
  if (o.write_plan && fs::exists(run.plan_path, ec) && fs::file_size(run.plan_path, ec) > 0) {
    auto earlier = read_json_file(run.plan_path);
    if (!earlier || !earlier->is_object() || !earlier->contains("parallel") ||
        !earlier->contains("workload")) {
      return Error{run.plan_path + ": the run writes its plan there, and the file holds "
                   "something else: remove it or give --out another name"};
    }
  }

  const int ranks = p.world_size();
  RunSpec& spec = run.spec;
  // A reshaped model says so: "GPT-2 124M on 2 ranks" titled a run of a
  // few million parameters. The title reaches each worker as one argument,
  // which Linux holds to 128 KiB ("mpirun: Argument list too long", with
  // nothing to say why): a title made of the workload's name is shortened,
  // a title given refused.
  constexpr std::size_t kNameBytes = 4096, kArgumentBytes = 128 * 1024 - 1;
  std::string name = plan.workload.display_name;
  if (name.size() > kNameBytes) {
    std::size_t cut = kNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80)
      --cut;  // whole characters
    name = name.substr(0, cut) + "...";
  }
  const std::string model =
      shape->scaled.empty() ? name
                            : name + ", scaled to " + std::to_string(shape->config.layers) +
                                  " layers of hidden " + std::to_string(shape->config.hidden) + ",";
  spec.title = o.title.empty()
                   ? model + " on " + std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks")
                   : o.title;
  if (spec.title.size() > kArgumentBytes) {
    return Error{"--title: " + std::to_string(spec.title.size()) +
                 " bytes, more than a program argument holds (" + std::to_string(kArgumentBytes) +
                 "): give a shorter title"};
  }
  if (o.worker.empty()) {
    const auto worker = find_worker();
    if (!worker) return Error{"clusterscope-worker was not found beside this program or on PATH"};
    spec.worker = *worker;
  } else {
    spec.worker = o.worker;
  }
  spec.mpirun = o.mpirun;
  // mpirun starts the ranks (here, or on a hostfile's hosts): without it,
  // the plan was written beside the store of a run that never started.
  if (o.placement != Placement::slurm && o.write_plan) {
    if (Status s = check_mpirun_found(spec.mpirun); !s) return s.error();
  }
  spec.worker_args = {"--plan",         run.plan_path,
                      "--backend",      run.backend,
                      "--dp",           std::to_string(p.dp),
                      "--tp",           std::to_string(p.tp),
                      "--pp",           std::to_string(p.pp),
                      "--zero",         std::to_string(p.zero_stage),
                      "--recompute",    std::string(to_string(p.recompute)),
                      "--micro-batch",  std::to_string(p.micro_batch),
                      "--global-batch", std::to_string(p.global_batch),
                      "--precision",    precision,
                      "--steps",        std::to_string(o.steps),
                      "--lr",           format_float(o.lr),
                      "--seed",         std::to_string(o.seed),
                      "--bucket-kib",   format_float(bucket_kib)};
  // The workers reduce gradients during backward unless the plan says after.
  if (!p.overlap_grad_reduce) spec.worker_args.push_back("--no-overlap");
  if (p.sequence_parallel && p.tp > 1) spec.worker_args.push_back("--sequence-parallel");
  if (interleaved && run.backend == "cpu") {
    spec.worker_args.insert(spec.worker_args.end(),
                            {"--virtual-stages", std::to_string(p.virtual_stages)});
  } else if (interleaved) {
    // The model the plan's chunks split (its layers a multiple of pp x
    // virtual stages), though 1F1B runs it.
    spec.worker_args.insert(spec.worker_args.end(),
                            {"--layers", std::to_string(shape->config.layers)});
  }
  if (o.threads > 0) {
    spec.worker_args.push_back("--threads");
    spec.worker_args.push_back(std::to_string(o.threads));
  }
  spec.ranks = ranks;
  spec.run_store = out;
  spec.hang_timeout = o.hang_timeout;
  spec.plan_json = json_text(to_json(plan));
  spec.command_line = o.command_line;
  spec.placement = o.placement;
  spec.hostfile = o.hostfile;
  spec.hosts = std::move(hosts);
  spec.slurm = o.slurm;
  if (spec.placement == Placement::slurm && spec.slurm.after_command.empty()) {
    // Inside the job, after srun: the rank stores merged into the run store,
    // whoever submitted it (the app made a job that left only rank stores).
    const auto cli = find_beside_or_on_path("clusterscope");
    if (!cli) {
      return Error{
          "clusterscope (which merges the Slurm job's rank stores) was not found beside "
          "this program or on PATH"};
    }
    spec.slurm.after_command = {
        *cli, "run",     "--merge-only",        "--plan",  run.plan_path, "--out",
        out,  "--ranks", std::to_string(ranks), "--title", spec.title};
  }
  // A Slurm script the launcher would refuse (a value it cannot quote) is
  // refused here, before the plan is written beside the store (a refused
  // job left RUN.plan.json behind).
  if (spec.placement == Placement::slurm) {
    if (auto script = slurm_script(spec); !script) return script.error();
  }
  if (o.write_plan) {
    // The launcher's refusals of the rank stores' paths first: a refused run
    // left its plan there, over an earlier run's.
    if (Status s = check_rank_store_paths(out, ranks); !s) return s.error();
    // Rank stores of an earlier run of more ranks stay beside this run's,
    // said (a `--merge-only` reading the folder would take them as this run's).
    std::vector<std::string> earlier;
    for (const auto& entry : fs::directory_iterator(run_store_stem(out) + ".ranks", ec)) {
      const auto rank = rank_of_store_file(entry.path().filename().string());
      if (rank && *rank >= ranks) earlier.push_back(entry.path().filename().string());
    }
    ec.clear();
    if (!earlier.empty()) {
      std::sort(earlier.begin(), earlier.end());
      std::string names;
      for (const std::string& n : earlier)
        names += (names.empty() ? "" : ", ") + n;
      run.notes.push_back(run_store_stem(out) +
                          ".ranks holds rank stores of an earlier run of more "
                          "ranks (" +
                          names +
                          "), left as they were: remove them before a "
                          "--merge-only of this run");
    }
    // The user's own file, when it is the plan as given, stays as written.
    if (!o.plan_file_is_the_plan) {
      if (Status s = write_json_file(run.plan_path, to_json(plan)); !s) return Error{s.message()};
    }
  }
  return run;
}

}  // namespace cs::launch
