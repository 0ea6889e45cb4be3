#include "core/presets.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "core/format.h"
#include "core/host_probe.h"
#include "core/json_reader.h"
#include "core/model_json.h"

#ifndef CLUSTERSCOPE_SOURCE_RESOURCES
#define CLUSTERSCOPE_SOURCE_RESOURCES ""
#endif
#ifndef CLUSTERSCOPE_INSTALL_RESOURCES
#define CLUSTERSCOPE_INSTALL_RESOURCES "share/clusterscope"
#endif

namespace cs {

namespace fs = std::filesystem;

namespace {

bool is_presets_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "gpus.json", ec) &&
         fs::is_regular_file(dir / "clusters.json", ec);
}

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

template <class T>
std::vector<std::string> names_of(const std::vector<T>& items) {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const T& item : items)
    out.push_back(item.name);
  return out;
}

template <class T>
const T* find_named(const std::vector<T>& items, std::string_view name) {
  auto it = std::find_if(items.begin(), items.end(), [&](const T& t) { return t.name == name; });
  return it == items.end() ? nullptr : &*it;
}

template <class T>
void add_named(std::vector<T>& items, T item) {
  auto it =
      std::find_if(items.begin(), items.end(), [&](const T& t) { return t.name == item.name; });
  if (it == items.end()) {
    items.push_back(std::move(item));
  } else {
    *it = std::move(item);
  }
}

// Reads one preset file: a list of documents of one kind, each with a unique
// name and a "source".
template <class T, class Parse>
Status load_list(const fs::path& file, std::vector<T>& out, Parse parse) {
  auto j = read_json_file(file.string());
  if (!j) return j.error();
  if (!j->is_array()) return Error{file.string() + ": /: must be a list of presets"};
  std::string errors;
  auto fail = [&](std::string message) {
    if (!errors.empty()) errors += '\n';
    errors += std::move(message);
  };
  for (std::size_t i = 0; i < j->size(); ++i) {
    const std::string where = file.string() + " [" + std::to_string(i) + "]";
    Result<T> item = parse((*j)[i], where);
    if (!item) {
      fail(item.message());
      continue;
    }
    if (item->source.empty()) fail(where + ": /source: is required for a preset");
    if (find_named(out, item->name))
      fail(where + ": /name: \"" + cut_for_message(item->name) + "\" is listed twice");
    out.push_back(std::move(item).value());
  }
  if (!errors.empty()) return Error{errors};
  return {};
}

}  // namespace

std::string node_link_preset(const GpuSpec& gpu) {
  return gpu.board_link.empty() ? "pcie4" : gpu.board_link;
}

Result<fs::path> find_presets_dir() {
  if (const char* env = std::getenv("CLUSTERSCOPE_PRESETS"); env && *env) {
    if (is_presets_dir(env)) return fs::path(env);
    return Error{std::string("CLUSTERSCOPE_PRESETS is ") + env +
                 ": not a presets folder (gpus.json and clusters.json missing)"};
  }
  std::vector<fs::path> candidates;
  if (fs::path exe = executable_dir(); !exe.empty()) {
    candidates.push_back(exe.parent_path() / CLUSTERSCOPE_INSTALL_RESOURCES / "presets");
  }
  if (*CLUSTERSCOPE_SOURCE_RESOURCES) {
    candidates.push_back(fs::path(CLUSTERSCOPE_SOURCE_RESOURCES) / "presets");
  }
  for (const fs::path& dir : candidates) {
    if (is_presets_dir(dir)) return dir;
  }
  return Error{
      "presets not found: set CLUSTERSCOPE_PRESETS to the resources/presets folder "
      "(looked beside the executable and in the source tree)"};
}

Result<PresetCatalog> PresetCatalog::load(const fs::path& dir) {
  if (!is_presets_dir(dir)) {
    return Error{dir.string() + ": not a presets folder (gpus.json and clusters.json missing)"};
  }
  PresetCatalog c;
  c.dir_ = dir;
  Status s = load_list(dir / "gpus.json", c.gpus_, gpu_from_json);
  if (s) s = load_list(dir / "links.json", c.links_, link_from_json);
  if (s) s = load_list(dir / "models.json", c.models_, workload_from_json);
  if (s) {
    s = load_list(dir / "clusters.json", c.clusters_, [&](const auto& j, const std::string& where) {
      return cluster_from_json(j, where, &c);
    });
  }
  if (!s) return s.error();
  if (find_named(c.clusters_, kThisMachine)) {
    return Error{(dir / "clusters.json").string() + ": \"" + std::string(kThisMachine) +
                 "\" is reserved for the detected machine"};
  }
  return c;
}

