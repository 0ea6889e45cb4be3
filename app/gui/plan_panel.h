#pragma once
// The plan panel: which cluster and workload the current plan uses, and its
// controls (DP, TP, PP, virtual stages, sequence parallel, ZeRO stage,
// micro-batch, global batch, recomputation, precision, fused attention).
// Each control lists the values the planner finds valid for this cluster
// and model; the others are greyed with the reason, and a value that does
// not fit in memory says so.

#include <QWidget>
#include <array>
#include <memory>
#include <string>

#include "app/gui/analysis.h"

class QComboBox;
class QLabel;
class QLineEdit;

namespace cs::gui {

class Workspace;

// The value a control has in a plan, and a plan with a control changed.
int controlValue(const ParallelPlan& parallel, const PrecisionPlan& precision, plan::Control c);
void setControlValue(ParallelPlan& parallel, PrecisionPlan& precision, plan::Control c, int value);
QString controlLabel(plan::Control c);

class PlanPanel : public QWidget {
  Q_OBJECT

 public:
  PlanPanel(Workspace* workspace, AnalysisService* analysis, QWidget* parent = nullptr);

  QComboBox* controlBox(plan::Control c) const { return boxes_[std::size_t(c)]; }
  QLabel* controlReason(plan::Control c) const { return reasons_[std::size_t(c)]; }
  QComboBox* clusterBox() const { return cluster_; }
  QComboBox* workloadBox() const { return workload_; }
  QLabel* problemsLabel() const { return problems_; }

  // Sets a control as the user would (one undo step).
  void setControl(plan::Control c, int value);

 private:
  void refresh();
  void showAnalysis(const std::shared_ptr<const PlanAnalysis>& analysis);

  Workspace* workspace_;
  AnalysisService* analysis_;
  QLineEdit* name_;
  // The plan whose name the field shows (its index and name): what the user
  // types there renames that plan, and no other.
  int name_plan_ = -1;
  std::string name_shown_;
  QComboBox* cluster_;
  QComboBox* workload_;
  QLabel* shape_;
  std::array<QComboBox*, kControlCount> boxes_{};
  std::array<QLabel*, kControlCount> reasons_{};
  std::array<std::vector<plan::ControlOption>, kControlCount> shown_options_;
  QLabel* problems_;
  bool refreshing_ = false;
};

}  // namespace cs::gui
