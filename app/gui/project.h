#pragma once
// A ClusterScope project: the clusters, workloads and plans a user works on
// (the runs linked to them come with the run views), and its file form. The
// file is JSON whose clusters and workloads are the core model's own
// documents (core/model_json.h, presets inlined), so `clusterscope validate`
// reads each of them. Qt-free: the CLI may read projects too.

#include <string>
#include <string_view>
#include <vector>

#include "core/plans.h"
#include "core/problem.h"
#include "core/result.h"

namespace cs {
class PresetCatalog;
}

namespace cs::gui {

// 2: pinned plans. Version 1 files read as they are.
inline constexpr int kProjectVersion = 2;
inline constexpr std::string_view kProjectKind = "clusterscope_project";
inline constexpr std::string_view kProjectSuffix = ".clusterscope.json";

// A plan of the project: a cluster and a workload named from the project's
// lists, and how to split and store it.
struct ProjectPlan {
  std::string name;
  std::string cluster;   // Cluster::name of one of Project::clusters
  std::string workload;  // Workload::name of one of Project::workloads
  ParallelPlan parallel;
  PrecisionPlan precision;
};

// A run launched from the project (or opened into it): its store and how it ended.
struct ProjectRun {
  std::string title;
  std::string store;    // the run store's path
  std::string outcome;  // launch::Outcome's name: completed, cancelled, crashed, ...
  std::string message;  // the launcher's report, in a sentence or a few
  std::string started;  // UTC, ISO 8601
  std::string plan;     // the project's plan it ran
};

// A plan pinned to compare (compare_view.h): how it splits and stores, and
// the cluster and workload it was estimated for, whole. Its figures are of
// those alone (subject_of), and the project's own may have changed since.
struct ProjectPin {
  std::string name;
  Cluster cluster;
  Workload workload;
  ParallelPlan parallel;
  PrecisionPlan precision;
};

struct Project {
  std::vector<Cluster> clusters;
  std::vector<Workload> workloads;
  std::vector<ProjectPlan> plans;
  int current_plan = 0;          // index into plans (0 when there is none)
  std::vector<ProjectRun> runs;  // oldest first
  // Pinned plans, in the order shown. As the runs, not an edit: undo and
  // redo keep them, and same_edits() passes them over.
  std::vector<ProjectPin> pinned;

  bool has_plan() const { return current_plan >= 0 && current_plan < int(plans.size()); }
  const ProjectPlan* current() const { return has_plan() ? &plans[current_plan] : nullptr; }
  ProjectPlan* current() { return has_plan() ? &plans[current_plan] : nullptr; }

  int cluster_index(std::string_view name) const;   // -1 when absent
  int workload_index(std::string_view name) const;  // -1 when absent
  const Cluster* current_cluster() const;
  const Workload* current_workload() const;

  // The current plan with its cluster and workload looked up; an error names
  // what is missing.
  Result<Plan> resolved_plan() const;
};

// Reads a project; errors name the document, the JSON pointer and the rule,
// one per line ("p.clusterscope.json, cluster 0: /nodes: must be between 1 and 1048576 (got 0)").
Result<Project> project_from_json_text(std::string_view text, std::string_view document);
std::string project_to_json_text(const Project& project);
// Whether the two hold the same clusters, workloads, plans and current plan:
// all that an edit changes (the runs recorded and the plans pinned are not edits).
bool same_edits(const Project& a, const Project& b);
bool same_pins(const std::vector<ProjectPin>& a, const std::vector<ProjectPin>& b);

// An error for a named pipe given as a file to open (`what`: "project",
// "cluster"): reading one blocks the GUI thread until a program writes to
// it (the app hung, and could not quit); ok for anything else.
Status refuse_named_pipe(const std::string& path, std::string_view what);
Result<Project> load_project(const std::string& path);
// Written atomically (temporary file + rename): a crash never leaves half a file.
// An SQLite database at `path` (a run store, or a link to one) is refused.
Status save_project(const std::string& path, const Project& project);

// The project a new user sees: a DGX H100 pod, LLaMA-2 7B, and a plan for it.
// Fails with a message when a preset it needs is missing.
Result<Project> default_project(const PresetCatalog& catalog);

// `base`, or "base 2", "base 3", ...: the first not in `taken`, within
// the names' length (label_with_suffix).
std::string unique_name(const std::string& base, const std::vector<std::string>& taken);

// `base` + `suffix` ("LLaMA-2 7B (copy)"), `base` cut as needed so that the
// name stays within the kMaxLabelCharacters a project reads back (a copy of
// a longest name made a project that did not open again).
std::string label_with_suffix(const std::string& base, std::string_view suffix);

// A plan's cluster and workload as one text: figures estimated for one
// (a search's rows, a pinned plan) apply to it alone.
std::string subject_of(const Plan& plan);

// Plans of the project that use the cluster (workload) of that name.
int plans_using_cluster(const Project& project, std::string_view name);
int plans_using_workload(const Project& project, std::string_view name);

// Makes `cluster` (`workload`) the current plan's. It takes the place of
// the one the plan uses, under that one's name (plans refer to it by name);
// where other plans use that one too, it is added to the project as the
// current plan's own, under a name and a display name no other has, and the
// one it used stays for the plans that share it.
void use_for_current_plan(Project& project, Cluster cluster);
void use_for_current_plan(Project& project, Workload workload);

// Gives the current plan a copy of its cluster (workload) of its own,
// shown as "<display name> (copy)", for an edit the plans sharing the
// original do not see.
void copy_cluster_for_current_plan(Project& project);
void copy_workload_for_current_plan(Project& project);

// Splits a core error message "<document>: <pointer>: <rule>" (one per line)
// back into problems; lines of other documents keep their whole text.
std::vector<Problem> problems_from_message(std::string_view message, std::string_view document);

// Edits of fields of a cluster or workload, made on its JSON form (pointers
// and datasheet units as in core/model_json.h) and read back through the core
// readers, so that a bad value gets the same message as in a file. `json` is
// a JSON text ("4", "\"ib-ndr\"", "null" removes the field); a string where a
// cluster takes a GPU or link names a preset of `catalog`. On failure the
// error lists the problems, also returned one by one in `problems`.
struct FieldValue {
  std::string pointer;
  std::string json;
};
Result<Cluster> edit_cluster(const Cluster& cluster, const std::vector<FieldValue>& edits,
                             const PresetCatalog& catalog,
                             std::vector<Problem>* problems = nullptr);
Result<Workload> edit_workload(const Workload& workload, const std::vector<FieldValue>& edits,
                               std::vector<Problem>* problems = nullptr);

// The JSON value at `pointer` of the cluster's / workload's JSON form, as
// text ("" when absent): what a field shows.
std::string cluster_field(const Cluster& cluster, std::string_view pointer);
std::string workload_field(const Workload& workload, std::string_view pointer);
// Several fields at once (one conversion to JSON), and the whole JSON text
// (to tell whether anything changed).
std::vector<std::string> cluster_fields(const Cluster& cluster,
                                        const std::vector<std::string>& pointers,
                                        std::string* whole = nullptr);
std::vector<std::string> workload_fields(const Workload& workload,
                                         const std::vector<std::string>& pointers,
                                         std::string* whole = nullptr);

// The plan as the JSON document `clusterscope run` and `clusterscope plan` read.
std::string plan_to_json_text(const Plan& plan);

}  // namespace cs::gui
