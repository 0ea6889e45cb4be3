#pragma once
// What the views show about the current plan: the plan's problems, its
// estimate, and every control's valid values. An analysis takes well under a
// millisecond for most plans; one slower than kInlineBudget (a quarter of a
// frame) moves every later request to a worker thread, where a new request
// supersedes the one waiting and a result that is no longer the latest
// requested is dropped, so a slow job never overwrites a fresh one. Results
// are always delivered from the event loop, never inside request().

#include <QObject>
#include <QThreadPool>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/plans.h"
#include "core/problem.h"
#include "planners/estimate.h"

namespace cs::gui {

inline constexpr int kControlCount = int(plan::Control::overlap_grad_reduce) + 1;

struct PlanAnalysis {
  std::uint64_t job = 0;
  bool has_plan = false;  // the project has a current plan with its cluster and workload
  Plan plan;
  std::string error;              // why there is no estimate ("" when there is one)
  std::vector<Problem> problems;  // check_plan: each at the control to change
  std::optional<plan::Estimate> estimate;
  Problem memory;  // the out-of-memory problem; empty message when it fits
  std::array<std::vector<plan::ControlOption>, kControlCount> options;
  double seconds = 0;  // time the analysis took, on its thread

  const std::vector<plan::ControlOption>& optionsOf(plan::Control c) const {
    return options[std::size_t(c)];
  }
};

// The pure function the service runs: no Qt, no shared state.
PlanAnalysis analyse_plan(const Plan& plan, std::uint64_t job, bool with_options = true);

class AnalysisService : public QObject {
  Q_OBJECT

 public:
  explicit AnalysisService(QObject* parent = nullptr);
  ~AnalysisService() override;

  // Asks for the analysis of `plan` (or of "no plan", with the reason).
  // Returns the job id that the analysed() signal will carry.
  std::uint64_t request(const Plan& plan);
  std::uint64_t requestNone(const QString& reason);

  std::shared_ptr<const PlanAnalysis> latest() const { return latest_; }
  std::uint64_t requestedJob() const { return requested_; }
  bool busy() const { return running_ || pending_.has_value() || delivering_ > 0; }
  // While analyses take longer than this, they run on the worker thread.
  static constexpr double kInlineBudget = 0.004;
  void setBackgroundOnly(bool on) { background_only_ = on; }
  bool inBackground() const { return background_only_ || slow_; }

 signals:
  void analysed(std::shared_ptr<const cs::gui::PlanAnalysis> analysis);

 private:
  void start(Plan plan, std::uint64_t job);
  void finished(std::shared_ptr<const PlanAnalysis> analysis);

  QThreadPool pool_;
  std::uint64_t requested_ = 0;
  bool running_ = false;
  bool background_only_ = false;
  bool slow_ = false;   // an analysis took longer than kInlineBudget
  int delivering_ = 0;  // inline results queued for delivery
  struct Pending {
    Plan plan;
    std::uint64_t job = 0;
  };
  std::optional<Pending> pending_;
  std::shared_ptr<const PlanAnalysis> latest_;
};

}  // namespace cs::gui

Q_DECLARE_METATYPE(std::shared_ptr<const cs::gui::PlanAnalysis>)
