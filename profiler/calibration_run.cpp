#include "profiler/calibration_run.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/format.h"
#include "core/host_name.h"
#include "core/json_text.h"
#include "core/trace_merge.h"
#include "core/trace_writer.h"
#include "profiler/launcher.h"
#include "profiler/plan_run.h"

namespace cs::launch {

namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::int64_t>& values) {
  std::string text;
  for (std::int64_t v : values)
    text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

std::string join(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& v : values)
    text += (text.empty() ? "" : ",") + v;
  return text;
}

std::string strip_db(const std::string& path) {
  return path.size() > 3 && path.ends_with(".db") ? path.substr(0, path.size() - 3) : path;
}

// The parallel layout a phase launches: groups of two in tensor parallelism
// when the world is larger (the all-reduce sweep measures those groups and
// the world), the world as one group otherwise.
std::vector<std::string> layout_args(int ranks) {
  const int tp = ranks > 2 && ranks % 2 == 0 ? 2 : ranks;
  return {"--dp", std::to_string(ranks / tp), "--tp", std::to_string(tp), "--pp", "1"};
}

struct Phase {
  CalibrationPhase info;
  std::vector<std::string> sweeps;
  std::vector<std::string> precisions;  // the GEMM sweep's
};

// The bytes of an element the GEMM sweep stores in `precision`: the
// half-width types in two, the others (fp32, tf32, and fp8 and int8, whose
// operands the engines keep in fp32 and convert) in four.
int sweep_element_bytes(const std::string& precision) {
  return precision == "bf16" || precision == "fp16" ? 2 : 4;
}

}  // namespace

double CalibrationProgress::fraction() const {
  if (phases <= 0) return 0;
  const double within =
      points > 0 ? std::clamp(static_cast<double>(point) / points, 0.0, 1.0) : 0.0;
  return std::clamp((phase + within) / phases, 0.0, 1.0);
}

SlowestRank::SlowestRank(int ranks) : counts_(static_cast<std::size_t>(std::max(ranks, 0)), 0) {}

std::optional<int> SlowestRank::advance(int rank, int count) {
  if (rank < 0 || rank >= static_cast<int>(counts_.size())) return std::nullopt;
  counts_[static_cast<std::size_t>(rank)] = count;
  const int lowest = *std::min_element(counts_.begin(), counts_.end());
  if (lowest <= lowest_) return std::nullopt;
  lowest_ = lowest;
  return lowest;
}

SweepMemory calibration_rank_memory(const CalibrationRunOptions& o, int ranks) {
  SweepMemory most;
  auto consider = [&](double bytes, const std::string& what) {
    if (bytes > most.bytes) most = {bytes, what};
  };
  for (std::int64_t h : o.gemm_sizes) {
    for (const std::string& precision : o.precisions) {
      const double set = layer_gemm_set_bytes(sweep_element_bytes(precision), h, 4 * h);
      // The copies of the widest GEMM's operands, and the fp32 values its
      // largest operand is filled from.
      consider(set * layer_gemm_set_copies(set) + 16.0 * static_cast<double>(h) * h,
               "the layer GEMMs of width " + std::to_string(h) + " in " + precision);
    }
  }
  for (std::int64_t b : o.buffer_sizes)
    consider(2.0 * static_cast<double>(b), "the bandwidth buffers of " + format_bytes(b));
  if (ranks > 1) {
    for (std::int64_t m : o.message_sizes) {
      consider(2.0 * static_cast<double>(m) +
                   (o.backend == "cpu" ? static_cast<double>(kColdSweepEvictBytes) : 0),
               "the all-reduce messages of " + format_bytes(m));
    }
  }
  return most;
}

Status check_calibration_memory(const CalibrationRunOptions& o, double host_available_bytes) {
  const std::string smaller =
      ": sweep smaller sizes (calibrate --gemm-sizes, --buffer-sizes, --message-sizes)";
  if (o.backend == "cuda") {
    if (o.gpu_memory_bytes <= 0) return {};
    for (int ranks : o.rank_counts) {
      const SweepMemory rank = calibration_rank_memory(o, ranks);
      if (rank.bytes > o.gpu_memory_bytes) {
        return Error{"calibration: " + rank.what + " need about " + format_bytes(rank.bytes) +
                     " of a GPU's memory, and the GPU here has " +
                     format_bytes(o.gpu_memory_bytes) + smaller + "; nothing was measured"};
      }
    }
    return {};
  }
  if (host_available_bytes <= 0) return {};
  for (int ranks : o.rank_counts) {
    const SweepMemory rank = calibration_rank_memory(o, ranks);
    const double needed = (rank.bytes + kCpuRankProcessBytes) * ranks;
    if (needed > host_available_bytes) {
      return Error{"calibration: " + std::to_string(ranks) +
                   (ranks == 1 ? " rank of the CPU engine needs about "
                               : " ranks of the CPU engine need about ") +
                   format_bytes(needed) + " of memory (" +
                   format_bytes(rank.bytes + kCpuRankProcessBytes) + " a rank, most of it for " +
                   rank.what + "), and this machine has " + format_bytes(host_available_bytes) +
                   " available" + smaller + " or fewer ranks (--ranks); nothing was measured"};
    }
  }
  return {};
}

