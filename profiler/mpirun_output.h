#pragma once
// What mpirun prints, read line by line: the ranks' output as --tag-output
// marks it ("[1,3]<stderr>:text"), and mpirun's own notices about a rank that
// failed (Open MPI 4.1 wording: "mpirun noticed that process rank 1 with PID
// 0 on node n1 exited on signal 9 (Killed).", "Process name: [[21109,1],1]"
// followed by "Exit code:    3", "MPI_ABORT was invoked on rank 1 ...").

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cs::launch {

struct TaggedLine {
  int rank = -1;  // -1: mpirun's own line
  bool stderr_stream = false;
  std::string_view text;
};

TaggedLine parse_tagged_line(std::string_view line);

// Reassembles the ranks' lines from mpirun's output. Open MPI tags what it
// reads from a rank, not whole lines: a line read in two pieces comes out as
// "[1,0]<stdout>:first half" with another rank's tagged line right after it on
// the same output line, and "[1,0]<stdout>:second half" later. A piece
// followed by another tag on the same line is therefore incomplete, and is
// held until its rank's next piece.
class TaggedLineAssembler {
 public:
  // `sink(const TaggedLine&)` is called for each whole line, in order.
  template <class Sink>
  void feed(std::string_view physical_line, Sink&& sink) {
    std::vector<TaggedLine> pieces = split(physical_line);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      TaggedLine& piece = pieces[i];
      if (piece.rank < 0) {
        sink(piece);
        continue;
      }
      std::string& held = pending_[key(piece)];
      if (i + 1 < pieces.size()) {
        held.append(piece.text);
        continue;
      }
      if (held.empty()) {
        sink(piece);
      } else {
        held.append(piece.text);
        TaggedLine whole = piece;
        whole.text = held;
        sink(whole);
        held.clear();
      }
    }
  }

 private:
  static std::int64_t key(const TaggedLine& l) {
    return 2 * static_cast<std::int64_t>(l.rank) + l.stderr_stream;
  }
  static std::vector<TaggedLine> split(std::string_view line);
  std::map<std::int64_t, std::string> pending_;
};

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

}  // namespace cs::launch
