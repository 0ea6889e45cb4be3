#pragma once
// Reading nccl-tests output (all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf: the text
// they print), so that a network tier can be calibrated from runs users
// already make. The table's "size" is the whole buffer in bytes (nccl-tests
// doc/PERFORMANCE.md) and "time" microseconds per operation (the unit row
// under the header says so; another unit there is honoured); both the
// out-of-place and in-place columns are read, and the faster kept. The
// columns are found by the header's labels: the per-iteration report
// (i_min ... after each result) and tables without a redop or root column
// read as the classic one, and a row's "#wrong" count leaves it out where
// older versions' "error" (the largest error, 5e-07 in a float sum) does
// not. A row
// whose time disagrees with its own algbw (size / time) is refused: its
// times are not in the unit the log names. So is a time under a nanosecond
// or past a day. A log holds one run: a second one appended to it is
// refused at the line where it starts.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hardware.h"
#include "core/result.h"
#include "planners/calibration.h"

namespace cs::plan {

struct NcclTestsLog {
  std::string file;
  std::string collective;                 // all_reduce, all_gather, reduce_scatter, ...
  int ranks = 0;                          // from the "#  Rank N ... on HOST device D" lines
  std::vector<std::string> hosts;         // distinct, in rank order
  std::string device;                     // the first rank's device ("NVIDIA H100 80GB HBM3")
  std::vector<CollectiveSample> samples;  // one per size, in the log's order
  double average_busbw = 0;  // bytes/s: the log's own "Avg bus bandwidth", when printed
  // nccl-tests ends its table with "Avg bus bandwidth": a log without it was
  // cut short (the run killed, the file truncated), its largest sizes lost.
  bool has_average = false;
  int last_row_line = 0;     // the line of the last result row read
  int errors = 0;            // "Out of bounds values" (data errors nccl-tests found)
  // Lines after the table's header that are neither comments, NCCL's own
  // log lines nor result rows (a size that is not a whole number, a cut
  // line): left out, counted, the first one's number kept.
  int lines_left_out = 0;
  int first_line_left_out = 0;
  // Result rows whose "#wrong" column counts values nccl-tests found wrong:
  // their times are not of a working collective, so they are left out.
  int rows_with_wrong_values = 0;
  int first_row_with_wrong_values = 0;
};

// `file` names the source in messages. The collective comes from the
// "Collective test starting/concluded" lines, else from the file name
// (all_reduce_perf...), else from `collective` when given.
Result<NcclTestsLog> parse_nccl_tests(std::string_view text, std::string_view file,
                                      std::string_view collective = {});
Result<NcclTestsLog> read_nccl_tests(const std::string& path, std::string_view collective = {});

// The tier the logs measured, as a link preset's figures: logs on one host
// fit the tier inside a node directly (ring model); logs spanning hosts fit
// the network between nodes, given the tier inside them (`intra`, per GPU)
// and the cluster's shape, on the planner's hierarchical model. The fitted
// bandwidth is per NIC port (the link preset's unit): the per-GPU share
// times gpus_per_node / nics_per_node.
struct NetworkFit {
  LinkFit fit;
  bool inter_node = false;
  int nodes = 1;
  int gpus_per_node = 0;
  double port_bandwidth = 0;  // bytes/s for the Link preset
};
Result<NetworkFit> fit_nccl_tests(const std::vector<NcclTestsLog>& logs,
                                  const std::optional<Link>& intra = {}, int nics_per_node = 0);

}  // namespace cs::plan
