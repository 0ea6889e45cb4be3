#include "app/gui/project.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/file_exists.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/presets.h"
#include "core/shown_name.h"

namespace cs::gui {

using nlohmann::json;

namespace {

template <class T>
int index_of(const std::vector<T>& items, std::string_view name) {
  auto it = std::find_if(items.begin(), items.end(), [&](const T& t) { return t.name == name; });
  return it == items.end() ? -1 : int(it - items.begin());
}

void append_line(std::string& text, const std::string& line) {
  if (!text.empty()) text += '\n';
  text += line;
}

// The fields of a project plan besides its parallel and precision plans.
json plan_json(const ProjectPlan& plan) {
  return {{"name", plan.name},
          {"cluster", plan.cluster},
          {"workload", plan.workload},
          {"parallel", to_json(plan.parallel)},
          {"precision", to_json(plan.precision)}};
}

json pin_json(const ProjectPin& pin) {
  return {{"name", pin.name},
          {"cluster", to_json(pin.cluster)},
          {"workload", to_json(pin.workload)},
          {"parallel", to_json(pin.parallel)},
          {"precision", to_json(pin.precision)}};
}

json pins_json(const std::vector<ProjectPin>& pins) {
  json j = json::array();
  for (const ProjectPin& p : pins)
    j.push_back(pin_json(p));
  return j;
}

std::string text_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

int Project::cluster_index(std::string_view name) const {
  return index_of(clusters, name);
}
int Project::workload_index(std::string_view name) const {
  return index_of(workloads, name);
}

const Cluster* Project::current_cluster() const {
  const ProjectPlan* plan = current();
  const int i = plan ? cluster_index(plan->cluster) : -1;
  return i < 0 ? nullptr : &clusters[i];
}

const Workload* Project::current_workload() const {
  const ProjectPlan* plan = current();
  const int i = plan ? workload_index(plan->workload) : -1;
  return i < 0 ? nullptr : &workloads[i];
}

Result<Plan> Project::resolved_plan() const {
  const ProjectPlan* plan = current();
  if (!plan) return Error{"the project has no plan: add one"};
  const Cluster* cluster = current_cluster();
  const Workload* workload = current_workload();
  if (!cluster)
    return Error{"plan \"" + plan->name + "\": no cluster named \"" + plan->cluster + "\""};
  if (!workload) {
    return Error{"plan \"" + plan->name + "\": no workload named \"" + plan->workload + "\""};
  }
  return Plan{*cluster, *workload, plan->parallel, plan->precision};
}

namespace {

Result<Project> project_from_json(const json& j, const std::string& doc);

}  // namespace

// Read as every JSON file is (core/json_reader.h): a damaged document is
// named by line and column, and one nested past reason refused before
// anything recurses through it (100000 levels crashed the app).
Result<Project> project_from_json_text(std::string_view text, std::string_view document) {
  const std::string doc(document);
  std::istringstream in{std::string(text)};
  auto j = read_json_stream(in, doc);
  if (!j) {
    return Error{doc +
                 ": not a JSON document (the file is damaged or not a project): " + j.message()};
  }
  return project_from_json(*j, doc);
}

namespace {

std::string version_text(const json& j) {
  const auto it = j.find("version");
  return it == j.end() ? std::string("nothing") : it->dump();
}

Result<Project> project_from_json(const json& j, const std::string& doc) {
  if (!j.is_object()) return Error{doc + ": /: must be an object"};
  if (text_of(j, "kind") != kProjectKind) {
    return Error{doc + ": /kind: must be \"" + std::string(kProjectKind) +
                 "\" (this is not a ClusterScope project)"};
  }
  auto version = j.find("version");
  // Read whole: get<int>() wrapped 4294967297 to 1 and opened it.
  if (version == j.end() || !version->is_number_integer() ||
      (version->is_number_unsigned() ? version->get<std::uint64_t>() < 1
                                     : version->get<std::int64_t>() < 1)) {
    return Error{doc + ": /version: must be a whole number from 1 (got " + version_text(j) + ")"};
  }
  if (version->is_number_unsigned() ? version->get<std::uint64_t>() > kProjectVersion
                                    : version->get<std::int64_t>() > kProjectVersion) {
    return Error{doc + ": /version: " + version->dump() +
                 " was written by a newer ClusterScope (this one reads up to " +
                 std::to_string(kProjectVersion) + ")"};
  }

  // Every field of the project, of its plans and of its runs is read as the
  // core documents are (core/json_reader.h): a key no reader asks for (a
  // misspelt "curent_plan", a plan's "paralel") or a value of the wrong type
  // is named, never dropped (the plan opened with its defaults, and a save
  // wrote it so).
  Project project;
  std::string errors;
  Diagnostics top;
  ObjectReader reader(j, "", top);
  reader.accept({"kind", "version"});
  auto list = [&](const char* key) -> const json* {
    const json* v = reader.field(key);
    if (v && !v->is_array()) {
      top.add(reader.pointer(key), "must be a list");
      return nullptr;
    }
    return v;
  };
  // The problems of one plan or run, under its own name ("p.json, plan 0").
  auto add_problems = [&](const Diagnostics& diag, const std::string& where) {
    if (!diag.empty()) append_line(errors, diag.to_error(where).message);
  };

  // Clusters and workloads are self-contained documents: no presets needed.
  // A plan naming one refused is not said to name one the project lacks (the
  // follow-on error sent the user looking); nor is any plan once the list is
  // no list, or a refused one's name does not read (a cluster of null, one
  // whose "name" is 7): the names meant are not known.
  struct Refused {
    std::set<std::string, std::less<>> names;
    bool all_named = true;
    void note(const json& item) {
      const json* name = item.is_string() ? &item : nullptr;
      if (item.is_object()) {
        auto it = item.find("name");
        if (it != item.end()) name = &*it;
      }
      if (name && name->is_string() && !name->get_ref<const std::string&>().empty()) {
        names.insert(name->get<std::string>());
      } else {
        all_named = false;
      }
    }
    bool explains(const std::string& name) const { return !all_named || names.count(name) > 0; }
  };
  Refused refused_clusters, refused_workloads;
  // A list of parts, each read by `read` (cluster_from_json, workload_from_json).
  auto parts = [&](const char* key, const char* noun, Refused& refused, auto read, auto& into) {
    const json* items = reader.field(key);
    if (!items) return;
    if (!items->is_array()) {
      top.add(reader.pointer(key), "must be a list");
      refused.all_named = false;
      return;
    }
    for (std::size_t i = 0; i < items->size(); ++i) {
      const json& item = (*items)[i];
      const std::string where = doc + ", " + noun + " " + std::to_string(i);
      if (item.is_string()) {
        // A preset's name, as a plan document may give it: the project holds
        // its parts whole, to open the same wherever the presets differ.
        refused.note(item);
        append_line(errors, where + ": /: names the preset \"" +
                                cut_for_message(item.get_ref<const std::string&>()) +
                                "\", but a project gives each " + noun +
                                " whole (an object), not by a preset's name");
        continue;
      }
      auto part = read(item, where);
      if (!part) {
        refused.note(item);
        append_line(errors, part.message());
      } else if (index_of(into, part->name) >= 0) {
        append_line(errors, where + ": /name: \"" + part->name + "\" is used twice");
      } else {
        into.push_back(std::move(part).value());
      }
    }
  };
  parts(
      "clusters", "cluster", refused_clusters,
      [](const json& v, const std::string& w) { return cluster_from_json(v, w); },
      project.clusters);
  parts(
      "workloads", "workload", refused_workloads,
      [](const json& v, const std::string& w) { return workload_from_json(v, w); },
      project.workloads);
  if (const json* plans = list("plans")) {
    for (std::size_t i = 0; i < plans->size(); ++i) {
      const std::string where = doc + ", plan " + std::to_string(i);
      Diagnostics diag;
      ObjectReader p((*plans)[i], "", diag);
      ProjectPlan plan;
      p.label("name", plan.name, true);
      p.text("cluster", plan.cluster, true);
      p.text("workload", plan.workload, true);
      if (!plan.cluster.empty() && project.cluster_index(plan.cluster) < 0 &&
          !refused_clusters.explains(plan.cluster)) {
        diag.add("/cluster", "no cluster named \"" + plan.cluster + "\" in the project");
      }
      if (!plan.workload.empty() && project.workload_index(plan.workload) < 0 &&
          !refused_workloads.explains(plan.workload)) {
        diag.add("/workload", "no workload named \"" + plan.workload + "\" in the project");
      }
      if (const json* v = p.field("parallel")) {
        // A plan the plan panel flags (sequence parallelism left on at tp 1,
        // a global batch not a multiple) is saved as it is and must open
        // as it is: refusing it locked the whole project out.
        auto parallel =
            parallel_plan_from_json(*v, where + " parallel", ParallelRules::leave_to_caller);
        if (parallel) {
          plan.parallel = parallel.value();
        } else {
          append_line(errors, parallel.message());
        }
      }
      if (const json* v = p.field("precision")) {
        auto precision = precision_plan_from_json(*v, where + " precision");
        if (precision) {
          plan.precision = precision.value();
        } else {
          append_line(errors, precision.message());
        }
      }
      p.finish();
      add_problems(diag, where);
      if (p.is_object()) project.plans.push_back(std::move(plan));
    }
  }
  if (const json* it = reader.field("current_plan")) {
    // Read whole: get<int>() wrapped 4294967296 to plan 0.
    const std::uint64_t plans = std::max<std::uint64_t>(1, project.plans.size());
    const bool indexes =
        it->is_number_unsigned() ? it->get<std::uint64_t>() < plans
        : it->is_number_integer()
            ? it->get<std::int64_t>() >= 0 && std::uint64_t(it->get<std::int64_t>()) < plans
            : false;
    if (!indexes) {
      top.add("/current_plan", "must index the plans (0 to " +
                                   std::to_string(std::max<int>(0, int(project.plans.size()) - 1)) +
                                   ")");
    } else {
      project.current_plan = it->get<int>();
    }
  }
  if (const json* runs = list("runs")) {
    for (std::size_t i = 0; i < runs->size(); ++i) {
      Diagnostics diag;
      ObjectReader r((*runs)[i], "", diag);
      ProjectRun run;
      r.text("title", run.title);
      r.text("store", run.store, true);
      r.text("outcome", run.outcome);
      r.text("message", run.message);
      r.text("started", run.started);
      r.text("plan", run.plan);
      r.finish();
      add_problems(diag, doc + ", run " + std::to_string(i));
      if (r.is_object()) project.runs.push_back(std::move(run));
    }
  }
  if (const json* pinned = list("pinned")) {
    // Whole documents, as the clusters and workloads are: a pin's cluster
    // need not be one of the project's any more.
    for (std::size_t i = 0; i < pinned->size(); ++i) {
      const std::string where = doc + ", pinned plan " + std::to_string(i);
      Diagnostics diag;
      ObjectReader p((*pinned)[i], "", diag);
      ProjectPin pin;
      p.label("name", pin.name, true);
      auto part = [&](const char* key, auto read, auto& into) {
        const json* v = p.field(key, true);
        if (!v) return;
        auto r = read(*v, where + " " + key);
        if (r) {
          into = std::move(r).value();
        } else {
          append_line(errors, r.message());
        }
      };
      part(
          "cluster", [](const json& v, const std::string& w) { return cluster_from_json(v, w); },
          pin.cluster);
      part(
          "workload", [](const json& v, const std::string& w) { return workload_from_json(v, w); },
          pin.workload);
      part(
          "parallel",
          [](const json& v, const std::string& w) {
            return parallel_plan_from_json(v, w, ParallelRules::leave_to_caller);
          },
          pin.parallel);
      part(
          "precision",
          [](const json& v, const std::string& w) { return precision_plan_from_json(v, w); },
          pin.precision);
      p.finish();
      add_problems(diag, where);
      if (p.is_object()) project.pinned.push_back(std::move(pin));
    }
  }
  reader.finish();
  if (!top.empty()) errors = top.to_error(doc).message + (errors.empty() ? "" : "\n" + errors);
  if (!errors.empty()) return Error{errors};
  return project;
}

}  // namespace

namespace {

// The project's file form; without its runs and pins, what an edit changes.
json project_json(const Project& project, bool with_records) {
  json j = {{"kind", kProjectKind}, {"version", kProjectVersion}};
  j["clusters"] = json::array();
  for (const Cluster& c : project.clusters)
    j["clusters"].push_back(to_json(c));
  j["workloads"] = json::array();
  for (const Workload& w : project.workloads)
    j["workloads"].push_back(to_json(w));
  j["plans"] = json::array();
  for (const ProjectPlan& p : project.plans)
    j["plans"].push_back(plan_json(p));
  j["current_plan"] = project.current_plan;
  if (!with_records) return j;
  j["runs"] = json::array();
  for (const ProjectRun& r : project.runs) {
    j["runs"].push_back({{"title", r.title},
                         {"store", r.store},
                         {"outcome", r.outcome},
                         {"message", r.message},
                         {"started", r.started},
                         {"plan", r.plan}});
  }
  j["pinned"] = pins_json(project.pinned);
  return j;
}

}  // namespace

std::string project_to_json_text(const Project& project) {
  return project_json(project, true).dump(2) + '\n';
}

bool same_edits(const Project& a, const Project& b) {
  return project_json(a, false) == project_json(b, false);
}

bool same_pins(const std::vector<ProjectPin>& a, const std::vector<ProjectPin>& b) {
  return pins_json(a) == pins_json(b);
}

Status refuse_named_pipe(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (!std::filesystem::is_fifo(path, ec)) return {};
  return Error{path + ": is a named pipe, not a " + std::string(what) + " file: save the " +
               std::string(what) + " to a file and open that"};
}

Result<Project> load_project(const std::string& path) {
  // A project is also a file saved back to.
  if (Status s = refuse_named_pipe(path, "project"); !s) return s.error();
  auto j = read_json_file(path);
  if (!j) return j.error();
  return project_from_json(*j, path);
}

Status save_project(const std::string& path, const Project& project) {
  // A run store there (the file dialog's "replace?" answered yes, a link to
  // one) was written over, and the run it recorded was lost; the exports
  // refuse it alike.
  if (is_sqlite_file(path)) {
    return Error{path +
                 ": is an SQLite database (a trace store, or another program's); a project "
                 "does not replace it: give another name"};
  }
  return write_json_file(path, json::parse(project_to_json_text(project)));
}

Result<Project> default_project(const PresetCatalog& catalog) {
  auto cluster = catalog.cluster("dgx-h100-32");
  if (!cluster) return Error{"default project: " + cluster.message()};
  const Workload* model = catalog.find_model("llama2-7b");
  if (!model) {
    return Error{"default project: " +
                 catalog.unknown_name_message("model preset", "llama2-7b", catalog.model_names())};
  }
  Project project;
  project.clusters.push_back(std::move(cluster).value());
  project.workloads.push_back(*model);

  // LLaMA-2's own recipe (4M-token batches of 4096-token sequences) on 32
  // H100s: 2-way tensor parallel inside a node, 16-way data parallel with a
  // sharded optimizer, selective recomputation.
  ProjectPlan plan;
  plan.name = "LLaMA-2 7B on 32 H100";
  plan.cluster = project.clusters[0].name;
  plan.workload = project.workloads[0].name;
  plan.parallel.tp = 2;
  plan.parallel.dp = 16;
  plan.parallel.pp = 1;
  plan.parallel.sequence_parallel = true;
  plan.parallel.zero_stage = 1;
  plan.parallel.micro_batch = 1;
  plan.parallel.global_batch = 1024;
  plan.parallel.recompute = Recompute::selective;
  plan.precision = PrecisionPlan::for_compute(Precision::bf16);
  project.plans.push_back(plan);
  return project;
}

std::string label_with_suffix(const std::string& base, std::string_view suffix) {
  const std::size_t taken = utf8_characters(suffix);
  const std::size_t room = kMaxLabelCharacters > taken ? kMaxLabelCharacters - taken : 0;
  return std::string(first_characters(base, room)) + std::string(suffix);
}

std::string unique_name(const std::string& base, const std::vector<std::string>& taken) {
  auto used = [&](const std::string& n) {
    return std::find(taken.begin(), taken.end(), n) != taken.end();
  };
  if (!used(base)) return base;
  for (int i = 2;; ++i) {
    std::string candidate = label_with_suffix(base, " " + std::to_string(i));
    if (!used(candidate)) return candidate;
  }
}

std::string subject_of(const Plan& plan) {
  return to_json(plan.cluster).dump() + '\n' + to_json(plan.workload).dump();
}

int plans_using_cluster(const Project& project, std::string_view name) {
  return int(std::count_if(project.plans.begin(), project.plans.end(),
                           [&](const ProjectPlan& p) { return p.cluster == name; }));
}

int plans_using_workload(const Project& project, std::string_view name) {
  return int(std::count_if(project.plans.begin(), project.plans.end(),
                           [&](const ProjectPlan& p) { return p.workload == name; }));
}

namespace {

// Adds `item` to `items` with a name and a display name none of them has
// (the display name is what the plan panel's list shows); returns its name.
template <typename Item>
std::string add_uniquely(std::vector<Item>& items, Item item) {
  std::vector<std::string> names, shown;
  for (const Item& i : items) {
    names.push_back(i.name);
    shown.push_back(shown_name(i));
  }
  item.name = unique_name(item.name, names);
  item.display_name = unique_name(shown_name(item), shown);
  items.push_back(std::move(item));
  return items.back().name;
}

}  // namespace

namespace {

// The current plan's part (cluster or workload: the project's `parts`, named
// by the plan's `used`) replaced by `part`, or added as its own where other
// plans use it too.
template <typename Part>
void use_part(Project& project, std::vector<Part> Project::*parts, std::string ProjectPlan::*used,
              Part part) {
  ProjectPlan* plan = project.current();
  if (!plan) return;
  std::vector<Part>& items = project.*parts;
  const std::string name = plan->*used;
  const auto same = [&](const Part& p) { return p.name == name; };
  const auto it = std::find_if(items.begin(), items.end(), same);
  const bool shared = std::count_if(project.plans.begin(), project.plans.end(),
                                    [&](const ProjectPlan& p) { return p.*used == name; }) > 1;
  if (shared || it == items.end()) {
    plan->*used = add_uniquely(items, std::move(part));
    return;
  }
  part.name = name;  // plans refer to it by this name
  *it = std::move(part);
}

template <typename Part>
void copy_part(Project& project, std::vector<Part> Project::*parts,
               std::string ProjectPlan::*used) {
  ProjectPlan* plan = project.current();
  if (!plan) return;
  std::vector<Part>& items = project.*parts;
  const auto it = std::find_if(items.begin(), items.end(),
                               [&](const Part& p) { return p.name == plan->*used; });
  if (it == items.end()) return;
  Part copy = *it;
  copy.display_name = label_with_suffix(shown_name(*it), " (copy)");
  plan->*used = add_uniquely(items, std::move(copy));
}

}  // namespace

void use_for_current_plan(Project& project, Cluster cluster) {
  use_part(project, &Project::clusters, &ProjectPlan::cluster, std::move(cluster));
}

void use_for_current_plan(Project& project, Workload workload) {
  use_part(project, &Project::workloads, &ProjectPlan::workload, std::move(workload));
}

void copy_cluster_for_current_plan(Project& project) {
  copy_part(project, &Project::clusters, &ProjectPlan::cluster);
}

void copy_workload_for_current_plan(Project& project) {
  copy_part(project, &Project::workloads, &ProjectPlan::workload);
}

std::vector<Problem> problems_from_message(std::string_view message, std::string_view document) {
  std::vector<Problem> out;
  const std::string prefix = std::string(document) + ": ";
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string_view::npos) end = message.size();
    std::string_view line = message.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    if (line.substr(0, prefix.size()) == prefix) {
      line.remove_prefix(prefix.size());
      const std::size_t colon = line.find(": ");
      if (colon != std::string_view::npos && !line.empty() && line[0] == '/') {
        std::string pointer(line.substr(0, colon));
        if (pointer == "/") pointer.clear();
        out.push_back({pointer, std::string(line.substr(colon + 2))});
        continue;
      }
    }
    out.push_back({"", std::string(line)});
  }
  return out;
}

