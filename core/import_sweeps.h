#pragma once
// A door in for sweeps measured elsewhere: the JSON lines of
// clusterscope-worker --sweep become a calibration store that
// `clusterscope calibrate --from-sweeps` fits as it fits a recorded one.

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cs::trace {

// Sweep JSON lines of clusterscope-worker --sweep (gemm, bandwidth, op and
// collective lines, as the GPU check keeps them) as a calibration store: one
// event per sample whose duration is the sample's mean time. For results
// measured elsewhere; `clusterscope calibrate` records real sweep events.
// The machine is the one the worker's start line names (its "host"), so the
// presets are named for it (calibrated-<host>-cuda) as its runs look them up.
// Lines that are not JSON objects (text the worker's output was mixed
// with, say) are passed over and counted. A line that begins as one but is
// not whole JSON is an error, unless it is a file's last and has no newline
// after it (a worker killed while writing it): that one is left out, with a
// warning.
//
// A gemm line is filed under the type its GEMMs ran in: its "ran_as" where
// that differs from its "precision" (an fp8 sample whose GEMMs cuBLASLt
// turned down ran in BF16: "ran_as": "bf16"), a mixed one ("fp8+bf16") is
// left out. Lines from before the worker wrote "ran_as" are judged by their
// worker run's fp8 line ({"event":"fp8","fp8_gemms":..,"bf16_fallbacks":..}):
// where any of that run's FP8 GEMMs fell back, its fp8 samples cannot say
// which ran in BF16 and are left out. `notes` says, per file, how many.
struct SweepImport {
  int lines_left_out = 0;
  std::string first_left_out;  // "file:line"
  std::vector<std::string> notes;
  std::vector<std::string> warnings;  // "file:line: ..." (a last line cut short, left out)
};
// A file of sweep lines, read whole up to 256 MiB (a calibration's sweeps
// are a few MiB): /dev/zero or a binary given by mistake is refused by name.
Result<std::string> read_sweep_file(const std::string& path);

Result<SweepImport> import_sweep_lines(const std::vector<std::string>& files,
                                       const std::string& store, std::string_view engine,
                                       std::string_view device);

}  // namespace cs::trace
