// clusterscope run [--plan FILE | --cluster C --model M --dp --tp --pp ...]
//                  [--backend cpu|cuda|auto] [--ranks N] [--steps N] [--out RUN.db]
//                  [--hostfile FILE | --slurm ...] [--hang-timeout S] [--json]
//
// Trains the plan for real: one worker per rank through mpirun (or a Slurm
// batch script), progress on the terminal, and at the end the run store and
// its per-rank compute / communication / overlap summary.

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "app/calibration/calibration_workflow.h"
#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/output_folder.h"
#include "app/cli/run_summary.h"
#include "app/cli/signal_cancel.h"
#include "app/cli/text_table.h"
#include "core/calibration_meta.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/model_json.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"
#include "core/workload.h"
#include "profiler/launcher.h"
#include "profiler/plan_run.h"

namespace cs::cli {

namespace {

namespace fs = std::filesystem;
using launch::LaunchEvent;

// The plan a run trains: a plan file, or a cluster, a model and the parallel
// and precision flags (flags override the file). One group, so that it can
// give way to the planner's shared plan options.
struct RunPlanOptions {
  std::string plan_file;
  ClusterOptions cluster;
  ModelOptions model;
  std::optional<int> dp, tp, pp, virtual_stages, zero, micro_batch, global_batch;
  std::string precision;
  std::string recompute;
  bool sequence_parallel = false;

  void add_to(CLI::App& command) {
    command.add_option("--plan", plan_file,
                       "Plan JSON file (cluster, workload, parallel, precision; - reads standard "
                       "input)");
    cluster.add_to(command, false);
    model.add_to(command);
    command.add_option("--dp", dp, "Data-parallel replicas")->check(positive_int());
    command.add_option("--tp", tp, "Tensor-parallel degree")->check(positive_int());
    command.add_option("--pp", pp, "Pipeline stages")->check(positive_int());
    command
        .add_option("--virtual-stages", virtual_stages,
                    "Model chunks per pipeline rank (> 1: Megatron's interleaved schedule; the "
                    "CUDA engine runs it as 1F1B)")
        ->check(positive_int());
    command.add_option("--zero", zero, "ZeRO stage")->check(integer_between(0, 3));
    command.add_option("--micro-batch", micro_batch, "Sequences per micro-batch")
        ->check(positive_int());
    command.add_option("--global-batch", global_batch, "Sequences per step, all replicas")
        ->check(positive_int());
    command
        .add_option("--recompute", recompute,
                    "Activation recomputation: none, selective (attention scores) or full "
                    "(each layer)")
        ->check(CLI::IsMember({"none", "selective", "full"}));
    command.add_flag("--sequence-parallel", sequence_parallel,
                     "Megatron's sequence parallelism: layer norms on a tp-th of the tokens "
                     "(with tp > 1)");
    command.add_option("--precision", precision,
                       "Compute precision: fp32 or bf16 (CPU); tf32, fp16, fp8 too on CUDA")
        ->check(precision_name());
  }

  // `ranks` fills dp when only the rank count is given.
  Plan resolve(const PresetCatalog& catalog, std::optional<int> ranks) const {
    Plan plan;
    if (!plan_file.empty()) {
      auto j = take(read_document(plan_file, "--plan"));
      plan = take(plan_from_json(j, document_name(plan_file), &catalog));
      apply_over_document(plan, cluster, model, catalog);
    } else {
      ClusterOptions c = cluster;
      if (c.cluster.empty() && c.gpu.empty()) c.cluster = std::string(kThisMachine);
      plan.cluster = c.resolve(catalog);
      ModelOptions m = model;
      if (!m.given()) m.model = "gpt2-small";
      plan.workload = m.resolve(catalog);
      plan.precision = PrecisionPlan::for_compute(Precision::fp32);
      plan.parallel.global_batch = 0;
    }
    ParallelPlan& p = plan.parallel;
    if (tp) p.tp = *tp;
    if (pp) p.pp = *pp;
    if (dp) {
      p.dp = *dp;
    } else if (ranks && plan_file.empty()) {
      if (*ranks % (p.tp * p.pp) != 0) {
        throw CliError("--ranks " + std::to_string(*ranks) +
                       " is not a multiple of tp x pp = " + std::to_string(p.tp * p.pp));
      }
      p.dp = *ranks / (p.tp * p.pp);
    }
    if (virtual_stages) {
      p.virtual_stages = *virtual_stages;
      p.schedule =
          *virtual_stages > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
    }
    if (zero) p.zero_stage = *zero;
    if (!recompute.empty()) p.recompute = recompute_from_string(recompute).value();
    if (sequence_parallel) p.sequence_parallel = true;
    if (micro_batch) p.micro_batch = *micro_batch;
    if (global_batch) {
      p.global_batch = *global_batch;
    } else if (p.global_batch == 0 || dp || micro_batch) {
      if (p.global_batch == 0 || p.global_batch % p.samples_per_micro_step() != 0) {
        p.global_batch = samples_per_step(p);
      }
    }
    if (!precision.empty()) {
      const auto parsed = precision_from_string(precision);
      if (!parsed) throw UsageError("--precision: unknown precision \"" + precision + "\"");
      plan.precision = PrecisionPlan::for_compute(*parsed);
    }
    // The same rules as a plan file.
    return take(plan_from_json(
        to_json(plan), plan_file.empty() ? "command line" : document_name(plan_file), &catalog));
  }
};

struct RunOptions {
  RunPlanOptions plan;
  std::string backend = "auto";
  std::optional<int> ranks;
  int steps = 20;
  std::string out;
  std::string hostfile;
  bool slurm = false;
  launch::SlurmOptions slurm_options;
  double hang_timeout_s = 300;
  std::string title;
  double lr = 1e-3;
  std::uint64_t seed = 1234;
  bool keep_rank_stores = false;
  int threads = 0;  // BLAS threads per rank (CPU); 0: the worker's default
  bool merge_only = false;
  bool oversubscribe = false;  // past launch::check_local_cpu_ranks
  bool json = false;
};

// The command as the user typed it, for the run store.
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  std::string arg;
  while (std::getline(in, arg, '\0'))
    argv.push_back(arg);
  return launch::command_text(argv);
}

std::string default_store_name() {
  const std::time_t now = std::time(nullptr);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "run-%Y%m%d-%H%M%S.db", std::localtime(&now));
  return buffer;
}

