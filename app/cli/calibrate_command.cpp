// clusterscope calibrate [--backend cpu|cuda|auto] [--ranks 1,2,4] [--threads N]
//                        [--precisions fp32,bf16] [--gemm-sizes ...] [--seconds S]
//                        [--out CAL.db] [--no-save] [--presets-dir DIR] [--json]
// clusterscope calibrate --from-store CAL.db [--gpu PRESET]     fit a recorded calibration again
// clusterscope calibrate --learn RUN.db [--base CLUSTER]         learn from a run (alias
// --from-run) clusterscope calibrate --from-sweeps gemm.jsonl ... --gpu PRESET --out CAL.db
// clusterscope calibrate --nccl-tests LOG... --link-name NAME [--link-type ib] [--intra LINK]
//
// Measures the machine (or reads measurements), fits the planner's device
// and link parameters with the quality of each fit, and saves them as user
// presets the planner uses like datasheet presets.

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <iterator>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/ioctl.h>
#include <unistd.h>

#include "app/calibration/calibration_workflow.h"
#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/output_folder.h"
#include "app/cli/signal_cancel.h"
#include "app/cli/text_table.h"
#include "core/format.h"
#include "core/host_probe.h"
#include "core/import_sweeps.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/model_json.h"

namespace cs::cli {

namespace {

// A progress line cut to the terminal's width, so that rewriting it in
// place (carriage return) does not leave wrapped lines behind; whole UTF-8
// characters only.
std::string fit_terminal_width(const std::string& line) {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_col < 2) return line;
  std::size_t end = 0, columns = 0;
  while (end < line.size() && columns + 1 < size.ws_col) {
    ++end;
    while (end < line.size() && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80)
      ++end;
    ++columns;
  }
  return line.substr(0, end);
}

// A GPU sweeps every tensor-core path but FP8 unless asked (--precisions).
constexpr const char* kCudaPrecisions[] = {"fp32", "tf32", "bf16", "fp16"};

using nlohmann::json;

struct CalibrateOptions {
  std::string backend = "auto";
  std::vector<int> ranks;
  int threads = 0;
  std::vector<std::string> precisions;
  std::vector<std::int64_t> gemm_sizes, buffer_sizes, message_sizes;
  double seconds = launch::CalibrationRunOptions{}.seconds_per_size;
  bool no_ops = false;
  bool no_reference_runs = false;
  int reference_steps = 12;
  double hang_timeout_s =
      std::chrono::duration<double>(launch::CalibrationRunOptions{}.hang_timeout).count();
  std::string out;
  bool no_save = false;
  std::string presets_dir;
  std::string gpu;  // datasheet GPU preset (CUDA, imported sweeps)
  std::string from_store;
  std::vector<std::string> from_run;
  std::string base;
  std::vector<std::string> from_sweeps;
  std::vector<std::string> nccl_tests;
  std::string collective;
  std::string link_name;
  std::string link_type;  // empty: infiniband, for logs across hosts
  std::string intra;
  int nics = 0;
  bool json = false;
};

std::string percent(double fraction) {
  return format_fixed(100 * fraction, 1) + " %";
}

json quality_json(const plan::FitQuality& q) {
  json points = json::array();
  for (const plan::FitPoint& p : q.points) {
    points.push_back({{"label", p.label},
                      {"size", p.size},
                      {"measured_seconds", p.measured_s},
                      {"fitted_seconds", p.predicted_s},
                      {"error", p.error()},
                      {"samples", p.samples}});
  }
  return {{"r2", q.r2}, {"rms_error", q.rms_error}, {"max_error", q.max_error}, {"points", points}};
}

json fit_json(const plan::Calibration& c) {
  json devices = json::array();
  for (const plan::DeviceFit& d : c.devices) {
    json gemm = json::array();
    for (const plan::GemmCurve& g : d.gemm) {
      gemm.push_back({{"precision", std::string(to_string(g.precision))},
                      {"peak_flops", g.peak},
                      {"efficiency", g.efficiency},
                      {"quality", quality_json(g.quality)}});
    }
    json loops = json::array();
    for (const plan::LoopFit& l : d.loops) {
      json loop = {{"kind", l.kind},
                   {l.kind.starts_with("attention") ? "gflops" : "ns_per_element", l.value},
                   {"quality", quality_json(l.quality)}};
      for (const OptimizerPoint& p : l.by_count)
        loop["by_count"].push_back({{"parameters", p.parameters}, {"ns", p.ns}});
      loops.push_back(std::move(loop));
    }
    json optimizer_by_size = json::array();
    for (const OptimizerPoint& p : d.loop_costs.optimizer_by_size)
      optimizer_by_size.push_back({{"parameters", p.parameters}, {"ns", p.ns}});
    json j = {{"ranks", d.ranks},
              {"threads", d.threads},
              {"gemm", gemm},
              {"gemm_ramp_seconds", d.ramp},
              {"op_timing_seconds", d.launch},
              {"gemm_memory_overlap", d.gemm_memory_overlap},
              {"core_share", d.core_share},
              {"loops", loops},
              {"optimizer_by_size", optimizer_by_size}};
    if (d.memory_rate) {
      j["memory"] = {{"bytes_per_second", *d.memory_rate},
                     {"quality", quality_json(d.memory_quality)}};
    }
    if (d.link) {
      j["link"] = {{"latency_seconds", d.link->latency},
                   {"bandwidth_bytes_per_second", d.link->bandwidth},
                   {"group_sizes", d.link->group_sizes},
                   {"quality", quality_json(d.link->quality)}};
    }
    if (d.cold_link) {
      j["cold_link"] = {{"latency_seconds", d.cold_link->latency},
                        {"bandwidth_bytes_per_second", d.cold_link->bandwidth},
                        {"group_sizes", d.cold_link->group_sizes},
                        {"quality", quality_json(d.cold_link->quality)}};
      for (const LinkPoint& p : d.cold_link->by_size) {
        j["cold_link"]["by_size"].push_back(
            {{"bytes", p.bytes}, {"bandwidth_bytes_per_second", p.bandwidth}});
      }
    }
    devices.push_back(j);
  }
  return {{"host", c.host},
          {"engine", c.engine},
          {"device", c.device},
          {"devices", devices},
          {"notes", c.notes}};
}

json presets_json(const PresetBundle& b) {
  json gpus = json::array(), links = json::array(), clusters = json::array();
  for (const GpuSpec& g : b.gpus)
    gpus.push_back(to_json(g));
  for (const Link& l : b.links)
    links.push_back(to_json(l));
  for (const Cluster& c : b.clusters)
    clusters.push_back(c.name);
  return {{"gpus", gpus}, {"links", links}, {"clusters", clusters}};
}

// The optimizer's row: the sum of its passes, by parameter count where measured.
std::string optimizer_cell(const LoopCosts& loops) {
  const std::string by_size = plan::optimizer_by_size_text(loops);
  return by_size.empty() ? "sum of its passes" : "sum of its passes: " + by_size;
}

// What the planner uses in place of the line, where sizes were kept.
std::string by_size_cell(const std::vector<LinkPoint>& by_size) {
  const std::string text = plan::bandwidth_by_size_text(by_size);
  return text.empty() ? "" : "by message size: " + text;
}

std::string quality_cell(const plan::FitQuality& q) {
  // One point is fitted exactly: no R² or error to speak of.
  if (q.points.size() == 1) return "one point (" + std::to_string(q.points[0].samples) + " samples)";
  return "R² " + format_fixed(q.r2, 3) + ", RMS " + percent(q.rms_error) + ", worst " +
         percent(q.max_error) + " (" + std::to_string(q.points.size()) + " pts)";
}

void print_fit(std::ostream& out, const plan::Calibration& c) {
  for (const plan::DeviceFit& d : c.devices) {
    out << "\n"
        << c.device << ", " << d.ranks << (d.ranks == 1 ? " rank" : " ranks at once")
        << (d.threads > 0 ? ", " + std::to_string(d.threads) +
                                (d.threads == 1 ? " BLAS thread each" : " BLAS threads each")
                          : std::string())
        << ":\n";
    if (d.core_share < 1) {
      out << "(more threads than cores: each thread runs " << format_fixed(100 * d.core_share, 0)
          << " % of the time when all compute; the planner slows compute by that share)\n";
    }
    TextTable table({"quantity", "fitted", "quality"});
    for (const plan::GemmCurve& g : d.gemm) {
      table.add(
          {std::string(to_string(g.precision)) + " GEMM",
           format_rate(g.peak * g.efficiency, "FLOP/s") +
               (g.efficiency < 1 ? " (" + percent(g.efficiency) + " of peak)" : std::string()),
           quality_cell(g.quality)});
    }
    if (!d.gemm.empty()) table.add({"GEMM ramp", format_seconds(d.ramp), ""});
    if (c.engine == "cpu" && d.launch > 0) {
      // Measured by each rank (trace::kOpTimingCostCounter); the rest is fitted beyond it.
      table.add(
          {"timing of an op", format_seconds(d.launch), "measured: the tracer's clock reads"});
    }
    if (!d.gemm.empty() && c.engine != "cpu") {
      // A GPU's: how much of a GEMM's operand and result traffic its kernels hide.
      table.add({"GEMM traffic hidden", percent(d.gemm_memory_overlap), ""});
    }
    if (d.memory_rate) {
      table.add(
          {"memory streaming", format_rate(*d.memory_rate, "B/s"), quality_cell(d.memory_quality)});
    }
    for (const plan::LoopFit& l : d.loops) {
      const bool attention = l.kind.starts_with("attention");
      table.add({l.kind,
                 attention ? format_fixed(l.value, 2) + " GFLOP/s"
                           : format_fixed(l.value, 2) + " ns/element",
                 l.quality.points.empty() ? optimizer_cell(d.loop_costs)
                 : l.by_count.empty()     ? quality_cell(l.quality)
                                      : "by parameter count: " + plan::by_count_text(l.by_count)});
    }
    if (d.link) {
      table.add(
          {"link latency (α)", format_seconds(d.link->latency), quality_cell(d.link->quality)});
      table.add({"link bandwidth (bus)", format_rate(d.link->bandwidth, "B/s"), ""});
    }
    if (d.cold_link) {
      table.add({"caches cold: link latency (α)", format_seconds(d.cold_link->latency),
                 quality_cell(d.cold_link->quality)});
      table.add({"caches cold: link bandwidth (bus)", format_rate(d.cold_link->bandwidth, "B/s"),
                 by_size_cell(d.cold_link->by_size)});
    }
    table.print(out);
  }
  for (const std::string& n : c.notes)
    out << "note: " << n << '\n';
}

void print_presets(std::ostream& out, const PresetBundle& b, const std::filesystem::path& file) {
  out << '\n';
  for (const Cluster& c : b.clusters)
    out << "cluster preset: " << c.name << '\n';
  if (!file.empty()) {
    out << "saved in " << file.string() << " (plan with --cluster <name>)\n";
  } else {
    out << "not saved (--no-save)\n";
  }
}

std::optional<GpuSpec> datasheet_of(Context& ctx, const std::string& gpu) {
  if (gpu.empty()) return std::nullopt;
  const GpuSpec* g = ctx.catalog().find_gpu(gpu);
  if (!g)
    throw CliError(
        ctx.catalog().unknown_name_message("GPU preset", gpu, ctx.catalog().gpu_names()));
  return *g;
}

// The sweep_start line of sweep lines (clusterscope-worker --sweep writes
// one first), and the file it is in; none when no file has one.
std::optional<std::pair<std::string, nlohmann::json>> sweep_start_of(
    const std::vector<std::string>& files) {
  for (const std::string& file : files) {
    auto contents = take(trace::read_sweep_file(file));
    std::string_view rest = contents;
    while (!rest.empty()) {
      const std::size_t end = rest.find('\n');
      const std::string_view text = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      const std::size_t first = text.find_first_not_of(" \t\r");
      if (first == std::string_view::npos || text[first] != '{') continue;
      nlohmann::json j = parse_json_text(text);
      const auto event = j.is_object() ? j.find("event") : j.end();
      if (event != j.end() && *event == "sweep_start") return std::pair{file, std::move(j)};
    }
  }
  return std::nullopt;
}

// The datasheet of the GPU that sweep lines ran on: their sweep_start line
// names the device (clusterscope-worker --sweep on CUDA).
std::optional<GpuSpec> datasheet_of_sweeps(Context& ctx, const std::vector<std::string>& files) {
  const auto start = sweep_start_of(files);
  if (!start || start->second.value("backend", "") != "cuda") return std::nullopt;  // the CPU engine
  const std::string device = start->second.value("device", "");
  if (const GpuSpec* g = ctx.catalog().match_device(device)) return *g;
  throw CliError(start->first + ": the sweeps ran on \"" + device +
                 "\", which no GPU preset names: give its datasheet with --gpu");
}

// The datasheet of a calibration store's GPU (its meta "calibration" names
// the engine and device), as for sweeps; none for the CPU engine's. Without
// it a GPU's GEMMs fitted against nothing: "nothing to calibrate from".
std::optional<GpuSpec> datasheet_of_store(Context& ctx, const std::string& path) {
  auto datasheet = calib::datasheet_of_calibration_store(path, ctx.catalog());
  if (!datasheet) throw CliError(datasheet.message() + ": give its datasheet with --gpu");
  return *datasheet;
}

std::string default_store() {
  const std::time_t now = std::time(nullptr);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "calibration-%Y%m%d-%H%M%S.db", std::localtime(&now));
  return buffer;
}

