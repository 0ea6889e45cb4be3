#pragma once
// The planner's predicted step, written into a trace store so that the same
// timeline widget, analyses and exports that serve measured runs serve it
// too: one rank per pipeline stage (data- and tensor-parallel rank 0), a
// compute lane and a communication lane each. The store is written on a
// worker thread; the newest request wins and stale results are dropped.

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

namespace cs::gui {

struct PredictedStore {
  std::string path;
  int stages = 0;
  std::int64_t spans = 0;
  std::int64_t step_ns = 0;
};

// Simulates the plan's schedule (planners/timeline.h) and writes it to a new
// trace store at `path`: one step from zero, or, given the start of each
// measured step (on the measured run's clock), the predicted step from each
// of those starts (at most kMaxPredictedSteps), so that it lines up with
// the run beside it.
inline constexpr std::size_t kMaxPredictedSteps = 2000;
Result<PredictedStore> write_predicted_timeline(const Plan& plan, const std::string& path,
                                                const std::vector<std::int64_t>& step_starts = {});

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