std::string format_eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  const long s = std::lround(seconds);
  char buffer[32];
  if (s >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  }
  return buffer;
}

// Progress from the launcher's events: a bar with an ETA on a terminal,
// plain lines otherwise. Events arrive on the launcher's thread.
class ProgressPrinter {
 public:
  ProgressPrinter(int ranks, int steps, bool terminal, bool quiet)
      : steps_(steps), terminal_(terminal), quiet_(quiet), rank_steps_(ranks, -1) {}

  void on_event(const LaunchEvent& e) {
    std::lock_guard lock(mutex_);
    if (quiet_) return;
    switch (e.kind) {
      case LaunchEvent::Kind::step:
        on_step(e);
        break;
      case LaunchEvent::Kind::started:
        line("running: " + e.text);
        break;
      case LaunchEvent::Kind::rank_started:
        if (!terminal_) line(e.text);
        break;
      case LaunchEvent::Kind::rank_done:
      case LaunchEvent::Kind::sample:  // a calibration's, not a run's
        break;
      case LaunchEvent::Kind::finished:
        end_bar();
        break;
      default:
        line(e.text);
        break;
    }
  }

  void end_bar() {
    if (bar_shown_) std::cerr << '\n';
    bar_shown_ = false;
  }

 private:
  void on_step(const LaunchEvent& e) {
    if (e.rank >= 0 && e.rank < static_cast<int>(rank_steps_.size())) rank_steps_[e.rank] = e.step;
    if (e.rank == 0) {
      rank0_steps_[e.step] = {e.loss, e.step_seconds, e.tokens_per_second};
      rank0_step_seconds_.push_back(e.step_seconds);
    }
    // A step counts once every rank has finished it; its figures are rank
    // 0's of that step (rank 0 may be steps ahead: its latest were printed
    // against an earlier step).
    int done = rank_steps_.front();
    for (int s : rank_steps_)
      done = std::min(done, s);
    if (done <= shown_step_) return;
    const auto figures_of = rank0_steps_.find(done);
    if (figures_of == rank0_steps_.end()) return;
    shown_step_ = done;
    const StepFigures f = figures_of->second;
    rank0_steps_.erase(rank0_steps_.begin(), std::next(figures_of));
    const double eta = trace::expected_step_seconds(rank0_step_seconds_) * (steps_ - done - 1);
    char figures[160];
    std::snprintf(figures, sizeof figures, "loss %.4f  %s/step  %s tokens/s  ETA %s", f.loss,
                  format_seconds(f.step_seconds).c_str(),
                  format_count(std::round(f.tokens_per_second)).c_str(), format_eta(eta).c_str());
    const std::string count = "step " + std::to_string(done + 1) + "/" + std::to_string(steps_);
    if (!terminal_) {
      std::cerr << count << "  " << figures << '\n';
      return;
    }
    constexpr int kWidth = 30;
    const int filled = steps_ > 0 ? (done + 1) * kWidth / steps_ : kWidth;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::cerr << "\r\033[K[" << bar << "] " << count << "  " << figures << std::flush;
    bar_shown_ = true;
  }