// Folders made before measuring, removed again at the end when nothing was
// saved in them (the calibration failed or was cancelled): an empty presets/
// stayed behind a calibration that failed on a full disk.
class FoldersMade {
 public:
  FoldersMade() = default;
  explicit FoldersMade(std::vector<std::filesystem::path> made) : made_(std::move(made)) {}
  FoldersMade(const FoldersMade&) = delete;
  FoldersMade& operator=(const FoldersMade&) = delete;
  ~FoldersMade() {
    std::error_code ec;
    for (const std::filesystem::path& folder : made_)  // deepest first
      std::filesystem::remove(folder, ec);             // only an empty one goes
  }

 private:
  std::vector<std::filesystem::path> made_;
};

// Before minutes of measuring: the presets folder can take the fit (a
// read-only one failed only once the sweeps had run). Returns the folders it
// made for it, deepest first.
std::vector<std::filesystem::path> check_presets_dir_writable(const CalibrateOptions& o) {
  if (o.no_save) return {};
  const std::filesystem::path dir =
      o.presets_dir.empty() ? user_presets_dir() : std::filesystem::path(o.presets_dir);
  if (dir.empty()) throw CliError("no presets folder: give --presets-dir, or set HOME");
  std::vector<std::filesystem::path> made;
  if (Status s = calib::prepare_presets_dir(dir, &made); !s) {
    throw CliError(s.message() +
                   ": give --presets-dir another folder, or --no-save; nothing was measured");
  }
  return made;
}

