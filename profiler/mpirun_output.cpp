#include "profiler/mpirun_output.h"

#include <charconv>
#include <cstring>
#include <regex>

namespace cs::launch {

namespace {

bool parse_int(std::string_view text, int& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

TaggedLine parse_tagged_line(std::string_view line) {
  // "[<job>,<rank>]<stdout>:" or "<stderr>:"
  TaggedLine out;
  out.text = line;
  if (line.size() < 4 || line.front() != '[') return out;
  const auto comma = line.find(',');
  const auto close = line.find(']');
  if (comma == std::string_view::npos || close == std::string_view::npos || comma > close)
    return out;
  int job = 0;
  int rank = 0;
  if (!parse_int(line.substr(1, comma - 1), job) ||
      !parse_int(line.substr(comma + 1, close - comma - 1), rank)) {
    return out;
  }
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
  out.rank = rank;
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
    if (std::regex_search(text, m, abort_code_re)) failure_->exit_code = std::stoi(m[1]);
    return;
  }
  if (failure_) return;
  if (std::regex_search(text, m, signal_re)) {
    RankFailureNotice n;
    n.rank = std::stoi(m[1]);
    n.pid = std::stoll(m[2]);
    n.host = m[3];
    n.signal = std::stoi(m[4]);
    n.signal_name = m[5].matched ? std::string(m[5]) : std::string();
    failure_ = n;
  } else if (std::regex_search(text, m, process_re)) {
    pending_exit_rank_ = std::stoi(m[1]);
  } else if (pending_exit_rank_ >= 0 && std::regex_search(text, m, exit_re)) {
    RankFailureNotice n;
    n.rank = pending_exit_rank_;
    n.exit_code = std::stoi(m[1]);
    failure_ = n;
  } else if (std::regex_search(text, m, abort_re)) {
    RankFailureNotice n;
    n.rank = std::stoi(m[1]);
    n.mpi_abort = true;
    failure_ = n;
    abort_code_pending_ = !std::regex_search(text, m, abort_code_re);
    if (!abort_code_pending_) failure_->exit_code = std::stoi(m[1]);
  }
}

std::string signal_description(int signal) {
  const char* name = strsignal(signal);
  return "signal " + std::to_string(signal) + (name ? std::string(" (") + name + ")" : "");
}

}  // namespace cs::launch