  void line(const std::string& text) {
    if (bar_shown_) std::cerr << "\r\033[K";
    std::cerr << text << '\n';
    if (bar_shown_) bar_shown_ = false;
  }

  std::mutex mutex_;
  int steps_;
  bool terminal_;
  bool quiet_;
  std::vector<int> rank_steps_;
  int shown_step_ = -1;
  struct StepFigures {
    double loss = 0, step_seconds = 0, tokens_per_second = 0;
  };
  std::map<int, StepFigures> rank0_steps_;  // by step, until shown
  bool bar_shown_ = false;
  std::vector<double> rank0_step_seconds_;  // for the ETA
};

nlohmann::json report_json(const launch::RunReport& r, const nlohmann::json& summary,
                           const std::vector<std::string>& notes,
                           const std::map<int, std::int64_t>& kept_of) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const launch::RankStatus& s : r.ranks) {
    const auto kept = kept_of.find(s.rank);
    ranks.push_back({{"rank", s.rank},
                     {"state", std::string(to_string(s.state))},
                     {"host", s.host},
                     {"pid", s.pid},
                     {"last_step", s.step},  // the last step's index, from 0 (-1: none)
                     {"steps_done", s.step + 1},
                     // What its store holds (null: unknown, no store read).
                     {"steps_in_store",
                      kept == kept_of.end() ? nlohmann::json() : nlohmann::json(kept->second)},
                     {"loss", s.loss},
                     {"step_seconds", s.step_seconds},
                     {"tokens_per_second", s.tokens_per_second},
                     {"memory_bytes", s.memory_bytes}});
  }
  nlohmann::json j = {{"outcome", std::string(to_string(r.outcome))},
                      {"message", r.message},
                      {"command", r.command},
                      {"exit_status", r.exit_status},
                      {"run_store", r.run_store},
                      {"merge_note", r.merge_note},
                      {"notes", notes},
                      {"ranks", ranks},
                      {"summary", summary}};
  if (r.failure) {
    j["failure"] = {{"rank", r.failure->rank},
                    {"host", r.failure->host},
                    {"pid", r.failure->pid},
                    {"signal", r.failure->signal},
                    {"exit_code", r.failure->exit_code},
                    {"description", r.failure->description},
                    {"last_lines", r.failure->last_lines}};
  }
  if (!r.hung_ranks.empty()) {
    nlohmann::json hung = nlohmann::json::array();
    for (const launch::HungRank& h : r.hung_ranks) {
      hung.push_back({{"rank", h.rank},
                      {"host", h.host},
                      {"pid", h.pid},
                      {"state", h.state},
                      // null: its store held no op, or could not be read
                      {"last_op", h.last_op.empty() ? nlohmann::json() : nlohmann::json(h.last_op)},
                      {"last_op_end_ns",
                       h.last_op.empty() ? nlohmann::json() : nlohmann::json(h.last_op_end_ns)}});
    }
    j["hung_ranks"] = hung;
  }
  if (!r.slurm_script.empty()) j["slurm_script"] = r.slurm_script;
  if (!r.slurm_job.empty()) j["slurm_job"] = r.slurm_job;
  return j;
}

// Ranks named one by one in the report: past them, the first few, the slowest
// and those that did not finish, and a count of the rest (100,000 ranks made a
// table of 100,000 rows).
constexpr std::size_t kRankRows = 16;

// Steps each rank's store holds, of the ranks that reported steps: its own
// store where it is kept (what the rank committed, also when no run store
// could be written), else the run store. A store that cannot be read now (on
// a full disk SQLite cannot make the file a reader needs beside it) is named
// with the reason, not left out unsaid.
struct StepsKept {
  std::map<int, std::int64_t> kept;   // rank -> steps in its store
  std::map<int, std::string> unread;  // rank -> why its store could not be read
};

StepsKept steps_kept(const launch::RunReport& r, const std::string& run_store) {
  StepsKept out;
  if (run_store.empty()) return out;
  trace::TraceReader::Options as_it_is;
  as_it_is.repair = false;                     // the rank stores stay as the ranks left them
  std::unique_ptr<trace::TraceReader> merged;  // read once a rank's own store is gone
  bool merged_read = false;
  for (const launch::RankStatus& s : r.ranks) {
    if (s.step < 0) continue;  // none reported: nothing to hold the store against
    const std::string path = launch::rank_store_path(run_store, s.rank);
    auto own = trace::TraceReader::open(path, as_it_is);
    if (own) {
      auto steps = (*own)->steps(s.rank);
      if (steps) {
        out.kept[s.rank] = static_cast<std::int64_t>(steps->size());
      } else {
        out.unread[s.rank] = steps.message();
      }
      continue;
    }
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      out.unread[s.rank] = own.message();
      continue;
    }
    if (!merged_read && !r.run_store.empty()) {
      merged_read = true;
      if (auto opened = trace::TraceReader::open(r.run_store)) merged = std::move(opened).value();
    }
    if (!merged) continue;
    const std::vector<trace::RankInfo>& in_run = merged->ranks();
    if (std::none_of(in_run.begin(), in_run.end(),
                     [&](const trace::RankInfo& k) { return k.rank == s.rank; }))
      continue;  // the merge's note names it
    if (auto steps = merged->steps(s.rank))
      out.kept[s.rank] = static_cast<std::int64_t>(steps->size());
  }
  return out;
}