void save_fitted(Context& ctx, calib::MachineCalibration& m, const CalibrateOptions& o) {
  if (o.no_save) return;
  std::filesystem::path dir =
      o.presets_dir.empty() ? user_presets_dir() : std::filesystem::path(o.presets_dir);
  if (dir.empty()) throw CliError("no presets folder: give --presets-dir, or set HOME");
  m.presets_file = calib::presets_file_to_save(dir, m.presets, ctx.catalog(), m.fit.host, m.fit.engine);
  take(calib::merge_into_presets_file(m.presets_file, m.presets, ctx.catalog()));
}

json report_json(const plan::Calibration& fit, const PresetBundle& presets,
                 const std::filesystem::path& file, const json& extra) {
  json j = {
      {"fit", fit_json(fit)}, {"presets", presets_json(presets)}, {"presets_file", file.string()}};
  for (auto& [k, v] : extra.items())
    j[k] = v;
  return j;
}

void report(const CalibrateOptions& o, const plan::Calibration& fit, const PresetBundle& presets,
            const std::filesystem::path& file, json extra = json::object()) {
  if (o.json) {
    std::cout << json_text(report_json(fit, presets, file, extra), 2) << '\n';
    return;
  }
  print_fit(std::cout, fit);
  print_presets(std::cout, presets, file);
}