Result<CalibrationRecord> record_calibration(
    const CalibrationRunOptions& o, const std::function<void(const CalibrationProgress&)>& progress,
    const StopRequest* stop) {
  const auto started = std::chrono::steady_clock::now();
  if (o.store.empty()) return Error{"calibration: no store to write"};
  if (o.rank_counts.empty()) return Error{"calibration: no rank count to measure"};
  if (o.backend != "cpu" && o.backend != "cuda") {
    return Error{"calibration: backend \"" + o.backend + "\": cpu or cuda"};
  }
  // The store the phases merge into, checked before measuring (a folder or
  // a text file there failed the merge after the whole sweep).
  if (Status s = trace::check_store_path(o.store); !s)
    return Error{s.message() + "; nothing was measured"};
  std::string worker = o.worker;
  if (worker.empty()) {
    auto found = find_worker();
    if (!found) return Error{"clusterscope-worker was not found beside this program or on PATH"};
    worker = *found;
  }
  for (auto r = o.rank_counts.begin(); r != o.rank_counts.end(); ++r) {
    if (*r < 1)
      return Error{"calibration: rank counts must be >= 1 (got " + std::to_string(*r) + ")"};
    // Measured twice, the same configuration took twice the time and two
    // phases of one preset.
    if (std::find(o.rank_counts.begin(), r, *r) != r) {
      return Error{"calibration: the rank count " + std::to_string(*r) +
                   " is given twice; each is measured once: give it once"};
    }
  }
  if (Status s = check_calibration_memory(o, local_capacity().available_memory_bytes); !s)
    return s.error();

  // The phases: per rank count one launch (CPU: every precision's GEMMs in
  // it), per precision one more on CUDA, whose backend computes in one.
  std::vector<Phase> phases;
  int next_rank = 0;
  for (int ranks : o.rank_counts) {
    std::vector<std::vector<std::string>> precision_sets;
    if (o.backend == "cpu") {
      precision_sets.push_back(o.precisions.empty() ? std::vector<std::string>{"fp32"}
                                                    : o.precisions);
    } else {
      for (const std::string& p : o.precisions)
        precision_sets.push_back({p});
    }
    for (std::size_t i = 0; i < precision_sets.size(); ++i) {
      Phase ph;
      ph.info.ranks = ranks;
      ph.info.first_rank = next_rank;
      ph.info.threads = o.threads;
      ph.info.precision = precision_sets[i].front();
      ph.precisions = precision_sets[i];
      ph.sweeps = {"layer_gemm"};
      if (i == 0) {
        ph.sweeps.push_back("bandwidth");
        if (o.ops) ph.sweeps.push_back("ops");
        if (ranks > 1) ph.sweeps.push_back("all_reduce");
      }
      next_rank += ranks;
      phases.push_back(std::move(ph));
    }
  }

  CalibrationRecord record;
  record.store = o.store;
  record.info.engine = o.backend;
  record.info.host = o.host.empty() ? this_host_name() : o.host;
  record.info.host_memory_bytes = o.host_memory_bytes;
  record.info.cpu_cores = o.cpu_cores;

  std::vector<std::string> phase_stores;
  auto cleanup = [&] {
    std::error_code ec;
    for (const std::string& s : phase_stores) {
      fs::remove(s, ec);
      fs::remove_all(strip_db(s) + ".ranks", ec);
    }
  };
  // A failure keeps what the phases recorded, and says where: removed, the
  // error named a rank store that was no longer there.
  auto kept = [&] {
    std::string out;
    std::error_code ec;
    for (const std::string& s : phase_stores) {
      for (const std::string& path : {s, strip_db(s) + ".ranks"}) {
        if (fs::exists(path, ec) && !(fs::is_directory(path, ec) && fs::is_empty(path, ec)))
          out += (out.empty() ? "" : ", ") + path;
      }
    }
    return out.empty() ? std::string("; nothing it recorded was kept")
                       : "; what it recorded is kept in " + out;
  };
  const int total = static_cast<int>(phases.size());
  for (int i = 0; i < total; ++i) {
    const Phase& ph = phases[static_cast<std::size_t>(i)];
    // The phase's points: the slowest rank's samples (every rank measures
    // the same points in turn), of the count its ranks announced.
    SlowestRank slowest(ph.info.ranks);
    int point = 0, points = 0;
    auto say = [&](const std::string& text) {
      if (progress)
        progress({.phase = i, .phases = total, .point = point, .points = points, .text = text});
    };
    RunSpec spec;
    std::string sweep_titles;
    for (const std::string& sweep : ph.sweeps)
      sweep_titles += (sweep_titles.empty() ? "" : ", ") + sweep_title(sweep, join(ph.precisions));
    spec.title = o.title + ": " + std::to_string(ph.info.ranks) +
                 (ph.info.ranks == 1 ? " rank, " : " ranks, ") + sweep_titles;
    spec.worker = worker;
    spec.mpirun = o.mpirun;
    spec.ranks = ph.info.ranks;
    spec.hang_timeout = o.hang_timeout;
    spec.run_store = strip_db(o.store) + ".phase" + std::to_string(i) + ".db";
    spec.worker_args = {"--backend",
                        o.backend,
                        "--precision",
                        ph.info.precision,
                        "--sweep",
                        join(ph.sweeps),
                        "--sweep-seconds",
                        std::to_string(o.seconds_per_size),
                        "--gemm-sizes",
                        join(o.gemm_sizes),
                        "--buffer-sizes",
                        join(o.buffer_sizes),
                        "--message-sizes",
                        join(o.message_sizes),
                        "--trace-rank-offset",
                        std::to_string(ph.info.first_rank)};
    if (o.backend == "cpu") {
      spec.worker_args.push_back("--sweep-precisions");
      spec.worker_args.push_back(join(ph.precisions));
      if (o.threads > 0) {
        spec.worker_args.push_back("--threads");
        spec.worker_args.push_back(std::to_string(o.threads));
      }
    }
    for (const std::string& a : layout_args(ph.info.ranks))
      spec.worker_args.push_back(a);
    say("phase " + std::to_string(i + 1) + "/" + std::to_string(total) + ": " + spec.title);

    const std::string phase_text = "phase " + std::to_string(i + 1) + "/" + std::to_string(total) +
                                   ": " + std::to_string(ph.info.ranks) +
                                   (ph.info.ranks == 1 ? " rank, " : " ranks, ");
    // Events come on the launcher's one thread.
    Launcher launcher(spec, [&](const LaunchEvent& e) {
      if (e.kind == LaunchEvent::Kind::rank_failed || e.kind == LaunchEvent::Kind::message) {
        if (!e.text.empty()) say(e.text);
      }
      if (e.kind != LaunchEvent::Kind::sample) return;
      points = std::max(points, e.steps);
      const std::optional<int> done = slowest.advance(e.rank, e.step);
      if (!done) return;
      point = *done;
      if (progress) {
        progress({.phase = i,
                  .phases = total,
                  .point = point,
                  .points = points,
                  .measured = true,
                  .sweep = e.sweep,
                  .text = phase_text + e.sweep + ": " + e.text + " (" + std::to_string(point) +
                          (points > 0 ? " of " + std::to_string(points) : "") + ")"});
      }
    });
    // Refused, the phase's paths are not this calibration's: what is there (a
    // user's file, another calibration's live stores) was removed with them.
    if (Status s = launcher.start(); !s)
      return Error{"calibration phase " + std::to_string(i + 1) + ": " + s.message() + kept()};
    phase_stores.push_back(spec.run_store);
    record.commands.push_back(command_text(mpirun_command(spec)));
    const RunReport report = launcher.wait(stop);
    if (stop && stop->requested()) {
      cleanup();
      record.cancelled = true;
      return Error{"calibration cancelled during phase " + std::to_string(i + 1) + " of " +
                   std::to_string(total) +
                   (report.killed ? " (its ranks were killed on a second interrupt)" : "")};
    }
    if (report.outcome != Outcome::completed || report.run_store.empty()) {
      return Error{"calibration phase " + std::to_string(i + 1) + " (" + spec.title +
                   "): " + failure_text(report) + kept()};
    }
    record.info.phases.push_back(ph.info);
  }

  if (record.info.device.empty()) {
    record.info.device = o.backend == "cpu" ? "CPU (" + record.info.host + ")" : "GPU";
  }
  trace::MergeOptions merge;
  merge.run.title = o.title + " of " + record.info.host;
  merge.run.source = "calibration";
  merge.meta = {{std::string(kCalibrationMetaKey), calibration_meta_json(record.info)},
                {"calibration_commands", json_text(nlohmann::json(record.commands))}};
  // Phases ran one after another on one host: one clock, no shift.
  merge.alignment = trace::ClockAlignment::none;
  merge.writers_ended = true;  // every phase's ranks have exited
  merge.ranks_of_one_run = false;  // 1, 2 and 4 ranks, each phase a run of its own
  auto merged = trace::merge_stores(phase_stores, o.store, merge);
  if (!merged) {
    return Error{"calibration: merging the phases into " + o.store + ": " + merged.message() +
                 kept()};
  }
  cleanup();
  record.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (progress) progress({.phase = total, .phases = total, .text = "calibration store " + o.store});
  return record;
}

}  // namespace cs::launch
