#pragma once
// The preset catalog: GPUs, links, models and clusters from
// resources/presets/*.json, each entry citing its public source, plus the
// cluster "this-machine", detected at run time.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/plans.h"
#include "core/result.h"

namespace cs {

inline constexpr std::string_view kThisMachine = "this-machine";

// The link preset between the GPUs of a node of `gpu` when nothing else is
// said: its board's own fabric, else PCIe 4.0.
std::string node_link_preset(const GpuSpec& gpu);

// Whether one of gpu's device_names ends a CUDA device name (a rank's
// " (GPU n)" aside): "H200" names "NVIDIA H200", not "NVIDIA H200 NVL".
bool names_device(const GpuSpec& gpu, std::string_view cuda_device_name);

// Where presets live, first found wins: $CLUSTERSCOPE_PRESETS, then
// <exe>/../share/clusterscope/presets (installed), then the source tree.
// $CLUSTERSCOPE_PRESETS set to anything but a presets folder is an error
// (a user who names a folder means it), not passed over.
Result<std::filesystem::path> find_presets_dir();

// Where the user's own presets live (calibrated machines, their own GPUs and
// clusters), merged over the shipped ones: $CLUSTERSCOPE_USER_PRESETS, else
// $XDG_DATA_HOME/clusterscope/presets, else ~/.local/share/clusterscope/presets.
// Empty when none of those variables is set.
std::filesystem::path user_presets_dir();

// Presets of several kinds, as one user preset file holds them.
struct PresetBundle {
  std::vector<GpuSpec> gpus;
  std::vector<Link> links;
  std::vector<Workload> models;
  std::vector<Cluster> clusters;
};

// Writes a user preset file: a JSON list of the bundle's documents, each with
// its "kind" (clusters inline their GPU and links), atomically. Creates the
// folder.
Status write_preset_bundle(const std::filesystem::path& file, const PresetBundle& bundle);
class PresetCatalog;
// Reads a preset file (one document or a list; clusters may name presets
// of `catalog`), with errors that name the file.
Result<PresetBundle> read_preset_bundle(const std::filesystem::path& file,
                                        const PresetCatalog& catalog);

class PresetCatalog {
 public:
  // Reads gpus.json, links.json, models.json and clusters.json from `dir`.
  static Result<PresetCatalog> load(const std::filesystem::path& dir);
  // load(find_presets_dir()) and the user's presets over them
  // (load_user_presets(user_presets_dir())), with a clear message when none
  // is found or a user file is broken.
  static Result<PresetCatalog> load_default();
  // load_default(); or, where only the user's presets do not load, the
  // shipped ones alone, with why in `user_error`: what the app and
  // `clusterscope presets` show under a warning (they had no presets at all).
  static Result<PresetCatalog> load_default_or_shipped(std::string& user_error);

  // Adds every *.json file of `dir`, in name order, over the presets loaded:
  // each file holds one preset document or a list of them, of any kind
  // (GPUs, links and models first, then clusters, which may name presets of
  // either folder); an entry replaces a shipped one of the same name. A
  // missing folder adds nothing; a file that does not read is an error that
  // names it, and nothing of that folder is added (a file of plans only
  // is passed over: see skipped_user_files).
  Status load_user_presets(const std::filesystem::path& dir);
  // The user files merged so far.
  const std::vector<std::filesystem::path>& user_files() const { return user_files_; }
  // Files of the folder that hold only plans (a run's plan saved there, say):
  // passed over, each with why, instead of refusing the folder.
  const std::vector<std::string>& skipped_user_files() const { return skipped_user_files_; }
  // What a user file put in place of a preset of the same kind and name
  // loaded before it (a shipped datasheet): "gpu h100-sxm", by file. Said
  // where the presets are listed: it changes every cluster of that GPU.
  std::vector<std::string> replaced_by(const std::filesystem::path& user_file) const;
  // The other way round: the user file whose preset of that kind ("gpu",
  // "link", "workload", "cluster") and name stands in place of a shipped
  // one; empty when none does. Said where presets are picked.
  std::filesystem::path replacement_file(std::string_view kind, std::string_view name) const;

  const std::vector<GpuSpec>& gpus() const { return gpus_; }
  const std::vector<Link>& links() const { return links_; }
  const std::vector<Workload>& models() const { return models_; }
  const std::vector<Cluster>& clusters() const { return clusters_; }  // without this-machine
  const std::filesystem::path& directory() const { return dir_; }

  const GpuSpec* find_gpu(std::string_view name) const;
  const Link* find_link(std::string_view name) const;
  const Workload* find_model(std::string_view name) const;
  // A cluster preset, or this machine when name is "this-machine".
  Result<Cluster> cluster(std::string_view name) const;
  // The GPU preset one of whose device_names ends a CUDA device name (a
  // rank's " (GPU n)" aside), if any: a board with more words after them
  // is another board.
  const GpuSpec* match_device(std::string_view cuda_device_name) const;
  // The cluster presets whose nodes hold `gpu`, by name.
  std::vector<std::string> clusters_of(const GpuSpec& gpu) const;

  // "unknown GPU preset "h10": did you mean "h100-sxm"? (presets: a, b, ...)"
  std::string unknown_name_message(std::string_view what, std::string_view name,
                                   const std::vector<std::string>& names) const;
  std::vector<std::string> gpu_names() const;
  std::vector<std::string> link_names() const;
  std::vector<std::string> model_names() const;
  std::vector<std::string> cluster_names() const;  // with this-machine

  // Adds entries (tests, calibrated presets). Replaces an entry of the same name.
  void add(GpuSpec gpu);
  void add(Link link);
  void add(Workload model);
  void add(Cluster cluster);

 private:
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> user_files_;
  std::vector<std::string> skipped_user_files_;
  std::vector<std::pair<std::filesystem::path, std::string>> replaced_;  // file, "kind name"
  std::vector<GpuSpec> gpus_;
  std::vector<Link> links_;
  std::vector<Workload> models_;
  std::vector<Cluster> clusters_;
};

}  // namespace cs
