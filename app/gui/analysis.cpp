#include "app/gui/analysis.h"

#include <QElapsedTimer>
#include <QFuture>
#include <QMetaObject>

#include <QtConcurrent/QtConcurrentRun>

namespace cs::gui {

PlanAnalysis analyse_plan(const Plan& plan, std::uint64_t job, bool with_options) {
  QElapsedTimer timer;
  timer.start();
  PlanAnalysis a;
  a.job = job;
  a.has_plan = true;
  a.plan = plan;
  a.problems = plan::check_plan(plan);
  auto estimate = plan::estimate(plan);
  if (estimate) {
    a.estimate = std::move(estimate).value();
    a.memory = plan::memory_problem(plan, *a.estimate);
  } else {
    a.error = estimate.message();
  }
  if (with_options) {
    for (int c = 0; c < kControlCount; ++c) {
      a.options[std::size_t(c)] = plan::control_options(plan, plan::Control(c));
    }
  }
  a.seconds = double(timer.nsecsElapsed()) * 1e-9;
  return a;
}

AnalysisService::AnalysisService(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<const PlanAnalysis>>();
  // One thread: requests queue behind the running one and the newest wins.
  pool_.setMaxThreadCount(1);
}

AnalysisService::~AnalysisService() {
  pool_.waitForDone();
}

std::uint64_t AnalysisService::request(const Plan& plan) {
  const std::uint64_t job = ++requested_;
  if (!inBackground() && !running_) {
    // Faster than a frame: no thread hop. Delivered from the event loop all
    // the same, so that every view has seen the edit first.
    pending_.reset();
    auto analysis = std::make_shared<const PlanAnalysis>(analyse_plan(plan, job));
    slow_ = analysis->seconds > kInlineBudget;
    ++delivering_;
    QMetaObject::invokeMethod(
        this,
        [this, analysis] {
          --delivering_;
          finished(analysis);
        },
        Qt::QueuedConnection);
    return job;
  }
  if (running_) {
    pending_ = Pending{plan, job};  // replaces an older waiting request
  } else {
    start(plan, job);
  }
  return job;
}

std::uint64_t AnalysisService::requestNone(const QString& reason) {
  const std::uint64_t job = ++requested_;
  pending_.reset();
  auto none = std::make_shared<PlanAnalysis>();
  none->job = job;
  none->error = reason.toStdString();
  QMetaObject::invokeMethod(
      this, [this, none] { finished(none); }, Qt::QueuedConnection);
  return job;
}

void AnalysisService::start(Plan plan, std::uint64_t job) {
  running_ = true;
  QtConcurrent::run(&pool_, [plan = std::move(plan), job] {
    return std::make_shared<const PlanAnalysis>(analyse_plan(plan, job));
  }).then(this, [this](std::shared_ptr<const PlanAnalysis> analysis) {
    running_ = false;
    slow_ = analysis->seconds > kInlineBudget;
    finished(std::move(analysis));
    if (pending_) {
      Pending next = std::move(*pending_);
      pending_.reset();
      start(std::move(next.plan), next.job);
    }
  });
}

void AnalysisService::finished(std::shared_ptr<const PlanAnalysis> analysis) {
  if (analysis->job != requested_) return;  // stale: a newer request was made
  latest_ = std::move(analysis);
  emit analysed(latest_);
}

}  // namespace cs::gui