void run_nccl_tests(Context& ctx, const CalibrateOptions& o) {
  for (const std::string& log : o.nccl_tests)
    say_if_named_pipe(log, "--nccl-tests");
  if (o.link_name.empty())
    throw UsageError("--nccl-tests needs --link-name for the link preset it makes");
  auto kind = link_kind_from_string(o.link_type.empty() ? "infiniband" : o.link_type);
  if (!kind) throw UsageError("--link-type: unknown link type \"" + o.link_type + "\"");
  // A user link named like a shipped one replaced it in the user's own
  // clusters but not in the shipped ones, which keep the datasheet's.
  if (auto shipped = PresetCatalog::load(ctx.catalog().directory());
      shipped && shipped->find_link(o.link_name)) {
    throw CliError("--link-name " + o.link_name +
                   ": a shipped link preset has that name: give the measured link its own (say " +
                   o.link_name + "-measured)");
  }
  // The name is the preset's and its file's, read back by the presets'
  // rules: refused here, not after the logs were fitted (a name with "/"
  // made a folder in the presets folder, then the preset was not saved).
  if (!o.no_save) {
    Link named;
    named.name = o.link_name;
    named.display_name = "--link-name";  // the name's errors said once, not for this too
    named.kind = *kind;
    named.bandwidth = 1e9;  // bytes per second: any the rules take
    named.efficiency = 1;
    if (auto read = link_from_json(to_json(named), "--link-name " + o.link_name); !read)
      throw UsageError(read.message());
  }
  std::optional<Link> intra;
  if (!o.intra.empty()) {
    const Link* l = ctx.catalog().find_link(o.intra);
    if (!l)
      throw CliError(
          ctx.catalog().unknown_name_message("link preset", o.intra, ctx.catalog().link_names()));
    intra = *l;
  }
  // "-" reads standard input, as every document flag's (it was "-: cannot open").
  std::string standard_input;
  for (const std::string& log : o.nccl_tests) {
    if (log != "-") continue;
    if (Status claimed = claim_standard_input("--nccl-tests"); !claimed)
      throw CliError(claimed.message() + ", not an nccl-tests log: give a file");
    standard_input.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  const calib::NetworkCalibration net = take(calib::calibrate_network(
      o.nccl_tests, o.link_name, *kind, intra, o.nics, o.collective, standard_input));
  if (!net.fit.inter_node) {
    // Logs of one host measure the link inside a node: what describes the
    // network between nodes means nothing there, and "infiniband" is wrong.
    const std::string logs =
        o.nccl_tests.size() == 1 ? document_name(o.nccl_tests.front()) + " ran" : "these logs ran";
    if (!o.intra.empty() || o.nics > 0) {
      throw CliError(std::string(o.intra.empty() ? "--nics" : "--intra") + ": " + logs +
                     " on one host, so the link fitted is the one inside a node; --intra and "
                     "--nics describe logs across hosts");
    }
    if (o.link_type.empty()) {
      throw CliError(logs + " on one host, so the link fitted is the one inside a node: give its "
                     "type, --link-type nvlink or pcie");
    }
  }
  // What makes the fitted figures doubtful, said before they are saved.
  for (const plan::NcclTestsLog& l : net.logs) {
    if (!l.has_average) {
      std::cerr << "clusterscope: warning: " << l.file
                << " has no \"Avg bus bandwidth\" line, which ends every nccl-tests table: it "
                   "looks cut short after line "
                << l.last_row_line << ", its largest sizes lost (the bandwidth rests on them)\n";
    }
  }
  if (const plan::FitQuality& q = net.fit.fit.quality;
      q.points.size() >= 3 && !(q.r2 >= 0.9 && q.rms_error <= 0.1)) {  // NaN fails too
    std::cerr << "clusterscope: warning: the logs' times do not follow one latency and bandwidth ("
              << quality_cell(q)
              << "): the link fitted is doubtful; see the sizes below before planning with it\n";
  }
  std::filesystem::path file;
  if (!o.no_save) {
    std::filesystem::path dir =
        o.presets_dir.empty() ? user_presets_dir() : std::filesystem::path(o.presets_dir);
    if (dir.empty()) throw CliError("no presets folder: give --presets-dir, or set HOME");
    file = dir / (net.link.name + ".json");
    PresetBundle b;
    b.links.push_back(net.link);
    take(calib::merge_into_presets_file(file, b, ctx.catalog()));
  }
  const plan::LinkFit& f = net.fit.fit;
  if (o.json) {
    json logs = json::array();
    for (const plan::NcclTestsLog& l : net.logs) {
      logs.push_back({{"file", l.file},
                      {"collective", l.collective},
                      {"ranks", l.ranks},
                      {"hosts", l.hosts},
                      {"device", l.device},
                      {"sizes", l.samples.size()},
                      {"lines_left_out", l.lines_left_out},
                      {"rows_with_wrong_values", l.rows_with_wrong_values},
                      {"average_busbw_bytes_per_second", l.average_busbw}});
    }
    std::cout << json_text(json{{"logs", logs},
                                {"inter_node", net.fit.inter_node},
                                {"latency_seconds", f.latency},
                                {"bus_bandwidth_bytes_per_second", f.bandwidth},
                                {"port_bandwidth_bytes_per_second", net.fit.port_bandwidth},
                                {"quality", quality_json(f.quality)},
                                {"link", to_json(net.link)},
                                {"presets_file", file.string()}},
                           2)
              << '\n';
    return;
  }
  for (const plan::NcclTestsLog& l : net.logs) {
    std::cout << l.file << ": " << l.collective << ", " << l.ranks << " ranks on " << l.hosts.size()
              << (l.hosts.size() == 1 ? " host" : " hosts") << ", " << l.samples.size() << " sizes"
              << (l.average_busbw > 0 ? ", avg busbw " + format_rate(l.average_busbw, "B/s")
                                      : std::string())
              << (l.lines_left_out > 0
                      ? ", " + std::to_string(l.lines_left_out) +
                            (l.lines_left_out == 1 ? " line" : " lines") +
                            " after the table's header left out, not being result rows (the "
                            "first: line " + std::to_string(l.first_line_left_out) + ")"
                      : std::string())
              << (l.rows_with_wrong_values > 0
                      ? ", " + std::to_string(l.rows_with_wrong_values) +
                            (l.rows_with_wrong_values == 1 ? " size" : " sizes") +
                            " left out: nccl-tests found wrong values in them (the first: line " +
                            std::to_string(l.first_row_with_wrong_values) + ")"
                      : std::string())
              << '\n';
  }
  std::cout << (net.fit.inter_node ? "network between nodes" : "link inside a node") << ": α "
            << format_seconds(f.latency) << " per step, bus bandwidth "
            << format_rate(f.bandwidth, "B/s")
            << (net.fit.inter_node
                    ? " per GPU (" + format_rate(net.fit.port_bandwidth, "B/s") + " per port)"
                    : std::string())
            << "; " << quality_cell(f.quality) << '\n';
  TextTable table({"size", "measured", "fitted", "error"});
  for (int c = 1; c <= 3; ++c)
    table.right_align(c);
  for (const plan::FitPoint& p : f.quality.points) {
    table.add(
        {p.label, format_seconds(p.measured_s), format_seconds(p.predicted_s), percent(p.error())});
  }
  table.print(std::cout);
  std::cout << "link preset: " << net.link.name
            << (file.empty() ? " (not saved)" : " saved in " + file.string()) << '\n';
}

void run(Context& ctx, const CalibrateOptions& o) {
  const int sources =
      !o.from_store.empty() + !o.from_run.empty() + !o.from_sweeps.empty() + !o.nccl_tests.empty();
  if (sources > 1) {
    throw UsageError("--from-store, --from-run, --from-sweeps and --nccl-tests exclude each other");
  }
  if (!o.nccl_tests.empty()) return run_nccl_tests(ctx, o);

  if (!o.from_run.empty()) {
    const std::vector<calib::RunRefinement> refinements =
        take(calib::refine_from_runs(o.from_run, ctx.catalog(), o.base, !o.no_save, o.presets_dir));
    json reports = json::array();  // --json: one object, or an array for several clusters
    for (std::size_t i = 0; i < refinements.size(); ++i) {
      const calib::RunRefinement& r = refinements[i];
      if (!o.json) {
        std::string runs;
        for (const std::string& run : r.runs) runs += (runs.empty() ? "" : ", ") + run;
        std::cout << (i > 0 ? "\n" : "") << "learning from " << runs << " (refines "
                  << r.base_cluster << (r.runs.size() > 1 ? ", fitted together" : "") << ")\n";
      }
      const json extra = {{"runs", r.runs}, {"run", r.runs.front()}, {"base_cluster", r.base_cluster}};
      if (o.json) {
        reports.push_back(report_json(r.fit, r.presets, r.presets_file, extra));
      } else {
        report(o, r.fit, r.presets, r.presets_file, extra);
      }
    }
    if (o.json) std::cout << json_text((reports.size() == 1 ? reports[0] : reports), 2) << '\n';
    return;
  }

  if (!o.from_sweeps.empty() || !o.from_store.empty()) {
    // Sweep files are read more than once (the engine, then the samples): a
    // pipe's second read waited for a writer that never came.
    for (const std::string& file : o.from_sweeps) {
      std::error_code ec;
      if (std::filesystem::is_fifo(file, ec))
        throw CliError(file +
                       ": is a named pipe; --from-sweeps reads a file (save the sweep "
                       "lines to one first)");
    }
    std::optional<GpuSpec> datasheet = datasheet_of(ctx, o.gpu);
    if (!datasheet && !o.from_store.empty()) datasheet = datasheet_of_store(ctx, o.from_store);
    if (!datasheet && !o.from_sweeps.empty()) {
      datasheet = datasheet_of_sweeps(ctx, o.from_sweeps);
      // Sweeps of an older worker name no engine: taken as the CPU's, where
      // a GPU's made a "CPU" of 800 TFLOP/s. Said, so that --gpu is given.
      if (!sweep_start_of(o.from_sweeps)) {
        std::cerr << "clusterscope: note: no sweep_start line names the engine these sweeps ran "
                     "on (the worker writes one first): taken as the CPU engine's; for a GPU's, "
                     "name its datasheet with --gpu\n";
      }
    }
    if (datasheet && !o.from_sweeps.empty()) {
      // A CPU's sweeps fitted against a GPU's peaks made a "GPU" of the CPU.
      const auto start = sweep_start_of(o.from_sweeps);
      if (start && start->second.value("backend", "") == "cpu")
        throw CliError(start->first + ": the sweeps ran on the CPU engine: a GPU's datasheet (--gpu " +
                       o.gpu + ") does not describe them; import them without --gpu");
    }
    std::string store = o.from_store;
    if (!o.from_sweeps.empty()) {
      if (o.out.empty())
        throw UsageError("--from-sweeps needs --out for the calibration store it writes");
      store = o.out;
      const OutputFolder store_folder(store);
      const std::string engine = datasheet ? "cuda" : "cpu";
      const trace::SweepImport imported = take(trace::import_sweep_lines(
          o.from_sweeps, store, engine, datasheet ? datasheet->display_name : std::string("CPU")));
      if (imported.lines_left_out > 0) {
        std::cerr << "clusterscope: note: " << imported.lines_left_out
                  << (imported.lines_left_out == 1 ? " line that is not a JSON object"
                                                    : " lines that are not JSON objects")
                  << " passed over (the first: "
                  << imported.first_left_out << ")\n";
      }
      // GEMM samples filed under the type they ran in, or left out.
      for (const std::string& note : imported.notes)
        std::cerr << "clusterscope: note: " << note << '\n';
      for (const std::string& warning : imported.warnings)
        std::cerr << "clusterscope: warning: " << warning << '\n';
    }
    calib::MachineCalibration m = take(calib::fit_calibration_store(store, datasheet));
    save_fitted(ctx, m, o);
    report(o, m.fit, m.presets, m.presets_file, {{"store", store}});
    return;
  }

  // Measure this machine.
  std::string backend = o.backend;
  const HostInfo host = probe_host();
  if (backend == "auto") backend = host.gpus.empty() ? "cpu" : "cuda";
  calib::MachineCalibrationOptions mo;
  launch::CalibrationRunOptions& run = mo.run;
  run.backend = backend;
  const OutputFolder out_folder(o.out);
  run.store = std::filesystem::absolute(o.out.empty() ? default_store() : o.out).string();
  run.host = host.hostname;
  run.host_memory_bytes = host.memory_bytes;
  run.cpu_cores = host.cpu_cores;
  run.threads = o.threads;
  if (!o.ranks.empty()) {
    run.rank_counts = o.ranks;
  } else if (backend == "cuda") {
    run.rank_counts = {std::max(1, static_cast<int>(host.gpus.size()))};
  }
  if (!o.precisions.empty()) {
    run.precisions = o.precisions;
  } else if (backend == "cuda") {
    run.precisions.assign(std::begin(kCudaPrecisions), std::end(kCudaPrecisions));
  }
  if (!o.gemm_sizes.empty()) run.gemm_sizes = o.gemm_sizes;
  if (backend == "cuda" && o.gemm_sizes.empty()) run.gemm_sizes = {1024, 2048, 4096, 8192};
  if (!o.buffer_sizes.empty()) run.buffer_sizes = o.buffer_sizes;
  if (!o.message_sizes.empty()) run.message_sizes = o.message_sizes;
  run.seconds_per_size = o.seconds;
  run.ops = !o.no_ops;
  run.hang_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.hang_timeout_s * 1000));
  if (backend == "cuda") {
    if (host.gpus.empty()) throw CliError("--backend cuda: " + host.gpu_status);
    run.gpu_memory_bytes = smallest_gpu_memory_bytes(host);
    if (const GpuSpec* g = ctx.catalog().match_device(host.gpus.front().name)) mo.datasheet = *g;
    if (!o.gpu.empty()) mo.datasheet = datasheet_of(ctx, o.gpu);
  }
  mo.save = !o.no_save;
  mo.presets_dir = o.presets_dir;
  const FoldersMade presets_folders(check_presets_dir_writable(o));
  mo.reference_runs = !o.no_reference_runs;
  mo.reference_steps = o.reference_steps;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  // Ctrl-C stops the sweep running (every rank closes its store); a second
  // one kills the ranks, as in a run.
  launch::StopRequest stop;
  const CancelOnSignal cancel_on_signal(
      [&stop] { stop.cancel = true; },
      "stopping the calibration... (interrupt again to kill the ranks)",
      [&stop] { stop.kill = true; }, "killing the ranks (SIGKILL)...");
  // Progress on stderr: on a terminal one line, rewritten at every point
  // measured; otherwise a line per phase, per message, and for the first
  // point of each sweep (a log stays a page, not a line per point).
  int printed_phase = -1;
  std::string printed_sweep;
  calib::MachineCalibration m = take(calib::calibrate_machine(
      mo,
      [&](const launch::CalibrationProgress& p) {
        if (o.json) return;
        if (!terminal && p.measured) {
          // A reference run's steps (no sweep): its last one, where the bar
          // ends (the last line read "[6/6, 83 %]", the last run's start).
          if (p.sweep.empty() ? p.point < p.points
                              : p.phase == printed_phase && p.sweep == printed_sweep)
            return;
          printed_phase = p.phase;
          printed_sweep = p.sweep;
        }
        const std::string line =
            "[" + std::to_string(std::min(p.phase + 1, p.phases)) + "/" + std::to_string(p.phases) +
            ", " + std::to_string(static_cast<int>(p.fraction() * 100)) + " %] " + p.text;
        if (terminal) {
          std::cerr << "\r\033[K" << fit_terminal_width(line) << std::flush;
        } else {
          std::cerr << line << '\n' << std::flush;
        }
      },
      &stop));
  if (terminal && !o.json) std::cerr << '\n';
  if (o.json) {
    json runs = json::array();
    for (const calib::ReferenceRun& r : m.reference_runs) {
      runs.push_back({{"ranks", r.ranks},
                      {"dp", r.layout.dp},
                      {"tp", r.layout.tp},
                      {"micro_batch", r.layout.micro_batch},
                      {"store", r.store},
                      {"retried", r.retried},
                      {"learnt", r.learnt},
                      {"probe_gemm_ratio", r.probe_gemm_ratio},
                      {"probe_loop_ratio", r.probe_loop_ratio},
                      {"measured_step_seconds", r.measured_step_s},
                      {"predicted_by_sweeps_seconds", r.predicted_sweeps_s},
                      {"predicted_seconds", r.predicted_s}});
    }
    json learnt = json::array();
    for (const plan::Calibration& f : m.reference_fits)
      learnt.push_back(fit_json(f));
    report(o, m.fit, m.presets, m.presets_file,
           {{"store", m.record.store},
            {"seconds", m.record.seconds},
            {"reference_seconds", m.reference_seconds},
            {"reference_runs", runs},
            {"reference_fits", learnt},
            {"notes", m.notes}});
    return;
  }
  std::cout << "calibration store: " << m.record.store << " (" << format_seconds(m.record.seconds)
            << (m.reference_runs.empty()
                    ? std::string()
                    : "; reference runs " + format_seconds(m.reference_seconds))
            << ")\n";
  print_fit(std::cout, m.fit);
  if (!m.reference_fits.empty()) {
    std::cout << "\nlearnt from the reference runs (" << calib::reference_workload().display_name
              << ", " << mo.reference_steps << " steps each):\n";
    for (const plan::Calibration& f : m.reference_fits)
      print_fit(std::cout, f);
  }
  if (!m.reference_runs.empty()) {
    std::cout << "\nreference runs, predicted against measured (step):\n";
    TextTable table({"ranks", "layout", "by the sweeps", "measured", "error", "calibrated", "error"});
    for (int c = 2; c <= 6; ++c)
      table.right_align(c);
    for (const calib::ReferenceRun& r : m.reference_runs) {
      auto error = [&](double predicted) {
        return r.measured_step_s > 0 && predicted > 0 ? percent(predicted / r.measured_step_s - 1)
                                                      : std::string("-");
      };
      table.add({std::to_string(r.ranks),
                 calib::to_string(r.layout) + (r.learnt ? "" : " (not learnt)") +
                     (r.retried ? " *" : ""),
                 format_seconds(r.predicted_sweeps_s), format_seconds(r.measured_step_s),
                 error(r.predicted_sweeps_s), format_seconds(r.predicted_s), error(r.predicted_s)});
    }
    table.print(std::cout);
    for (const calib::ReferenceRun& r : m.reference_runs) {
      if (r.retried) {
        std::cout << "* run twice, being more than 30 % from the sweeps' prediction or its "
                     "machine probe more than 40 % from their model: the run whose probe "
                     "found the machine as swept, then the faster, kept\n";
        break;
      }
    }
  }
  for (const std::string& n : m.notes)
    std::cout << "note: " << n << '\n';
  print_presets(std::cout, m.presets, m.presets_file);
}

}  // namespace

