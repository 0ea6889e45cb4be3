#include "profiler/mpirun_output.h"

#include <cstdint>
#include <optional>
#include <regex>

#include "core/bounded_regex.h"
#include "core/parse_count.h"

namespace cs::launch {

namespace {

// A number of mpirun's notice, which a rank's own output can imitate: one
// past an int is no number (std::stoi threw, and the launcher stopped).
// Exit and error codes may be negative.
template <typename Int = int>
std::optional<Int> number_of(const std::ssub_match& match) {
  if (!match.matched) return std::nullopt;
  return parse_integer<Int>(
      std::string_view(&*match.first, static_cast<std::size_t>(match.length())));
}

}  // namespace

TaggedLine parse_tagged_line(std::string_view line) {
  // "[<job>,<rank>]<stdout>:" or "<stderr>:"
  TaggedLine out;
  out.text = line;
  if (line.size() < 4 || line.front() != '[') return out;
  // A tag is short: '[', two ints of at most 10 digits, ',' and ']'. Looking
  // no further keeps split(), which tries each '[' of a line, linear: a
  // rank's line of 1000000 '[' took 39 s.
  const std::string_view head = line.substr(0, 23);
  const auto comma = head.find(',');
  const auto close = head.find(']');
  if (comma == std::string_view::npos || close == std::string_view::npos || comma > close)
    return out;
  const std::optional<int> job = parse_count(line.substr(1, comma - 1));
  const std::optional<int> rank = parse_count(line.substr(comma + 1, close - comma - 1));
  if (!job || !rank) return out;
  std::string_view rest = line.substr(close + 1);
  bool is_stderr = false;
  if (rest.starts_with("<stdout>:")) {
    rest.remove_prefix(9);
  } else if (rest.starts_with("<stderr>:")) {
    rest.remove_prefix(9);
    is_stderr = true;
  } else {
    return out;
  }
  out.rank = *rank;
  out.stderr_stream = is_stderr;
  out.text = rest;
  return out;
}

std::vector<TaggedLine> TaggedLineAssembler::split(std::string_view line) {
  // Where tags start: a '[' that parses as a whole tag.
  std::vector<std::size_t> starts;
  for (std::size_t at = line.find('['); at != std::string_view::npos; at = line.find('[', at + 1)) {
    if (parse_tagged_line(line.substr(at)).rank >= 0) starts.push_back(at);
  }
  std::vector<TaggedLine> pieces;
  if (starts.empty() || starts.front() > 0) {
    TaggedLine own;
    own.text = line.substr(0, starts.empty() ? line.size() : starts.front());
    pieces.push_back(own);
  }
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t end = i + 1 < starts.size() ? starts[i + 1] : line.size();
    pieces.push_back(parse_tagged_line(line.substr(starts[i], end - starts[i])));
  }
  return pieces;
}

void MpirunNotices::feed(std::string_view line) {
  static const std::regex signal_re(
      R"(process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
  static const std::regex process_re(R"(Process name: \[\[\d+,\d+\],(\d+)\])");
  static const std::regex exit_re(R"(Exit code:\s*(-?\d+))");
  static const std::regex abort_re(R"(MPI_ABORT was invoked on rank (\d+) in communicator)");
  static const std::regex abort_code_re(R"(with errorcode (-?\d+))");
  const std::string text(line);
  std::smatch m;
  if (abort_code_pending_) {
    // The error code of MPI_ABORT follows on the next line.
    abort_code_pending_ = false;
    if (bounded_regex_search(text, m, abort_code_re)) {
      if (auto code = number_of(m[1])) failure_->exit_code = *code;
    }
    return;
  }
  if (failure_) return;
  if (bounded_regex_search(text, m, signal_re)) {
    const auto rank = number_of(m[1]);
    const auto pid = number_of<std::int64_t>(m[2]);
    const auto signal = number_of(m[4]);
    if (!rank || !pid || !signal) return;
    RankFailureNotice n;
    n.rank = *rank;
    n.pid = *pid;
    n.host = m[3];
    n.signal = *signal;
    n.signal_name = m[5].matched ? std::string(m[5]) : std::string();
    failure_ = n;
  } else if (bounded_regex_search(text, m, process_re)) {
    pending_exit_rank_ = number_of(m[1]).value_or(-1);
  } else if (pending_exit_rank_ >= 0 && bounded_regex_search(text, m, exit_re)) {
    const auto code = number_of(m[1]);
    if (!code) return;
    RankFailureNotice n;
    n.rank = pending_exit_rank_;
    n.exit_code = *code;
    failure_ = n;
  } else if (bounded_regex_search(text, m, abort_re)) {
    const auto rank = number_of(m[1]);
    if (!rank) return;
    RankFailureNotice n;
    n.rank = *rank;
    n.mpi_abort = true;
    failure_ = n;
    abort_code_pending_ = !bounded_regex_search(text, m, abort_code_re);
    if (!abort_code_pending_) {
      if (auto code = number_of(m[1])) failure_->exit_code = *code;
    }
  }
}

}  // namespace cs::launch
