#pragma once
// Option groups shared by subcommands: how a cluster and a model are given on
// the command line (a preset name, a JSON file, or inline flags).

#include <optional>
#include <string>

#include "core/plans.h"
#include "core/presets.h"

namespace CLI {
class App;
}

namespace cs::cli {

struct ClusterOptions {
  std::string cluster;  // preset name or JSON file
  std::string gpu;
  std::optional<int> nodes;
  std::optional<int> gpus_per_node;
  std::string intra_link;
  std::string inter_link;
  std::optional<double> price_per_gpu_hour;

  // positional: the cluster is the first positional argument (describe);
  // otherwise it is given with --cluster.
  void add_to(CLI::App& command, bool positional);
  // The cluster described, with any inline flags applied over the preset or file.
  Cluster resolve(const PresetCatalog& catalog) const;
};

struct ModelOptions {
  std::string model;  // preset name or JSON file
  std::optional<int> layers, hidden, heads, kv_heads, ffn_hidden, seq_len, vocab;
  bool gated_mlp = false;
  std::optional<double> training_tokens;

  void add_to(CLI::App& command);
  bool given() const;
  Workload resolve(const PresetCatalog& catalog) const;
};

// True when the argument names an existing file or ends in ".json".
bool looks_like_file(const std::string& argument);

}  // namespace cs::cli
