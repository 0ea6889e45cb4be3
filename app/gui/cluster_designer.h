#pragma once
// The cluster designer: a preset or a cluster built field by field (nodes,
// GPUs per node and their model, the link inside a node and the network
// between nodes, prices and power), its drawn topology and its totals. Every
// edit is an undo step; a bad value stays in its field, marked with the core
// reader's reason, and is not applied.

#include <QWidget>
#include <map>
#include <string>
#include <vector>

#include "core/hardware.h"
#include "core/problem.h"

class QComboBox;
class QPushButton;
class QLabel;

namespace cs::gui {

class FieldEdit;
class TopologyView;
class Workspace;

// What ends the name of a GPU or link whose figures were edited away from
// its preset's ("NVIDIA H100 SXM5 80GB (edited)").
inline constexpr const char* kEditedMark = " (edited)";

// A cluster's name with its counts made new ones ("DGX H100 pod, 4 nodes (32
// GPUs)" with 2 nodes: "..., 2 nodes (16 GPUs)"); a name that counts
// neither comes back as it was.
QString recounted_name(const QString& name, int nodes, int gpus, int new_nodes, int new_gpus);

class ClusterDesigner : public QWidget {
  Q_OBJECT

 public:
  explicit ClusterDesigner(Workspace* workspace, QWidget* parent = nullptr);

  // The field for a JSON pointer of the cluster ("/nodes", "/inter_node/latency_us").
  FieldEdit* field(const QString& pointer) const;
  QComboBox* presetBox() const { return preset_; }
  QComboBox* gpuBox() const { return gpu_; }
  QComboBox* intraBox() const { return intra_; }
  QComboBox* interBox() const { return inter_; }
  TopologyView* topology() const { return topology_; }
  QLabel* totalsLabel() const { return totals_; }

  QPushButton* copyButton() const { return copy_; }

  // Applies a preset by name; false (with a message in the panel) when
  // missing. A cluster other plans share stays theirs: the current plan gets
  // the preset as a cluster of its own.
  bool applyPreset(const QString& name);
  // Opens a cluster JSON file for the current plan as a preset is loaded: a
  // cluster document (its parts inlined or naming presets), or a plan
  // document's cluster, as `--cluster FILE` takes them. False, with the file
  // and what is wrong in the panel and the cluster as it was, when it does
  // not read.
  bool openClusterFile(const QString& path);
  QLabel* problemLabel() const { return problem_; }
  // Gives the current plan a copy of its cluster to edit on its own.
  bool copyForCurrentPlan();

 private:
  // The preset, GPU and link boxes, from the workspace's catalog.
  void fillPresetLists();
  // Gives the current plan `cluster` (its own, where others share its cluster).
  void use(Cluster cluster, const QString& text);
  void refresh();
  void editFields(const QString& text, std::vector<std::pair<QString, QString>> edits,
                  const QString& merge_key);
  void onFieldEdited(const QString& pointer, const QString& value);
  void showProblems(const std::vector<Problem>& problems,
                    const std::vector<std::pair<QString, QString>>& edits);

  Workspace* workspace_;
  QComboBox* preset_;
  QPushButton* copy_;
  QComboBox* gpu_;
  QComboBox* intra_;
  QComboBox* inter_;
  std::map<QString, FieldEdit*> fields_;
  QLabel* problem_;
  QLabel* totals_;
  TopologyView* topology_;
  bool refreshing_ = false;
  std::string shown_;  // the JSON of the cluster the fields show
};

}  // namespace cs::gui