// A rank that reported more steps than its store holds: killed, or its disk
// full, before its last steps were committed (the report and the store
// disagreed unsaid).
std::vector<std::string> uncommitted_steps(const launch::RunReport& r, const StepsKept& steps) {
  std::vector<std::string> out;
  std::size_t more = 0;
  for (const launch::RankStatus& s : r.ranks) {
    if (const auto unread = steps.unread.find(s.rank); unread != steps.unread.end()) {
      if (out.size() == kRankRows / 2) {
        ++more;
        continue;
      }
      out.push_back("rank " + std::to_string(s.rank) + " reported " + std::to_string(s.step + 1) +
                    (s.step == 0 ? " step" : " steps") +
                    "; its store cannot be read to count what it holds: " + unread->second);
      continue;
    }
    const auto kept = steps.kept.find(s.rank);
    if (kept == steps.kept.end() || kept->second >= s.step + 1) continue;
    if (out.size() == kRankRows / 2) {
      ++more;
      continue;
    }
    out.push_back("rank " + std::to_string(s.rank) + " reported " + std::to_string(s.step + 1) +
                  (s.step == 0 ? " step" : " steps") + "; its store holds " +
                  std::to_string(kept->second) + ": the last were not committed when it ended (" +
                  std::string(to_string(s.state)) + ")");
  }
  if (more > 0) {
    out.push_back(std::to_string(more) + " more rank" +
                  (more == 1 ? "'s store lacks" : "s' stores lack (or cannot tell)") +
                  " steps the rank reported");
  }
  return out;
}

// The ranks the table shows: all of a few; of many, the first, those that did
// not finish and the slowest (kRankRows at most), in rank order.
std::vector<std::size_t> ranks_shown(const launch::RunReport& r) {
  std::vector<std::size_t> shown;
  if (r.ranks.size() <= kRankRows) {
    for (std::size_t i = 0; i < r.ranks.size(); ++i)
      shown.push_back(i);
    return shown;
  }
  std::vector<bool> taken(r.ranks.size(), false);
  auto take_rank = [&](std::size_t i) {
    if (!taken[i]) shown.push_back(i);
    taken[i] = true;
  };
  for (std::size_t i = 0; i < kRankRows / 2; ++i)
    take_rank(i);
  for (std::size_t i = 0; i < r.ranks.size() && shown.size() < kRankRows * 3 / 4; ++i) {
    const launch::RankState state = r.ranks[i].state;
    if (state == launch::RankState::failed || state == launch::RankState::lost) take_rank(i);
  }
  std::vector<std::size_t> by_time;
  for (std::size_t i = 0; i < r.ranks.size(); ++i)
    if (!taken[i] && r.ranks[i].step >= 0) by_time.push_back(i);
  const std::size_t slowest = std::min(by_time.size(), kRankRows - shown.size());
  std::partial_sort(by_time.begin(), by_time.begin() + static_cast<std::ptrdiff_t>(slowest),
                    by_time.end(), [&](std::size_t a, std::size_t b) {
                      return r.ranks[a].step_seconds > r.ranks[b].step_seconds;
                    });
  for (std::size_t k = 0; k < slowest; ++k)
    take_rank(by_time[k]);
  std::sort(shown.begin(), shown.end());
  return shown;
}

