#pragma once
// Internal to core: what the importers share.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/trace_import.h"
#include "core/trace_types.h"
#include "core/trace_writer.h"

namespace cs::trace::importing {

// Imports one file into one store; ranks the file does not name are
// numbered from `first_rank` (one past the highest of the files before it).
using ImportOne = std::function<Result<ImportReport>(
    const std::string& file, const std::string& output, int first_rank, const ImportOptions&)>;

// One file: straight into `output`. Several: each into a temporary store
// beside `output`, then merged (clocks aligned), then the temporaries removed.
Result<ImportReport> import_files(const std::vector<std::string>& files, const std::string& output,
                                  const ImportOptions& options, const ImportOne& import_one);

// The caller's meta rows (ImportOptions::meta) into a store an importer
// writes, over its own (a plan's prediction over an export's).
void add_caller_meta(TraceWriter& writer, const ImportOptions& options);

// NCCL kernel names: ncclKernel_AllReduce_RING_LL_Sum_float(...),
// ncclDevKernel_AllGather_RING_LL(...), ncclDevKernel_SendRecv(...).

// PyTorch and NCCL spellings of a data type: "Float", "BFloat16", "float",
// "bf16", "half", "int8_t", ...
DataType data_type_from_any(std::string_view text);

// Synchronising runtime calls (cudaDeviceSynchronize, cudaStreamSynchronize,
// cudaEventSynchronize, cudaStreamWaitEvent, their cu* driver twins).
bool is_synchronizing_api(std::string_view name);

}  // namespace cs::trace::importing
