#include "app/gui/predicted_timeline.h"

#include <QFile>
#include <algorithm>
#include <map>

#include <QtConcurrent/QtConcurrentRun>
#include <nlohmann/json.hpp>

#include "core/model_json.h"
#include "core/trace_writer.h"
#include "planners/timeline.h"

namespace cs::gui {

Result<PredictedStore> write_predicted_timeline(const Plan& plan, const std::string& path,
                                                const std::vector<std::int64_t>& step_starts) {
  auto timeline = plan::predict_timeline(plan);
  if (!timeline) return timeline.error();
  trace::RunInfo run;
  run.title =
      "Predicted step: " +
      (plan.workload.display_name.empty() ? plan.workload.name : plan.workload.display_name) +
      " on " + (plan.cluster.display_name.empty() ? plan.cluster.name : plan.cluster.display_name);
  run.source = "planner";
  run.clock = step_starts.empty() ? "predicted step, from its start"
                                  : "the measured run's clock: the predicted step from each "
                                    "measured step's start";
  run.plan_json = to_json(plan).dump();
  run.tool_versions_json = nlohmann::json{{"clusterscope", CLUSTERSCOPE_VERSION}}.dump();
  auto created = trace::TraceWriter::create(path, run);
  if (!created) return created.error();
  trace::TraceWriter& writer = *created.value();

  // Megatron's rank order (tensor fastest, then data, then pipeline): stage
  // s's first rank is s x dp x tp.
  const int per_stage = plan.parallel.dp * plan.parallel.tp;
  std::map<std::pair<int, int>, trace::LaneId> lanes;
  for (int s = 0; s < timeline->stages; ++s) {
    trace::RankInfo rank;
    rank.rank = s * per_stage;
    rank.device = "stage " + std::to_string(s);
    rank.host = "rank " + std::to_string(rank.rank);
    writer.add_rank(rank);
    lanes[{s, 0}] = writer.add_lane(rank.rank, trace::LaneKind::predicted, "compute", 0);
    lanes[{s, 1}] = writer.add_lane(rank.rank, trace::LaneKind::predicted, "comm", 1);
  }
  std::vector<std::int64_t> starts(
      step_starts.begin(),
      step_starts.begin() + std::ptrdiff_t(std::min(step_starts.size(), kMaxPredictedSteps)));
  if (starts.empty()) starts.push_back(0);
  std::vector<trace::StringId> names;
  for (const plan::TimelineSpan& span : timeline->spans) {
    std::string name = span.name;
    if (span.micro_batch >= 0) name += " · mb " + std::to_string(span.micro_batch);
    if (span.chunk >= 0 && plan.parallel.virtual_stages > 1)
      name += " · chunk " + std::to_string(span.chunk);
    names.push_back(writer.intern(name));
  }
  for (std::size_t step = 0; step < starts.size(); ++step) {
    const std::int64_t origin = starts[step];
    for (std::size_t i = 0; i < timeline->spans.size(); ++i) {
      const plan::TimelineSpan& span = timeline->spans[i];
      trace::Event e;
      e.lane = lanes[{span.stage, span.lane == 0 ? 0 : 1}];
      e.kind = span.kind;
      e.category = span.category;
      e.start_ns = origin + span.start_ns;
      e.end_ns = origin + span.end_ns;
      e.name = names[i];
      e.collective = span.collective;
      e.step = std::int32_t(step);
      writer.add(e);
    }
    for (int s = 0; s < timeline->stages; ++s) {
      trace::StepMetrics m;
      m.rank = s * per_stage;
      m.step = std::int32_t(step);
      m.start_ns = origin;
      m.end_ns = origin + timeline->step_ns;
      writer.add(m);
    }
  }
  writer.set_meta("world_size", std::to_string(plan.parallel.world_size()));
  if (Status closed = writer.close("complete"); !closed) return closed.error();
  return PredictedStore{path, timeline->stages, std::int64_t(timeline->spans.size()),
                        timeline->step_ns};
}

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
    auto written = write_predicted_timeline(plan, path.toStdString());
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