void print_rank_table(const launch::RunReport& r, const StepsKept& steps) {
  // Steps counted from 1, as the progress lines count them (the JSON's
  // last_step and the store's steps are indices from 0). What the stores
  // hold goes beside them where a rank's store lacks some (a full disk, a
  // kill): the table said "steps done 14" of stores holding 11 and 9.
  const bool lacking =
      !steps.unread.empty() ||
      std::any_of(r.ranks.begin(), r.ranks.end(), [&](const launch::RankStatus& s) {
        const auto kept = steps.kept.find(s.rank);
        return kept != steps.kept.end() && kept->second < s.step + 1;
      });
  std::vector<std::string> header{"rank", "host", "state", "steps done"};
  if (lacking) header.push_back("in store");
  for (const char* h : {"loss", "step time", "tokens/s"})
    header.push_back(h);
  TextTable table(header);
  for (std::size_t c = 3; c < header.size(); ++c)
    table.right_align(c);
  const std::vector<std::size_t> shown = ranks_shown(r);
  for (const std::size_t i : shown) {
    const launch::RankStatus& s = r.ranks[i];
    std::vector<std::string> row{std::to_string(s.rank), s.host, std::string(to_string(s.state)),
                                 s.step < 0 ? "-" : std::to_string(s.step + 1)};
    if (lacking) {
      const auto kept = steps.kept.find(s.rank);
      row.push_back(kept != steps.kept.end()     ? std::to_string(kept->second)
                    : steps.unread.count(s.rank) ? "?"
                                                 : "-");
    }
    row.push_back(s.step < 0 ? "-" : format_fixed(s.loss, 4));
    row.push_back(s.step < 0 ? "-" : format_seconds(s.step_seconds));
    row.push_back(s.step < 0 ? "-" : format_count(std::round(s.tokens_per_second)));
    table.add(row);
  }
  table.print(std::cout);
  if (shown.size() == r.ranks.size()) return;
  // The others, counted by how they ended.
  std::vector<bool> listed(r.ranks.size(), false);
  for (const std::size_t i : shown)
    listed[i] = true;
  std::map<std::string, std::size_t> states;
  for (std::size_t i = 0; i < r.ranks.size(); ++i)
    if (!listed[i]) ++states[std::string(to_string(r.ranks[i].state))];
  std::string counts;
  for (const auto& [state, n] : states)
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  const std::size_t more = r.ranks.size() - shown.size();
  std::cout << "... " << more << (more == 1 ? " more rank (" : " more ranks (") << counts
            << "); shown: the first, those that did not finish and the slowest (--json lists "
               "them all)\n";
}

// A run whose ranks ended without the launcher watching (a Slurm job): its
// rank stores, merged, and how it ended read from them.
void merge_only(const launch::RunSpec& spec, bool json) {
  // The plan says how many ranks to merge: a rank store past them means
  // another plan's run (it used to be left out without a word).
  const std::filesystem::path folder =
      std::filesystem::path(launch::rank_store_path(spec.run_store, 0)).parent_path();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    const std::optional<int> rank = launch::rank_of_store_file(name);
    if (rank && *rank >= spec.ranks) {
      throw CliError(folder.string() + " holds " + name + ", but the plan given has " +
                     std::to_string(spec.ranks) + (spec.ranks == 1 ? " rank" : " ranks") +
                     ": give the run's own plan (its flags, or --plan " +
                     launch::run_store_stem(spec.run_store) + ".plan.json)");
    }
  }
  take(launch::check_rank_stores_world(spec));
  std::vector<std::string> unreadable;
  const launch::Outcome outcome = launch::outcome_from_rank_stores(spec, &unreadable);
  std::string note;
  take(launch::merge_run_stores(spec, outcome, note));
  const nlohmann::json summary = run_summary_json(spec.run_store);
  // A rank store that does not read is left out, and says nothing of how its
  // rank ended: the run is what the others say, less that rank.
  std::string lacking;
  for (const std::string& u : unreadable)
    lacking += (lacking.empty() ? "" : "; ") + u;
  const std::string ended =
      "ended " + std::string(to_string(outcome)) +
      (unreadable.empty()
           ? std::string()
           : " as far as its readable rank stores say (" + std::to_string(unreadable.size()) +
                 " of " + std::to_string(spec.ranks) + " cannot be read)");
  if (json) {
    std::cout << json_text(nlohmann::json{{"outcome", std::string(to_string(outcome))},
                                          {"run_store", spec.run_store},
                                          {"merge_note", note},
                                          {"unreadable_rank_stores", unreadable},
                                          {"summary", summary}},
                           2)
              << '\n';
  } else {
    std::cout << "merged the rank stores of a run that " << ended << " into " << spec.run_store
              << '\n';
    print_run_summary(std::cout, summary);
    if (!note.empty()) std::cout << "note: " << note << '\n';
  }
  // The exit status of the run, as a run from mpirun gives it: a Slurm job
  // whose ranks were cancelled or crashed ends failed, not 0.
  if (outcome != launch::Outcome::completed) {
    throw CliError("the run " + ended + " (its rank stores are merged into " + spec.run_store +
                   ")");
  }
  if (!unreadable.empty()) {
    throw CliError("the run store " + spec.run_store + " lacks what a rank store that cannot be " +
                   "read holds (" + lacking + "); the other ranks ended complete");
  }
}