Result<PresetCatalog> PresetCatalog::load_default() {
  auto dir = find_presets_dir();
  if (!dir) return dir.error();
  auto catalog = load(*dir);
  if (!catalog) return catalog;
  if (const fs::path user = user_presets_dir(); !user.empty()) {
    if (Status s = catalog->load_user_presets(user); !s) {
      return Error{s.message() + "\n(user presets in " + user.string() +
                   ": fix or remove the file named above)"};
    }
  }
  return catalog;
}

Result<PresetCatalog> PresetCatalog::load_default_or_shipped(std::string& user_error) {
  user_error.clear();
  auto loaded = load_default();
  if (loaded) return loaded;
  auto dir = find_presets_dir();
  auto shipped = dir ? load(*dir) : Result<PresetCatalog>(dir.error());
  if (!shipped) return loaded;  // not the user's file: its error stands
  user_error = loaded.message();
  return shipped;
}

fs::path user_presets_dir() {
  if (const char* env = std::getenv("CLUSTERSCOPE_USER_PRESETS"); env && *env) return env;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) {
    return fs::path(data) / "clusterscope" / "presets";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".local" / "share" / "clusterscope" / "presets";
  }
  return {};
}

Status PresetCatalog::load_user_presets(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  // A file named as the folder was passed over by every command but calibrate.
  if (!fs::is_directory(dir, ec)) {
    return Error{dir.string() +
                 ": is not a folder: user presets are read from a folder of *.json files"};
  }
  std::vector<fs::path> files;
  std::vector<std::string> not_files;  // *.json that are no file: said, not read
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    // A dangling link, a link loop, a FIFO or a folder named *.json is not a
    // preset file: passed over, said why (a folder gpus.json was silently
    // ignored), and its own error kept apart from the listing's.
    std::error_code entry_ec;
    if (entry.path().extension() != ".json") continue;
    if (entry.is_regular_file(entry_ec)) {
      files.push_back(entry.path());
    } else {
      not_files.push_back(entry.path().string() + (entry.is_directory(entry_ec)
                                                       ? ": is a folder, not a preset file; passed over"
                                                       : ": is not a readable file; passed over"));
    }
  }
  if (ec) return Error{dir.string() + ": cannot list the user presets: " + ec.message()};
  std::sort(files.begin(), files.end());

  // Everything is read into a copy first: a broken file leaves the catalog as it was.
  PresetCatalog merged = *this;
  merged.skipped_user_files_ = not_files;
  std::map<std::string, std::string> seen;  // "kind name" -> file, for duplicates
  for (const fs::path& file : files) {
    auto j = read_json_file(file.string());
    if (!j) return j.error();
    std::vector<nlohmann::json> docs;
    if (j->is_array()) {
      docs.assign(j->begin(), j->end());
    } else if (j->is_object()) {
      docs.push_back(*j);
    } else {
      return Error{file.string() + ": /: must be a preset document or a list of them"};
    }
    // A file of plans only is no preset file: passed over, said why.
    const bool plans_only =
        !docs.empty() && std::all_of(docs.begin(), docs.end(), [&](const auto& d) {
          auto kind = detect_kind(d, file.string());
          return kind && (*kind == DocumentKind::plan || *kind == DocumentKind::parallel_plan ||
                          *kind == DocumentKind::precision_plan);
        });
    if (plans_only) {
      merged.skipped_user_files_.push_back(file.string() +
                                           ": holds plans, not presets; passed over");
      continue;
    }
    std::string errors;
    auto fail = [&](std::string message) {
      errors += (errors.empty() ? "" : "\n") + std::move(message);
    };
    // Clusters last, so that they can name the file's GPUs and links.
    for (const bool clusters : {false, true}) {
      for (std::size_t i = 0; i < docs.size(); ++i) {
        const std::string where =
            file.string() + (j->is_array() ? " [" + std::to_string(i) + "]" : "");
        auto kind = detect_kind(docs[i], where);
        if (!kind) {
          if (!clusters) fail(kind.message());
          continue;
        }
        if ((*kind == DocumentKind::cluster) != clusters) continue;
        auto doc = document_from_json(docs[i], where, &merged);
        if (!doc) {
          fail(doc.message());
          continue;
        }
        std::string key;
        std::visit(
            [&](auto& d) {
              using T = std::decay_t<decltype(d)>;
              if constexpr (std::is_same_v<T, GpuSpec> || std::is_same_v<T, Link> ||
                            std::is_same_v<T, Workload> || std::is_same_v<T, Cluster>) {
                key = std::string(to_string(*kind)) + " " + d.name;
                bool replaces = false;
                if constexpr (std::is_same_v<T, GpuSpec>) replaces = find_gpu(d.name);
                if constexpr (std::is_same_v<T, Link>) replaces = find_link(d.name);
                if constexpr (std::is_same_v<T, Workload>) replaces = find_model(d.name);
                if constexpr (std::is_same_v<T, Cluster>) replaces = find_named(clusters_, d.name);
                if (replaces) merged.replaced_.emplace_back(file, key);
                if (d.source.empty()) fail(where + ": /source: is required for a preset");
                if constexpr (std::is_same_v<T, Cluster>) {
                  if (d.name == kThisMachine) {
                    fail(where + ": /name: \"" + std::string(kThisMachine) +
                         "\" is reserved for the detected machine");
                  }
                }
                merged.add(std::move(d));
              } else {
                fail(where + ": a " + std::string(to_string(*kind)) +
                     " is not a preset (user presets hold GPUs, links, models and clusters)");
              }
            },
            *doc);
        if (key.empty()) continue;
        if (auto [it, fresh] = seen.emplace(key, where); !fresh) {
          fail(where + ": /name: " + key + " is also defined in " + it->second);
        }
      }
    }
    if (!errors.empty()) return Error{errors};
    merged.user_files_.push_back(file);
  }
  // A GPU's board link names a link preset: a misspelt one was taken here,
  // then failed every command that built its nodes, naming neither the file
  // nor the field.
  for (const GpuSpec& g : merged.gpus_) {
    const auto from = seen.find("gpu " + g.name);
    if (from == seen.end() || g.board_link.empty() || merged.find_link(g.board_link)) continue;
    return Error{from->second + ": /board_link: " +
                 merged.unknown_name_message("link preset", g.board_link, merged.link_names())};
  }
  // A shipped cluster holds a copy of its GPU and links, made when it was
  // read: a user preset of the same name stands in there too (one name was
  // two GPUs: 94 GiB on its own, the shipped 80 GiB in its clusters).
  for (Cluster& c : merged.clusters_) {
    if (seen.count("cluster " + c.name)) continue;  // the user's own, bound as written
    if (c.gpu && seen.count("gpu " + c.gpu->name)) c.gpu = *merged.find_gpu(c.gpu->name);
    if (seen.count("link " + c.intra_node.name)) c.intra_node = *merged.find_link(c.intra_node.name);
    if (c.inter_node && seen.count("link " + c.inter_node->name))
      c.inter_node = *merged.find_link(c.inter_node->name);
  }
  *this = std::move(merged);
  return {};
}