namespace {

// Applies the edits to `j`; false (with a problem) when a value is not JSON.
bool apply_edits(json& j, const std::vector<FieldValue>& edits, std::vector<Problem>& problems) {
  for (const FieldValue& e : edits) {
    json value = json::parse(e.json, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      problems.push_back({e.pointer, "is not a value (" + e.json + ")"});
      return false;
    }
    try {
      const json::json_pointer pointer(e.pointer);
      if (value.is_null()) {
        if (j.contains(pointer)) {
          json& parent = j[pointer.parent_pointer()];
          if (parent.is_object()) parent.erase(pointer.back());
        }
      } else {
        j[pointer] = std::move(value);
      }
    } catch (const json::exception&) {
      problems.push_back({e.pointer, "is not a field"});
      return false;
    }
  }
  return true;
}

template <class T, class Read>
Result<T> edit_document(const T& original, const std::vector<FieldValue>& edits,
                        std::vector<Problem>* problems_out, Read read) {
  std::vector<Problem> problems;
  json j = to_json(original);
  if (apply_edits(j, edits, problems)) {
    constexpr std::string_view kDocument = "edit";
    auto result = read(j, kDocument);
    if (result) {
      if (problems_out) problems_out->clear();
      return result;
    }
    problems = problems_from_message(result.message(), kDocument);
  }
  std::string text;
  for (const Problem& p : problems)
    append_line(text, (p.pointer.empty() ? "/" : p.pointer) + ": " + p.message);
  if (problems_out) *problems_out = std::move(problems);
  return Error{text};
}

std::string field_text(const json& j, std::string_view pointer) {
  try {
    const json::json_pointer p{std::string(pointer)};
    if (!j.contains(p)) return {};
    const json& v = j.at(p);
    return v.is_string() ? v.get<std::string>() : v.dump();
  } catch (const json::exception&) {
    return {};
  }
}

}  // namespace