// The flags that only shape a launch. --merge-only starts nothing, so these
// were ignored without a word; the plan's flags, --ranks, --out, --title,
// --backend (the prediction recorded) and --json are what a merge uses.
void refuse_launch_flags(CLI::App& command) {
  std::string given;
  for (const char* name :
       {"--steps", "--threads", "--lr", "--seed", "--hostfile", "--hang-timeout", "--oversubscribe",
        "--slurm", "--slurm-partition", "--slurm-account", "--slurm-time", "--slurm-nodes",
        "--slurm-cpus-per-task", "--slurm-script"}) {
    if (command.get_option(name)->count() > 0)
      given += (given.empty() ? "" : ", ") + std::string(name);
  }
  if (!given.empty()) {
    throw UsageError("--merge-only only merges an existing run's rank stores: " + given +
                     (given.find(',') == std::string::npos ? " applies" : " apply") +
                     " to launching a run (leave " +
                     (given.find(',') == std::string::npos ? "it" : "them") + " out)");
  }
}

// " (rank 1 on vm, pid 123, is stopped (SIGSTOP or a debugger))": the ranks
// that hung the run, for its error line.
std::string hung_ranks_text(const launch::RunReport& r) {
  std::string out;
  for (std::size_t i = 0; i < r.hung_ranks.size() && i < 4; ++i) {
    const launch::HungRank& h = r.hung_ranks[i];
    out += (out.empty() ? "" : "; ") + ("rank " + std::to_string(h.rank) + " on " + h.host +
                                        ", pid " + std::to_string(h.pid) + ", " + h.state);
  }
  if (r.hung_ranks.size() > 4) out += "; and " + std::to_string(r.hung_ranks.size() - 4) + " more";
  return out.empty() ? out : " (" + out + ")";
}

