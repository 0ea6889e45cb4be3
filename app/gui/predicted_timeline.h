#pragma once
// The planner's predicted step for the app (planners/timeline_store.h),
// written on a worker thread; the newest request wins and stale results are
// dropped.

#include <QObject>
#include <QTemporaryDir>
#include <QThreadPool>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/plans.h"
#include "core/result.h"
#include "planners/timeline_store.h"

namespace cs::gui {

class PredictedTimelineService : public QObject {
  Q_OBJECT

 public:
  explicit PredictedTimelineService(QObject* parent = nullptr);
  ~PredictedTimelineService() override;

  std::uint64_t request(const Plan& plan);
  std::uint64_t requestedJob() const { return requested_; }
  std::uint64_t readyJob() const { return ready_; }  // the last job handed on

 signals:
  // The store for job `job`, or why there is none.
  void ready(std::uint64_t job, const QString& path, const QString& error);

 private:
  void start(Plan plan, std::uint64_t job);

  QThreadPool pool_;
  QTemporaryDir dir_;
  std::uint64_t requested_ = 0;
  std::uint64_t ready_ = 0;
  bool running_ = false;
  std::optional<std::pair<Plan, std::uint64_t>> pending_;
  std::deque<QString> kept_;  // store files that may still be shown, oldest first
};

}  // namespace cs::gui
