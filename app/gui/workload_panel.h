#pragma once
// The workload panel: a model preset or a custom shape (layers, hidden,
// heads, KV heads, FFN, sequence, vocabulary, tokens to train; or a generic
// model's parameters and FLOPs), with the parameter count and the FLOPs per
// token shown live as the fields change.

#include <QWidget>
#include <map>
#include <string>

class QCheckBox;
class QComboBox;
class QFormLayout;
class QLabel;
class QPushButton;

namespace cs {
struct Workload;
}

namespace cs::gui {

class FieldEdit;
class Workspace;

class WorkloadPanel : public QWidget {
  Q_OBJECT

 public:
  explicit WorkloadPanel(Workspace* workspace, QWidget* parent = nullptr);

  FieldEdit* field(const QString& pointer) const;
  QComboBox* presetBox() const { return preset_; }
  QLabel* figuresLabel() const { return figures_; }
  // A workload other plans share stays theirs: the current plan gets the
  // preset as a workload of its own.
  bool applyPreset(const QString& name);
  // Opens a workload JSON file for the current plan as a preset is loaded:
  // a workload document, or a plan document's workload, as `--model FILE`
  // takes them. False, with the file and what is wrong in the panel, when
  // it does not read.
  bool openWorkloadFile(const QString& path);
  QLabel* problemLabel() const { return problem_; }
  // Gives the current plan a copy of its workload to edit on its own.
  bool copyForCurrentPlan();
  QPushButton* copyButton() const { return copy_; }

  // "6.74 B parameters · 42.3 GFLOP per token", for a workload.
  static QString figuresHtml(const Workload& workload);

 private:
  void fillPresetList();
  // Gives the current plan `w` (its own, where others share its workload).
  void use(Workload w, const QString& text);
  void refresh();
  // `typing`: keystrokes in one field merge into one undo step; a click
  // on a check box is a step of its own.
  void edit(const QString& text, const QString& pointer, const QString& value, bool typing);

  Workspace* workspace_;
  QComboBox* preset_;
  QPushButton* copy_;
  QFormLayout* form_;
  QCheckBox* gated_;
  QCheckBox* tied_;
  QCheckBox* dropout_;
  std::map<QString, FieldEdit*> fields_;
  QLabel* problem_;
  QLabel* figures_;
  bool refreshing_ = false;
  std::string shown_;  // the JSON of the workload the fields show
};

}  // namespace cs::gui