void run(RunOptions& o, Context& ctx, const std::string& command_line) {
  const PresetCatalog& catalog = ctx.catalog();
  if (!o.hostfile.empty() && o.slurm) throw UsageError("--hostfile and --slurm exclude each other");
  // The rank stores' paths are made from --out with {rank} in them.
  if (o.out.find("{rank}") != std::string::npos)
    throw UsageError("--out " + o.out +
                     ": names the run's one store; {rank} is not replaced there "
                     "(the rank stores go in a folder beside it)");

  const Plan plan = o.plan.resolve(catalog, o.ranks);
  const ParallelPlan& p = plan.parallel;
  const int world = p.world_size();
  const int ranks = o.ranks.value_or(world);
  if (ranks != world) {
    throw CliError("--ranks " + std::to_string(ranks) +
                   " does not match the plan's dp x tp x pp = " + std::to_string(p.dp) + " x " +
                   std::to_string(p.tp) + " x " + std::to_string(p.pp) + " = " +
                   std::to_string(world));
  }

  // The engine, its notes, the model scaled to this machine and the
  // workers' arguments: the same as the desktop app's runs.
  launch::PlanRunOptions run_options;
  run_options.backend = o.backend;
  run_options.steps = o.steps;
  run_options.run_store = o.out.empty() ? default_store_name() : o.out;
  run_options.title = o.title;
  run_options.lr = o.lr;
  run_options.seed = o.seed;
  run_options.threads = o.threads;
  run_options.hang_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(o.hang_timeout_s * 1000));
  run_options.command_line = command_line;
  if (!o.hostfile.empty()) {
    say_if_named_pipe(o.hostfile, "--hostfile");  // it waited for a writer without a word
    run_options.placement = launch::Placement::hostfile;
    run_options.hostfile = o.hostfile;
  }
  if (o.slurm) {
    run_options.placement = launch::Placement::slurm;
    run_options.slurm = o.slurm_options;
  }
  run_options.write_plan = !o.merge_only;
  // The run writes its plan beside its store. Given as --plan, that file is
  // the user's: kept as written when it is the plan, refused when flags
  // change the plan (it was rewritten with them, dp 2 becoming dp 1).
  if (!o.merge_only && !o.plan.plan_file.empty() && o.plan.plan_file != "-") {
    std::error_code ec;
    const std::string own_plan =
        launch::run_store_stem(
            std::filesystem::absolute(run_options.run_store).lexically_normal().string()) +
        ".plan.json";
    if (std::filesystem::equivalent(o.plan.plan_file, own_plan, ec)) {
      RunPlanOptions as_written;
      as_written.plan_file = o.plan.plan_file;
      if (to_json(as_written.resolve(catalog, std::nullopt)) != to_json(plan)) {
        throw CliError(own_plan +
                       ": is the --plan given, and the flags change its plan; the run writes "
                       "its plan there: give --out another name, or the plan another file");
      }
      run_options.plan_file_is_the_plan = true;
    }
  }
  run_options.oversubscribe = o.oversubscribe;
  // More CPU-engine ranks than this machine runs side by side: a usage error,
  // before anything is written (--dp 100000 on 2 cores spun mpirun at full
  // CPU, never started a rank, and took 50 s to stop).
  // (A shape the engines cannot lay out is plan_run's to refuse first.)
  if (!o.merge_only && !o.oversubscribe && o.hostfile.empty() && !o.slurm &&
      launch::worker_bucket_kib(plan).ok()) {
    if (Status s = launch::check_local_cpu_ranks(plan, o.backend); !s)
      throw UsageError(s.message());
  }
  // plan_run makes the folders too, silently: one that cannot be made was
  // "RUN.plan.json: cannot write (cannot create ...partial: Not a directory)".
  const OutputFolder run_folder(run_options.run_store);
  auto made = launch::plan_run(plan, run_options);
  if (!made) {
    std::string message = made.message();
    if (message.find("the CPU engine computes in") != std::string::npos)
      message += " (use --precision bf16, or --backend cuda)";
    throw CliError(message);
  }
  launch::RunSpec spec = made->spec;
  std::vector<std::string> notes = made->notes;
  calib::note_plan_problems(plan, notes);
  // More CPU-engine ranks than cores, still allowed: said before they start,
  // as the app's Runs panel says it.
  if (!o.merge_only && o.hostfile.empty() && !o.slurm) {
    if (std::string w = launch::local_cpu_ranks_warning(plan, o.backend); !w.empty())
      notes.push_back(std::move(w));
  }
  const std::string out = spec.run_store;
  spec.keep_rank_stores = o.keep_rank_stores;
  // The planner's estimate of this very run, for the run store (meta
  // "predicted_step"): its analyses then hold the plan against the measurement.
  if (o.hostfile.empty() && !o.slurm)
    calib::add_prediction(spec, notes, catalog, plan, made->backend, o.threads);
  if (o.merge_only) return merge_only(spec, o.json);

  const bool terminal = isatty(STDERR_FILENO) != 0;
  // On stderr with --json too (and in its "notes"): said before the run starts.
  for (const std::string& n : notes)
    std::cerr << "note: " << n << '\n';
  ProgressPrinter progress(ranks, o.steps, terminal, o.json);
  launch::Launcher launcher(spec, [&progress](const LaunchEvent& e) { progress.on_event(e); });
  launch::RunReport report;
  {
    // A second Ctrl-C (or SIGTERM) while the ranks are still closing their
    // stores kills them: what their stores had committed is merged still.
    const CancelOnSignal cancel_on_signal(
        [&launcher] { launcher.cancel(); },
        "stopping the run (every rank closes its store)... (interrupt again to kill the ranks)",
        [&launcher] { launcher.kill(); }, "killing the ranks (SIGKILL)...");
    take(launcher.start());
    report = launcher.wait();
  }
  progress.end_bar();

  nlohmann::json summary;
  if (!report.run_store.empty()) summary = run_summary_json(report.run_store);
  const StepsKept kept = steps_kept(report, spec.run_store);
  const std::vector<std::string> uncommitted = uncommitted_steps(report, kept);
  notes.insert(notes.end(), uncommitted.begin(), uncommitted.end());
  if (o.json) {
    std::cout << json_text(report_json(report, summary, notes, kept.kept), 2) << '\n';
  } else {
    std::cout << report.message << '\n';
    if (!report.ranks.empty() && report.outcome != launch::Outcome::submitted &&
        report.outcome != launch::Outcome::script_only) {
      print_rank_table(report, kept);
    }
    if (!report.run_store.empty()) {
      std::cout << "\nrun store: " << report.run_store << '\n';
      print_run_summary(std::cout, summary);
    }
    if (!report.merge_note.empty()) std::cout << "note: " << report.merge_note << '\n';
    for (const std::string& n : uncommitted)
      std::cout << "note: " << n << '\n';
  }
  // An earlier run's store at that path stays as it was: said, lest it be
  // read as this run's.
  auto earlier_store_there = [&spec] {
    std::error_code ec;
    return std::filesystem::is_regular_file(spec.run_store, ec)
               ? " (the store at that path is an earlier run's, left as it was)"
               : "";
  };
  // A run whose ranks finished but whose run store could not be written
  // (a full disk while merging) did not give the user what was asked.
  if (report.outcome == launch::Outcome::completed && !spec.run_store.empty() &&
      report.run_store.empty()) {
    // The folder may be gone with the run store's (deleted during the run).
    const std::string ranks_folder = launch::run_store_stem(spec.run_store) + ".ranks";
    std::error_code ec;
    throw CliError("the run completed, but its run store " + spec.run_store + " was not written" +
                   earlier_store_there() +
                   (report.merge_note.empty() ? "" : " (" + report.merge_note + ")") +
                   (std::filesystem::is_directory(ranks_folder, ec)
                        ? ": the rank stores are kept in " + ranks_folder +
                              "; merge them with the same flags and --merge-only"
                        : ": the rank stores' folder " + ranks_folder +
                              " is gone too (deleted during the run?): nothing was kept"));
  }
  // A run that failed and could not write its run store either (the same
  // full disk): what it recorded is in the rank stores, which stay.
  if (report.outcome != launch::Outcome::completed &&
      report.outcome != launch::Outcome::submitted &&
      report.outcome != launch::Outcome::script_only && !spec.run_store.empty() &&
      report.run_store.empty()) {
    const std::string ranks_folder = launch::run_store_stem(spec.run_store) + ".ranks";
    bool kept_a_store = false;
    for (int rank = 0; rank < spec.ranks && !kept_a_store; ++rank)
      kept_a_store = trace::inspect_store(launch::rank_store_path(spec.run_store, rank)).ok();
    if (kept_a_store) {
      std::cout << "note: " << spec.run_store << " was not written" << earlier_store_there()
                << "; what the ranks recorded is kept in " << ranks_folder
                << ": merge it with the same flags and --merge-only (once there is room)\n";
    }
  }
  switch (report.outcome) {
    case launch::Outcome::completed:
    case launch::Outcome::submitted:
    case launch::Outcome::script_only:
      return;
    default:
      throw CliError(
          std::string(report.outcome == launch::Outcome::cancelled
                          ? "the run was cancelled"
                          : "the run " + std::string(to_string(report.outcome))) +
          (report.killed ? ": the ranks were killed on a second interrupt (the run store holds "
                           "the steps their stores had committed)"
                         : "") +
          (report.failure ? " (rank " + std::to_string(report.failure->rank) + ")" : "") +
          hung_ranks_text(report));
  }
}

}  // namespace

