#pragma once
// A run's critical path (core/trace_critical_path.h, as `clusterscope trace
// critical-path` prints it): the chain of operations across the ranks that
// set each step's length, its mean time per step by part, by rank and by
// operation. Computed on a worker thread with its own reader; a result for a
// store no longer shown is dropped.

#include <QString>
#include <QThreadPool>
#include <QWidget>
#include <cstdint>

class QLabel;
class QTableWidget;

namespace cs::gui {

class CriticalPathView : public QWidget {
  Q_OBJECT

 public:
  explicit CriticalPathView(QWidget* parent = nullptr);
  ~CriticalPathView() override;

  // Computes the path of `path`'s steps; an empty path clears the view.
  void setStore(const QString& path);

  QLabel* summary() const { return summary_; }
  QTableWidget* parts() const { return parts_; }
  QTableWidget* ranks() const { return ranks_; }
  QTableWidget* operations() const { return operations_; }

 signals:
  // Once the path is shown, or why there is none (`error` non-empty).
  void ready(const QString& error);

 private:
  QLabel* summary_;
  QTableWidget* parts_;
  QTableWidget* ranks_;
  QTableWidget* operations_;
  std::uint64_t job_ = 0;
  // Where its reads run: their answers come back to it, so it waits for
  // them when it closes (one that came as it was destroyed was a crash).
  QThreadPool jobs_;
};

}  // namespace cs::gui
