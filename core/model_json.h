#pragma once
// JSON form of the domain model, with validation that names the document, the
// JSON pointer and the rule broken (`cluster.json: /nodes: must be >= 1`).
//
// Units in JSON are those of datasheets: memory in GiB, GPU memory bandwidth
// in GB/s, link bandwidth in Gbit/s per direction per port, latency in
// microseconds, peak throughput in TFLOP/s (dense). docs/model-json.md lists
// every field. Every document may carry "kind" (gpu, link, cluster, workload,
// parallel_plan, precision_plan, plan); without it the kind is detected from
// the fields.

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/plans.h"
#include "core/problem.h"
#include "core/result.h"

namespace cs {

// The largest transformer shape a workload document, or a flag, may give.
inline constexpr int kMaxLayers = 1 << 16;
inline constexpr int kMaxWidth = 1 << 20;   // hidden size, heads
inline constexpr int kMaxLength = 1 << 24;  // sequence, vocabulary, MLP width

struct Range;
// The rules of figures a flag gives too (`--tokens`, `--price`): the flag is
// checked with its field's own range, so that it is refused as the field is,
// and the message names the flag.
const Range& training_tokens_range();     // 0 (none), or 1 to 1e18
const Range& price_per_gpu_hour_range();  // USD, 0 to 1e6

class PresetCatalog;

enum class DocumentKind { gpu, link, cluster, workload, parallel_plan, precision_plan, plan };
std::string_view to_string(DocumentKind kind);

// `document` names the source in messages (a file path, "preset h100-sxm", ...).
// Where a catalog is given, a cluster's "gpu" / "intra_node" / "inter_node"
// and a plan's "cluster" / "workload" may name presets instead of inlining them.
Result<GpuSpec> gpu_from_json(const nlohmann::json& j, std::string_view document);
Result<Link> link_from_json(const nlohmann::json& j, std::string_view document);
Result<Cluster> cluster_from_json(const nlohmann::json& j, std::string_view document,
                                  const PresetCatalog* catalog = nullptr);
Result<Workload> workload_from_json(const nlohmann::json& j, std::string_view document);
// check: a plan breaking check_parallel_plan's rules is an error.
// leave_to_caller: only its degrees are checked, so that a caller running
// the planner's check_plan (which includes those rules) can list every
// problem at once, or keep a plan being edited (a project) as it is.
enum class ParallelRules { check, leave_to_caller };
Result<ParallelPlan> parallel_plan_from_json(const nlohmann::json& j, std::string_view document,
                                             ParallelRules rules = ParallelRules::check);
Result<PrecisionPlan> precision_plan_from_json(const nlohmann::json& j, std::string_view document);
Result<Plan> plan_from_json(const nlohmann::json& j, std::string_view document,
                            const PresetCatalog* catalog = nullptr,
                            ParallelRules rules = ParallelRules::check);

// Self-contained JSON (presets inlined) that the readers above read back equal.
nlohmann::json to_json(const GpuSpec& gpu);
nlohmann::json to_json(const Link& link);
nlohmann::json to_json(const Cluster& cluster);
nlohmann::json to_json(const Workload& workload);
nlohmann::json to_json(const ParallelPlan& plan);
nlohmann::json to_json(const PrecisionPlan& plan);
nlohmann::json to_json(const Plan& plan);

// The rules of a ParallelPlan on its own (degrees >= 1, ZeRO 0-3, global batch
// a multiple of dp x micro-batch, ...). Rules that need the cluster or model
// (tp dividing heads, fitting in memory) belong to the planners.
std::vector<Problem> check_parallel_plan(const ParallelPlan& plan);
// The first of those rules: each degree >= 1, ZeRO 0-3.
std::vector<Problem> check_parallel_degrees(const ParallelPlan& plan);

// The kind a document declares with "kind", or the one its fields show.
Result<DocumentKind> detect_kind(const nlohmann::json& j, std::string_view document);

using AnyDocument =
    std::variant<GpuSpec, Link, Cluster, Workload, ParallelPlan, PrecisionPlan, Plan>;

// The cluster or the workload of a file of one document, as the app opens
// them: a document of that kind, or a plan holding one (its own flaws, a
// batch not a multiple, are no reason to refuse what it holds). Errors name
// the file as given.
Result<Cluster> cluster_from_file(const std::string& path, const PresetCatalog& catalog);
Result<Workload> workload_from_file(const std::string& path, const PresetCatalog& catalog);

// Reads any one document of any kind.
Result<AnyDocument> document_from_json(const nlohmann::json& j, std::string_view document,
                                       const PresetCatalog* catalog);

// Validates a file: one document, or a list of documents (a preset file).
// Returns the kinds found, or every problem found, one line each.
Result<std::vector<DocumentKind>> validate_file(const std::string& path,
                                                const PresetCatalog* catalog);
// The same for a document already read; `path` names it in the messages.
Result<std::vector<DocumentKind>> validate_json(const nlohmann::json& document,
                                                const std::string& path,
                                                const PresetCatalog* catalog);

// Writes JSON to a file, pretty-printed, atomically (temporary file + rename).
Status write_json_file(const std::string& path, const nlohmann::json& j);

}  // namespace cs