Result<Cluster> edit_cluster(const Cluster& cluster, const std::vector<FieldValue>& edits,
                             const PresetCatalog& catalog, std::vector<Problem>* problems) {
  return edit_document(cluster, edits, problems, [&](const json& j, std::string_view doc) {
    return cluster_from_json(j, doc, &catalog);
  });
}

Result<Workload> edit_workload(const Workload& workload, const std::vector<FieldValue>& edits,
                               std::vector<Problem>* problems) {
  return edit_document(workload, edits, problems, [](const json& j, std::string_view doc) {
    return workload_from_json(j, doc);
  });
}

std::string cluster_field(const Cluster& cluster, std::string_view pointer) {
  return field_text(to_json(cluster), pointer);
}

std::string workload_field(const Workload& workload, std::string_view pointer) {
  return field_text(to_json(workload), pointer);
}

namespace {
std::vector<std::string> fields_of(const json& j, const std::vector<std::string>& pointers,
                                   std::string* whole) {
  std::vector<std::string> out;
  out.reserve(pointers.size());
  for (const std::string& p : pointers)
    out.push_back(field_text(j, p));
  if (whole) *whole = j.dump();
  return out;
}
}  // namespace

std::vector<std::string> cluster_fields(const Cluster& cluster,
                                        const std::vector<std::string>& pointers,
                                        std::string* whole) {
  return fields_of(to_json(cluster), pointers, whole);
}

std::vector<std::string> workload_fields(const Workload& workload,
                                         const std::vector<std::string>& pointers,
                                         std::string* whole) {
  return fields_of(to_json(workload), pointers, whole);
}

std::string plan_to_json_text(const Plan& plan) {
  json j = to_json(plan);
  return j.dump(2) + '\n';
}

}  // namespace cs::gui