Result<PresetBundle> read_preset_bundle(const fs::path& file, const PresetCatalog& catalog) {
  PresetCatalog scratch = catalog;
  auto j = read_json_file(file.string());
  if (!j) return j.error();
  std::vector<nlohmann::json> docs;
  if (j->is_array()) {
    docs.assign(j->begin(), j->end());
  } else {
    docs.push_back(*j);
  }
  PresetBundle bundle;
  for (const bool clusters : {false, true}) {
    for (std::size_t i = 0; i < docs.size(); ++i) {
      const std::string where =
          file.string() + (j->is_array() ? " [" + std::to_string(i) + "]" : "");
      auto kind = detect_kind(docs[i], where);
      if (!kind) return kind.error();
      if ((*kind == DocumentKind::cluster) != clusters) continue;
      auto doc = document_from_json(docs[i], where, &scratch);
      if (!doc) return doc.error();
      if (auto* g = std::get_if<GpuSpec>(&*doc)) {
        scratch.add(*g);
        bundle.gpus.push_back(*g);
      } else if (auto* l = std::get_if<Link>(&*doc)) {
        scratch.add(*l);
        bundle.links.push_back(*l);
      } else if (auto* w = std::get_if<Workload>(&*doc)) {
        bundle.models.push_back(*w);
      } else if (auto* c = std::get_if<Cluster>(&*doc)) {
        bundle.clusters.push_back(*c);
      } else {
        return Error{where + ": a " + std::string(to_string(*kind)) + " is not a preset"};
      }
    }
  }
  return bundle;
}

Status write_preset_bundle(const fs::path& file, const PresetBundle& bundle) {
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  if (ec) return Error{file.parent_path().string() + ": cannot create the folder: " + ec.message()};
  nlohmann::json list = nlohmann::json::array();
  for (const GpuSpec& g : bundle.gpus)
    list.push_back(to_json(g));
  for (const Link& l : bundle.links)
    list.push_back(to_json(l));
  for (const Workload& w : bundle.models)
    list.push_back(to_json(w));
  for (const Cluster& c : bundle.clusters)
    list.push_back(to_json(c));
  // What is written must load again: presets fitted from garbage (a 2e30
  // TFLOP/s peak) made every later command refuse the whole folder.
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto back = document_from_json(list[i], file.string() + " [" + std::to_string(i) + "]", nullptr);
    if (!back) return Error{back.message() + "\n(not saved: the presets would not load)"};
  }
  return write_json_file(file.string(), list);
}

