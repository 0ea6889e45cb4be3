#pragma once
// What mpirun prints, read line by line: the ranks' output as --tag-output
// marks it ("[1,3]<stderr>:text"), and mpirun's own notices about a rank that
// failed (Open MPI 4.1 wording: "mpirun noticed that process rank 1 with PID
// 0 on node n1 exited on signal 9 (Killed).", "Process name: [[21109,1],1]"
// followed by "Exit code:    3", "MPI_ABORT was invoked on rank 1 ...").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cs::launch {

struct TaggedLine {
  int rank = -1;  // -1: mpirun's own line
  bool stderr_stream = false;
  std::string_view text;
};

TaggedLine parse_tagged_line(std::string_view line);

struct RankFailureNotice {
  int rank = -1;
  std::int64_t pid = 0;  // as mpirun reports it (0 when it does not know)
  std::string host;
  int signal = 0;  // the signal that ended the rank, or 0
  std::string signal_name;
  int exit_code = -1;  // its exit status when it exited, or -1
  bool mpi_abort = false;
};

// Collects mpirun's notices over the lines of a run; the first failure wins
// (later ones are the job being torn down).
class MpirunNotices {
 public:
  void feed(std::string_view mpirun_line);
  const std::optional<RankFailureNotice>& failure() const { return failure_; }

 private:
  std::optional<RankFailureNotice> failure_;
  int pending_exit_rank_ = -1;       // "Process name:" seen, "Exit code:" expected
  bool abort_code_pending_ = false;  // "MPI_ABORT was invoked" seen, "with errorcode" expected
};

std::string signal_description(int signal);  // "signal 9 (Killed)"

}  // namespace cs::launch