void register_calibrate(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine (or read measurements) and save the planner's calibrated presets");
  cmd->add_option("--backend", o->backend, "cpu, cuda, or auto (CUDA when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  // The defaults said as the sweep has them.
  const launch::CalibrationRunOptions defaults;
  auto listed = [](const auto& values) {
    std::string text;
    for (const auto& v : values) {
      if (!text.empty()) text += ",";
      if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) {
        text += std::to_string(v);
      } else {
        text += v;
      }
    }
    return text;
  };
  cmd->add_option("--ranks", o->ranks,
                  "Rank counts to measure (CPU engine: ranks sharing the cores; default " +
                      listed(defaults.rank_counts) + "; CUDA: the GPUs here)")
      ->delimiter(',')
      ->check(integer_between(1, kMaxSweepRanks));
  cmd->add_option("--threads", o->threads, "BLAS threads per rank (default: cores / ranks)")
      ->check(integer_between(1, kMaxSweepRanks));
  cmd->add_option("--precisions", o->precisions,
                  "Precisions of the GEMM sweep (default " + listed(defaults.precisions) +
                      "; CUDA: " + listed(kCudaPrecisions) + ")")
      ->delimiter(',');
  cmd->add_option("--gemm-sizes", o->gemm_sizes, "widths of the layer GEMMs swept (h tokens through h -> h and h -> 4h, forward and backward)")
      ->delimiter(',')
      ->check(integer_between(1, 1 << 16));
  cmd->add_option("--buffer-sizes", o->buffer_sizes, "Bytes per buffer of the bandwidth sweep")
      ->delimiter(',')
      ->check(integer_between(1, kMaxSweepBytes));
  cmd->add_option("--message-sizes", o->message_sizes, "Bytes per message of the all-reduce sweep")
      ->delimiter(',')
      ->check(integer_between(1, kMaxSweepBytes));
  cmd->add_option("--seconds", o->seconds, "Seconds per GEMM size (a quarter per operation size)")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_flag("--no-ops", o->no_ops, "Skip the sweep of the model's loop operations (CPU)");
  cmd->add_flag("--no-reference-runs", o->no_reference_runs,
                "CPU engine: skip training the reference model on each rank count after the "
                "sweeps (whose runs the presets then learn from)");
  cmd->add_option("--reference-steps", o->reference_steps,
                  "Training steps of each reference run (the first is a warm-up)")
      ->check(integer_between(3, 1000));
  cmd->add_option("--hang-timeout", o->hang_timeout_s,
                  "Seconds without progress (a sweep's sample, a reference run's step) after which "
                  "the calibration is stopped as hung (0: never)")
      ->check(number_within({0, 1e9, false, 1}))
      ->capture_default_str();
  cmd->add_option("-o,--out,--output", o->out, "The calibration store (default calibration-<date>-<time>.db)");
  cmd->add_flag("--no-save", o->no_save, "Fit and show, but do not save presets");
  cmd->add_option("--presets-dir", o->presets_dir,
                  "Where presets are saved (default: the user's presets folder)");
  cmd->add_option("--gpu", o->gpu,
                  "The GPU's datasheet preset (CUDA, imported sweeps; default: the preset of the "
                  "device the sweeps name)");
  CLI::Option* from_store =
      cmd->add_option("--from-store", o->from_store, "Fit a calibration store recorded before");
  CLI::Option* learn = cmd->add_option("--learn,--from-run", o->from_run,
                                       "Learn from run stores: refine the calibrated presets "
                                       "(with --json, one report per cluster the runs ran on: an array when they span several)");
  // Options of one source only: given with another, they were passed over
  // without a word (--base with --from-store).
  cmd->add_option("--base", o->base, "With --learn: the cluster preset to refine")->needs(learn);
  CLI::Option* from_sweeps = cmd->add_option(
      "--from-sweeps", o->from_sweeps, "Import sweep JSON lines of clusterscope-worker --sweep");
  CLI::Option* nccl_tests = cmd->add_option(
      "--nccl-tests", o->nccl_tests,
      "Calibrate a network tier from nccl-tests output logs (- reads standard input)");
  cmd->add_option("--collective", o->collective,
                  "With --nccl-tests: the collective, when the logs do not say")
      ->needs(nccl_tests);
  cmd->add_option("--link-name", o->link_name, "With --nccl-tests: the link preset's name")
      ->needs(nccl_tests);
  cmd->add_option("--link-type", o->link_type,
                  "With --nccl-tests: nvlink, pcie, infiniband, roce, ethernet (default "
                  "infiniband across hosts; a log of one host must say)")
      ->needs(nccl_tests);
  cmd->add_option("--intra", o->intra,
                  "With --nccl-tests across hosts: the link preset inside a node")
      ->needs(nccl_tests);
  cmd->add_option("--nics", o->nics,
                  "With --nccl-tests across hosts: NIC ports per node (default: one per GPU)")
      ->check(positive_int())
      ->needs(nccl_tests);
  // What a measurement of this machine takes means nothing to a source of
  // results measured before: refused, not passed over without a word.
  for (const char* name : {"--backend", "--ranks", "--threads", "--precisions", "--gemm-sizes",
                           "--buffer-sizes", "--message-sizes", "--seconds", "--no-ops",
                           "--no-reference-runs", "--reference-steps", "--hang-timeout"}) {
    CLI::Option* sweep = cmd->get_option(name);
    for (CLI::Option* source : {learn, nccl_tests, from_store, from_sweeps})
      source->excludes(sweep);
  }
  for (CLI::Option* source : {learn, nccl_tests}) source->excludes(cmd->get_option("--gpu"));
  for (CLI::Option* source : {learn, nccl_tests, from_store})
    source->excludes(cmd->get_option("--out"));
  add_json_flag(*cmd, o->json);
  cmd->callback([o, &ctx] { run(ctx, *o); });
}

}  // namespace cs::cli
