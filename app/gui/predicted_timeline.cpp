#include "app/gui/predicted_timeline.h"

#include <QFile>

#include <QtConcurrent/QtConcurrentRun>

namespace cs::gui {

PredictedTimelineService::PredictedTimelineService(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(1);
}

PredictedTimelineService::~PredictedTimelineService() {
  pool_.waitForDone();
}

std::uint64_t PredictedTimelineService::request(const Plan& plan) {
  const std::uint64_t job = ++requested_;
  if (running_) {
    pending_.emplace(plan, job);
  } else {
    start(plan, job);
  }
  return job;
}

void PredictedTimelineService::start(Plan plan, std::uint64_t job) {
  running_ = true;
  const QString path = dir_.filePath(QStringLiteral("predicted-%1.cstrace").arg(job));
  QtConcurrent::run(&pool_, [plan = std::move(plan), path] {
    auto written = cs::plan::write_predicted_timeline(plan, path.toStdString());
    return written ? QString() : QString::fromStdString(written.message());
  }).then(this, [this, job, path](const QString& error) {
    running_ = false;
    if (job == requested_) {
      // The store two back is shown nowhere now (the view lets go of the
      // previous one once it has opened this one): its files can go.
      if (kept_.size() >= 2) {
        for (const char* suffix : {"", "-wal", "-shm"})
          QFile::remove(kept_.front() + suffix);
        kept_.pop_front();
      }
      if (error.isEmpty()) kept_.push_back(path);
      ready_ = job;
      emit ready(job, error.isEmpty() ? path : QString(), error);
    } else {
      for (const char* suffix : {"", "-wal", "-shm"})
        QFile::remove(path + suffix);  // stale
    }
    if (pending_) {
      auto next = std::move(*pending_);
      pending_.reset();
      start(std::move(next.first), next.second);
    }
  });
}

}  // namespace cs::gui