void register_run(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Train a plan for real: one worker per rank through mpirun or Slurm, traced");
  options->plan.add_to(*cmd);
  cmd->add_option("--backend", options->backend, "cpu, cuda, or auto (CUDA when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--ranks", options->ranks, "Ranks to start (default dp x tp x pp)")
      ->check(positive_int());
  cmd->add_option("--steps", options->steps, "Training steps")->check(positive_int());
  // The worker's own bound, checked before anything starts (the worker
  // refused it after mpirun had started and the plan file was replaced).
  cmd->add_option("--threads", options->threads,
                  "BLAS threads per rank (CPU; default cores / ranks)")
      ->check(integer_between(1, kMaxSweepRanks));
  cmd->add_option("-o,--out,--output", options->out, "The run store (default run-<date>-<time>.db)");
  cmd->add_option("--title", options->title, "Title of the run");
  // The engines keep the rate as a float: past its range it became inf.
  cmd->add_option("--lr", options->lr, "AdamW learning rate")
      ->check(number_within({0, std::numeric_limits<float>::max(), true}));
  cmd->add_option("--seed", options->seed, "Seed of the initial weights and the data order")
      ->check(seed_number());
  cmd->add_option("--hostfile", options->hostfile, "Run on the hosts of an Open MPI hostfile");
  cmd->add_flag("--slurm", options->slurm, "Write a Slurm batch script and submit it with sbatch");
  cmd->add_option("--slurm-partition", options->slurm_options.partition, "Slurm partition");
  cmd->add_option("--slurm-account", options->slurm_options.account, "Slurm account");
  cmd->add_option("--slurm-time", options->slurm_options.time_limit,
                  "Slurm time limit (e.g. 1:00:00)");
  cmd->add_option("--slurm-nodes", options->slurm_options.nodes, "Slurm nodes")
      ->check(positive_int());
  cmd->add_option("--slurm-cpus-per-task", options->slurm_options.cpus_per_task,
                  "CPUs per rank under Slurm")
      ->check(positive_int());
  cmd->add_option("--slurm-script", options->slurm_options.script_path,
                  "Where to write the batch script (default beside the run store)");
  cmd->add_option("--hang-timeout", options->hang_timeout_s,
                  "Seconds without progress after which the run is stopped as hung (0: never)")
      // At least a second (0.001 called a finished run hung; 1e-9 rounded to
      // 0 ms, never), at most 30 years (1e300 overflowed the milliseconds).
      ->check(number_within({0, 1e9, false, 1}))
      ->capture_default_str();
  cmd->add_flag("--merge-only", options->merge_only,
                "Start nothing: merge the rank stores a run left (e.g. a Slurm job) into --out; "
                "give the run's plan (its flags or --plan), not the flags of a launch");
  cmd->add_flag("--keep-rank-stores", options->keep_rank_stores,
                "Keep the per-rank stores after merging them");
  cmd->add_flag("--oversubscribe", options->oversubscribe,
                "CPU engine on this machine: start more than " +
                    std::to_string(launch::kMaxRanksPerCore) +
                    " ranks a core, or more than the available memory holds (refused otherwise)");
  add_json_flag(*cmd, options->json);
  cmd->callback([options, &ctx, cmd] {
    if (options->merge_only) refuse_launch_flags(*cmd);
    run(*options, ctx, own_command_line());
  });
}

}  // namespace cs::cli