std::vector<std::string> PresetCatalog::replaced_by(const fs::path& user_file) const {
  std::vector<std::string> out;
  for (const auto& [file, what] : replaced_) {
    if (file == user_file) out.push_back(what);
  }
  return out;
}

fs::path PresetCatalog::replacement_file(std::string_view kind, std::string_view name) const {
  const std::string key = std::string(kind) + " " + std::string(name);
  for (const auto& [file, what] : replaced_) {
    if (what == key) return file;
  }
  return {};
}

const GpuSpec* PresetCatalog::find_gpu(std::string_view name) const {
  return find_named(gpus_, name);
}
const Link* PresetCatalog::find_link(std::string_view name) const {
  return find_named(links_, name);
}
const Workload* PresetCatalog::find_model(std::string_view name) const {
  return find_named(models_, name);
}

Result<Cluster> PresetCatalog::cluster(std::string_view name) const {
  if (name == kThisMachine) return this_machine_cluster(probe_host(), *this);
  if (const Cluster* c = find_named(clusters_, name)) return *c;
  return Error{unknown_name_message("cluster preset", name, cluster_names())};
}

namespace {

// A CUDA device name without what follows it in a rank's device (" (GPU 0)").
std::string_view board_name(std::string_view name) {
  while (!name.empty() && name.back() == ' ')
    name.remove_suffix(1);
  if (!name.empty() && name.back() == ')') {
    if (const std::size_t open = name.rfind(" ("); open != std::string_view::npos)
      name = name.substr(0, open);
  }
  while (!name.empty() && name.back() == ' ')
    name.remove_suffix(1);
  return name;
}

// Whether `pattern` is the board name's last words: "H200" names
// "NVIDIA H200", not "NVIDIA H200 NVL" (another board: 600 W, lower peaks),
// "NVIDIA GH200 480GB" or a MIG slice ("NVIDIA H100 80GB HBM3 MIG 1g.10gb").
bool names_board(std::string_view board, std::string_view pattern) {
  if (pattern.empty() || board.size() < pattern.size() ||
      board.substr(board.size() - pattern.size()) != pattern)
    return false;
  const std::size_t at = board.size() - pattern.size();
  return at == 0 || !std::isalnum(static_cast<unsigned char>(board[at - 1]));
}

}  // namespace

bool names_device(const GpuSpec& gpu, std::string_view cuda_device_name) {
  const std::string_view board = board_name(cuda_device_name);
  return std::any_of(gpu.device_names.begin(), gpu.device_names.end(),
                     [&](const std::string& pattern) { return names_board(board, pattern); });
}

std::vector<std::string> PresetCatalog::clusters_of(const GpuSpec& gpu) const {
  std::vector<std::string> names;
  for (const Cluster& c : clusters_)
    if (c.gpu && c.gpu->name == gpu.name) names.push_back(c.name);
  return names;
}

const GpuSpec* PresetCatalog::match_device(std::string_view cuda_device_name) const {
  // The longest matching pattern wins ("H100 PCIe" before "H100").
  const std::string_view board = board_name(cuda_device_name);
  const GpuSpec* best = nullptr;
  std::size_t best_length = 0;
  for (const GpuSpec& g : gpus_) {
    for (const std::string& pattern : g.device_names) {
      if (pattern.size() > best_length && names_board(board, pattern)) {
        best = &g;
        best_length = pattern.size();
      }
    }
  }
  return best;
}

std::string PresetCatalog::unknown_name_message(std::string_view what, std::string_view name,
                                                const std::vector<std::string>& names) const {
  std::string message = "unknown " + std::string(what) + " \"" + cut_for_message(name) + "\"";
  if (std::string near = closest_name(name, names); !near.empty()) {
    message += ": did you mean \"" + near + "\"?";
  }
  message += " (known: ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) message += ", ";
    message += cut_for_message(names[i]);
  }
  return message + ")";
}

std::vector<std::string> PresetCatalog::gpu_names() const {
  return names_of(gpus_);
}
std::vector<std::string> PresetCatalog::link_names() const {
  return names_of(links_);
}
std::vector<std::string> PresetCatalog::model_names() const {
  return names_of(models_);
}
std::vector<std::string> PresetCatalog::cluster_names() const {
  std::vector<std::string> names = names_of(clusters_);
  names.emplace_back(kThisMachine);
  return names;
}

void PresetCatalog::add(GpuSpec gpu) {
  add_named(gpus_, std::move(gpu));
}
void PresetCatalog::add(Link link) {
  add_named(links_, std::move(link));
}
void PresetCatalog::add(Workload model) {
  add_named(models_, std::move(model));
}
void PresetCatalog::add(Cluster cluster) {
  add_named(clusters_, std::move(cluster));
}

}  // namespace cs
