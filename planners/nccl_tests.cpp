#include "planners/nccl_tests.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "core/bounded_regex.h"
#include "core/format.h"
#include "core/parse_count.h"
#include "core/text_file.h"
#include "planners/collectives.h"

namespace cs::plan {

namespace {

// nccl-tests program names, with or without an MPI build's suffix.
std::optional<std::string> collective_of_program(std::string_view program) {
  static const std::pair<std::string_view, std::string_view> kPrograms[] = {
      {"all_reduce_perf", "all_reduce"},
      {"all_gather_perf", "all_gather"},
      {"reduce_scatter_perf", "reduce_scatter"},
      {"broadcast_perf", "broadcast"},
      {"reduce_perf", "reduce"},
      {"alltoall_perf", "all_to_all"}};
  // The longest name that the text holds ("reduce_scatter_perf" before "reduce_perf").
  std::optional<std::string> best;
  std::size_t best_length = 0;
  for (const auto& [name, collective] : kPrograms) {
    if (program.find(name) != std::string_view::npos && name.size() > best_length) {
      best = std::string(collective);
      best_length = name.size();
    }
  }
  return best;
}

// mpirun --tag-output prefixes every line with "[job,rank]<stdout>:".
std::string_view strip_tag(std::string_view line) {
  static const std::regex kTag(R"(^\[\d+,\d+\]<std(out|err)>:\s?)");
  std::cmatch m;
  if (std::regex_search(line.begin(), line.end(), m, kTag)) line.remove_prefix(m.length());
  return line;
}

std::optional<double> number(const std::string& token) {
  try {
    std::size_t used = 0;
    const double v = std::stod(token, &used);
    if (used != token.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

bool is_integer(const std::string& token) {
  return !token.empty() &&
         std::all_of(token.begin() + (token[0] == '-' ? 1 : 0), token.end(),
                     [](unsigned char c) { return std::isdigit(c); }) &&
         token != "-";
}

}  // namespace

Result<NcclTestsLog> parse_nccl_tests(std::string_view text, std::string_view file,
                                      std::string_view collective) {
  NcclTestsLog log;
  log.file = std::string(file);
  static const std::regex kRank(
      R"(^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$)");
  static const std::regex kStarting(R"(^#\s*Collective test (starting|concluded):\s*(\S+))");
  static const std::regex kThreads(R"(^#\s*nThread\s)");
  static const std::regex kAverage(R"(^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+))");
  static const std::regex kErrors(R"(^#\s*Out of bounds values\s*:\s*(\d+))");
  std::set<std::tuple<std::string, std::string, std::string>> seen_ranks;  // host, pid, device
  std::set<std::pair<std::string, std::string>> seen_devices;              // host, device
  std::vector<std::string> hosts;
  std::set<std::string> seen_hosts;
  bool threads_line_seen = false;
  // Where each result's time sits in a row (out-of-place, then in-place),
  // read from the header: "time" or "cputime" under it. nccl-tests 2.17's
  // per-iteration report puts i_min, i_max, i_p99 and i_cv% after each
  // result; read at fixed places, an i_min was taken for the in-place time
  // and the log refused as in another unit.
  std::vector<std::size_t> time_columns = {4, 8};
  // Versions before 2.10 print each result's largest error ("error": 5e-07,
  // rounding in a float sum), not its count of wrong values ("#wrong"): a
  // row was left out for it, and a whole log of them refused.
  bool wrong_is_count = true;
  bool header_seen = false;
  double seconds_per_time_unit = 1e-6;  // "(us)" in the unit row
  std::string time_unit = "us";
  std::istringstream in{std::string(text)};
  std::string raw;
  int line_number = 0;
  std::set<double> sizes_seen;
  // Runs appended to one log (`>>`, or logs joined) read as one run of
  // all their ranks, the later collective's rows taken for the first's:
  // a second run's start is refused where it is.
  const auto second_run = [&] {
    return Error{std::string(file) + ":" + std::to_string(line_number) +
                 ": a second nccl-tests run starts here (the log holds more than one, appended "
                 "or joined): split it into one log per run"};
  };
  while (std::getline(in, raw)) {
    ++line_number;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    // No line of nccl-tests is this long, and the patterns below would
    // match one by a recursion as deep as it is long (see bounded_regex.h).
    if (raw.size() > kMaxRegexTextChars) {
      if (++log.lines_left_out == 1) log.first_line_left_out = line_number;
      continue;
    }
    const std::string line(strip_tag(raw));
    std::smatch m;
    if (std::regex_search(line, m, kStarting)) {
      if (m[1].str() == "starting" && header_seen) return second_run();
      if (auto c = collective_of_program(m[2].str())) log.collective = *c;
      continue;
    }
    if (std::regex_search(line, m, kThreads)) {
      if (threads_line_seen || header_seen) return second_run();
      threads_line_seen = true;
      continue;
    }
    if (std::regex_search(line, m, kRank)) {
      // Old versions print every process's ranks from 0: count (host, pid, device).
      const bool new_device = seen_devices.emplace(m[3].str(), m[4].str()).second;
      // A GPU listed again once the table has begun is another run's.
      if (!new_device && header_seen) return second_run();
      if (seen_ranks.emplace(m[3].str(), m[2].str(), m[4].str()).second) {
        ++log.ranks;
        if (seen_hosts.insert(m[3].str()).second) hosts.push_back(m[3].str());
        if (log.device.empty()) log.device = m[5].str();
      }
      continue;
    }
    if (std::regex_search(line, m, kAverage)) {
      if (auto v = number(m[1].str())) log.average_busbw = *v * 1e9;
      log.has_average = true;
      continue;
    }
    if (std::regex_search(line, m, kErrors)) {
      // Past an int: as many as an int counts (std::stoi threw).
      log.errors = parse_count(m[1].str()).value_or(std::numeric_limits<int>::max());
      continue;
    }
    if (!line.empty() && line[0] == '#') {
      if (line.find("size") != std::string::npos && line.find("count") != std::string::npos &&
          line.find("type") != std::string::npos) {
        if (header_seen) return second_run();
        header_seen = true;
        std::istringstream labels(line.substr(1));
        std::vector<std::size_t> found;
        std::size_t index = 0;
        for (std::string label; labels >> label; ++index) {
          if (label == "time" || label == "cputime") found.push_back(index);
          if (label == "error") wrong_is_count = false;
        }
        if (!found.empty()) {
          time_columns = found;
        } else {  // an unknown header: the classic layout, with or without a root column
          const std::size_t first = line.find("root") != std::string::npos ? 5 : 4;
          time_columns = {first, first + 4};
        }
      } else if (header_seen && line.find("(B)") != std::string::npos) {
        // The unit row: "(B) (elements) (us) (GB/s) (GB/s)".
        static const std::pair<const char*, double> kUnits[] = {
            {"us", 1e-6}, {"ms", 1e-3}, {"ns", 1e-9}, {"s", 1.0}};
        for (const auto& [unit, seconds] : kUnits) {
          if (line.find("(" + std::string(unit) + ")") != std::string::npos) {
            seconds_per_time_unit = seconds;
            time_unit = unit;
            break;
          }
        }
      }
      continue;
    }
    // A table row: size count type redop [root] time algbw busbw wrong time algbw busbw wrong
    std::istringstream fields(line);
    std::vector<std::string> t;
    for (std::string f; fields >> f;)
      t.push_back(f);
    if (t.size() < 8 || !is_integer(t[0]) || !is_integer(t[1])) {
      const bool nccl_debug_line = line.find(" NCCL ") != std::string::npos;
      if (header_seen && !t.empty() && !nccl_debug_line && ++log.lines_left_out == 1)
        log.first_line_left_out = line_number;
      continue;
    }
    const std::string where = std::string(file) + ":" + std::to_string(line_number);
    if (!header_seen) {
      return Error{where + ": a result row before the table's header (is this nccl-tests output?)"};
    }
    // A result is its time, algbw, busbw and #wrong.
    const std::size_t first = time_columns[0];
    const std::size_t second = time_columns.size() > 1 ? time_columns[1] : SIZE_MAX;
    const std::vector<std::size_t> results = {first, second};
    if (t.size() < first + 3) return Error{where + ": too few columns for a result row"};
    const auto size = number(t[0]);
    const auto oop = number(t[first]);
    std::optional<double> ip;
    if (second != SIZE_MAX && t.size() >= second + 3) ip = number(t[second]);
    if (!size || !oop) return Error{where + ": size and time must be numbers"};
    if (*size <= 0) continue;
    // A petabyte is past any collective's buffer: a damaged row.
    if (*size > 1e15) return Error{where + ": a size of " + t[0] + " bytes is past any buffer"};
    // A time under a nanosecond or past a day times no collective: a
    // damaged row (1e300 us, under an algbw too small to cross-check, was
    // fitted to an R² of NaN and saved).
    for (const std::size_t column : results) {
      if (column >= t.size()) continue;
      const std::optional<double> v = number(t[column]);
      if (!v || !(*v > 0)) continue;
      const double seconds = *v * seconds_per_time_unit;
      if (seconds < 1e-9 || seconds > 86400) {
        return Error{where + ": a time of " + t[column] + " " + time_unit +
                     " is no measurement (under a nanosecond or past a day)"};
      }
    }
    double time = *oop;
    if (ip && *ip > 0) time = std::min(time, *ip);
    if (!(time > 0)) return Error{where + ": the time must be > 0"};
    // Each time against the algbw printed beside it (GB/s, two decimals):
    // times in another unit than the log names would fit a link a thousand
    // times too fast or slow, and be saved. Within 10 % and the print's
    // rounding (a small size's "0.00" GB/s says under 0.005).
    for (const std::size_t column : results) {
      if (column == SIZE_MAX || column + 1 >= t.size()) continue;
      const std::optional<double> row_time = number(t[column]);
      const std::optional<double> algbw = number(t[column + 1]);
      if (!row_time || !algbw || *algbw < 0 || !(*row_time > 0)) continue;
      const double from_time = *size / (*row_time * seconds_per_time_unit) / 1e9;
      if (std::fabs(from_time - *algbw) > 0.1 * *algbw + 0.005) {
        return Error{where + ": the time " + t[column] + " and the algbw " + t[column + 1] +
                     " GB/s beside it disagree (size / time is " + format_fixed(from_time, 2) +
                     " GB/s): the times are not in the unit the table's header names"};
      }
    }
    const double us = time * seconds_per_time_unit * 1e6;
    // "#wrong": a count, or N/A when nccl-tests did not check (-c 0).
    bool wrong = false;
    for (const std::size_t result : wrong_is_count ? results : std::vector<std::size_t>{}) {
      const std::size_t column = result == SIZE_MAX ? SIZE_MAX : result + 3;
      if (column < t.size()) {
        if (const auto n = number(t[column]); n && *n > 0) wrong = true;
      }
    }
    if (wrong) {
      if (log.rows_with_wrong_values++ == 0) log.first_row_with_wrong_values = line_number;
      continue;
    }
    CollectiveSample s;
    s.bytes = *size;
    s.seconds = us * 1e-6;
    log.samples.push_back(s);
    log.last_row_line = line_number;
    sizes_seen.insert(*size);
  }
  if (log.collective.empty()) {
    if (auto c = collective_of_program(file)) log.collective = *c;
  }
  if (log.collective.empty() && !collective.empty()) log.collective = std::string(collective);
  if (log.collective.empty()) {
    return Error{std::string(file) +
                 ": cannot tell which collective this is (no \"Collective test\" line and no "
                 "program name in the file name): name it with --collective (all_reduce, all_gather, ...)"};
  }
  if (log.samples.empty() && log.rows_with_wrong_values > 0) {
    return Error{std::string(file) + ": every result row counts values nccl-tests found wrong " +
                 "(the \"#wrong\" column): no time of a working collective to calibrate on"};
  }
  if (log.samples.empty())
    return Error{std::string(file) + ": no result rows (size, count, type, ... time)"};
  if (log.ranks < 1) {
    return Error{std::string(file) +
                 ": no \"#  Rank N ... on HOST device D\" lines: the rank count is unknown"};
  }
  for (CollectiveSample& s : log.samples) {
    s.collective = log.collective;
    s.ranks = log.ranks;
  }
  log.hosts = std::move(hosts);
  return log;
}

Result<NcclTestsLog> read_nccl_tests(const std::string& path, std::string_view collective) {
  // A sweep to 16 GiB over thousands of ranks logs a few MiB.
  auto text = read_text_file(path, std::size_t{64} << 20, "an nccl-tests log");
  if (!text) return text.error();
  return parse_nccl_tests(*text, path, collective);
}

namespace {
// "a.log", "a.log and b.log", "a.log and 2 more logs": what a fit's message names.
std::string files_of(const std::vector<NcclTestsLog>& logs) {
  if (logs.size() == 1) return logs.front().file;
  if (logs.size() == 2) return logs[0].file + " and " + logs[1].file;
  return logs.front().file + " and " + std::to_string(logs.size() - 1) + " more logs";
}
}  // namespace

Result<NetworkFit> fit_nccl_tests(const std::vector<NcclTestsLog>& logs,
                                  const std::optional<Link>& intra, int nics_per_node) {
  if (logs.empty()) return Error{"no nccl-tests log given"};
  NetworkFit out;
  const std::size_t nodes = logs.front().hosts.size();
  const int ranks = logs.front().ranks;
  for (const NcclTestsLog& l : logs) {
    if (l.hosts.size() != nodes || l.ranks != ranks) {
      return Error{l.file + ": " + std::to_string(l.ranks) + " ranks on " +
                   std::to_string(l.hosts.size()) + (l.hosts.size() == 1 ? " host" : " hosts") +
                   ", but " + logs.front().file + " has " + std::to_string(ranks) + " on " +
                   std::to_string(nodes) + ": fit one tier's logs together"};
    }
    if (l.ranks < 2) return Error{l.file + ": one rank moves no data between ranks"};
  }
  out.nodes = static_cast<int>(nodes);
  out.gpus_per_node = ranks / std::max(1, out.nodes);
  if (nodes <= 1) {
    std::vector<CollectiveSample> samples;
    for (const NcclTestsLog& l : logs)
      samples.insert(samples.end(), l.samples.begin(), l.samples.end());
    auto fit = fit_link(samples);
    if (!fit) return Error{files_of(logs) + ": " + fit.message()};
    out.fit = std::move(fit).value();
    out.port_bandwidth = out.fit.bandwidth;
    return out;
  }
  if (ranks % out.nodes != 0) {
    return Error{logs.front().file + ": " + std::to_string(ranks) +
                 " ranks do not split evenly over " + std::to_string(nodes) + " hosts"};
  }
  const int g = out.gpus_per_node;
  if (g > 1 && !intra) {
    return Error{"the logs span " + std::to_string(nodes) + " hosts with " + std::to_string(g) +
                 " GPUs each: give the link inside a node with --intra LINK, whose part of each "
                 "time is taken out before fitting the network"};
  }
  // The planner's hierarchical collective (across_nodes): the node's part on
  // `intra`, the rest on the network share of each GPU.
  const Tier node_tier = intra ? tier_of(*intra, intra->bandwidth) : Tier{};
  const GroupPlacement placement{g, out.nodes};
  std::vector<AlphaBetaPoint> points;
  for (const NcclTestsLog& l : logs) {
    for (const CollectiveSample& s : l.samples) {
      const std::optional<trace::Collective> op = collective_op(s.collective);
      if (!op) return Error{l.file + ": unknown collective \"" + s.collective + "\""};
      const AcrossNodes terms = across_nodes(*op, s.bytes, placement, node_tier);
      AlphaBetaPoint p;
      p.label = s.collective + " " + std::to_string(static_cast<long long>(s.bytes)) + " B / " +
                std::to_string(s.ranks) + " ranks on " + std::to_string(out.nodes) + " nodes";
      p.steps = terms.network_steps;
      p.bytes = terms.network_bytes;
      p.seconds = s.seconds;
      p.offset = terms.node_seconds;
      p.size = s.bytes;
      points.push_back(p);
    }
  }
  auto fit = fit_alpha_beta(points);
  if (!fit) return Error{files_of(logs) + ": " + fit.message()};
  out.fit = std::move(fit).value();
  out.fit.group_sizes = {ranks};
  out.inter_node = true;
  const int nics = nics_per_node > 0 ? nics_per_node : g;
  out.port_bandwidth = out.fit.bandwidth * g / nics;
  return out;
}

}  // namespace cs::plan
