#pragma once
// "Calibrate this machine": the same calibration `clusterscope calibrate`
// runs (app/calibration), started from the app. The sweep runs on a worker
// thread; the panel polls its progress (the launcher reports it from a
// thread Qt does not own, which must not call into Qt), and the fit comes
// back as a value: a table of every fitted quantity with the quality of its
// fit, and the cluster presets saved for the planner. "Learn from runs"
// refines those presets from run stores (`clusterscope calibrate --learn`),
// showing the same table for what the runs measured.

#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "core/hardware.h"

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QScrollArea;
class QTableWidget;
class QTimer;

namespace cs::calib {
struct MachineCalibration;
}
namespace cs::plan {
struct Calibration;
}

namespace cs::gui {

class CalibrationPanel : public QWidget {
  Q_OBJECT

 public:
  explicit CalibrationPanel(QWidget* parent = nullptr);
  ~CalibrationPanel() override;

  // Where the presets go (default: the user's presets folder) and where the
  // calibration store is written (default: calibration-<host>-<date>-<time>.db
  // in that folder's parent).
  void setPresetsDir(const QString& dir);
  void setStorePath(const QString& path);
  // The current plan's cluster: Learn from runs refines it for GPU runs of a
  // host with no calibration of its GPU (the CLI's --base), and says so.
  void setPlanCluster(std::optional<Cluster> cluster);

  QPushButton* startButton() const { return start_; }
  QPushButton* cancelButton() const { return cancel_; }
  QPushButton* learnButton() const { return learn_; }
  QLineEdit* rankCounts() const { return ranks_; }
  QDoubleSpinBox* secondsPerSize() const { return seconds_; }
  QCheckBox* referenceRuns() const { return reference_; }
  QTableWidget* fitTable() const { return table_; }
  QLabel* statusLabel() const { return status_; }
  bool running() const { return running_; }
  // A sweep of this machine is going (not learning from runs): stopped, what
  // it measured is not kept.
  bool calibrating() const { return running_ && calibrating_; }

 public slots:
  void start();
  void cancel();
  // Refines the calibrated presets from these run stores (the runs of one
  // rank count fitted together), on a worker thread.
  void learnFrom(const QStringList& run_stores);

 signals:
  // The presets file written (empty when saving was off), and the names of
  // the calibrated clusters, for a message and a catalog reload.
  void calibrated(const QString& presets_file, const QStringList& clusters);
  void failed(const QString& message);

 private:
  struct Sweep;  // what the sweep's threads share with the panel

  void showResult(const cs::calib::MachineCalibration& result);
  void showFittedStores(const std::vector<cs::calib::MachineCalibration>& fitted);
  void fail(const QString& message);  // says why in the status line, and emits failed
  // `origin` prefixes each quantity (what the reference runs showed).
  void showFit(const plan::Calibration& fit, const QString& origin = {});
  void chooseRuns();
  void setRunning(bool running);
  void showProgress();
  void setStatus(const QString& text);
  void fitStatus();  // the status area as tall as its text, up to a few lines

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  QLineEdit* ranks_ = nullptr;
  QDoubleSpinBox* seconds_ = nullptr;
  QCheckBox* reference_ = nullptr;
  QPushButton* start_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QPushButton* learn_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QScrollArea* status_area_ = nullptr;
  QTableWidget* table_ = nullptr;
  QTimer* poll_ = nullptr;
  QString presets_dir_;
  std::optional<Cluster> plan_cluster_;
  QString store_path_;
  bool running_ = false;
  bool calibrating_ = false;
  int job_ = 0;  // results of an older job are dropped
  // Shared with the sweep's threads, which may outlive the panel.
  std::shared_ptr<Sweep> sweep_;
};

}  // namespace cs::gui
