#include "planners/timeline_store.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/model_json.h"
#include "core/shown_name.h"
#include "core/trace_writer.h"
#include "planners/timeline.h"

namespace cs::plan {

Result<PredictedStore> write_predicted_timeline(const Plan& plan, const std::string& path,
                                                const std::vector<std::int64_t>& step_starts) {
  auto timeline = predict_timeline(plan);
  if (!timeline) return timeline.error();
  trace::RunInfo run;
  run.title = "Predicted step: " + shown_name(plan.workload) + " on " + shown_name(plan.cluster);
  run.source = kPredictedTimelineSource;
  run.clock = step_starts.empty() ? "predicted step, from its start"
                                  : "the measured run's clock: the predicted step from each "
                                    "measured step's start";
  run.plan_json = json_text(to_json(plan));
  run.tool_versions_json = json_text(nlohmann::json{{"clusterscope", CLUSTERSCOPE_VERSION}});
  auto created = trace::TraceWriter::create(path, run);
  if (!created) return created.error();
  trace::TraceWriter& writer = *created.value();

  // Each stage is drawn on its first rank (core/rank_order.h).
  const RankOrder order = plan.parallel.rank_order();
  std::map<std::pair<int, int>, trace::LaneId> lanes;
  for (int s = 0; s < timeline->stages; ++s) {
    trace::RankInfo rank;
    rank.rank = order.first_rank_of_stage(s);
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
  for (const TimelineSpan& span : timeline->spans) {
    std::string name = span.name;
    if (span.micro_batch >= 0) name += " · mb " + std::to_string(span.micro_batch);
    if (span.chunk >= 0 && plan.parallel.virtual_stages > 1)
      name += " · chunk " + std::to_string(span.chunk);
    names.push_back(writer.intern(name));
  }
  for (std::size_t step = 0; step < starts.size(); ++step) {
    const std::int64_t origin = starts[step];
    for (std::size_t i = 0; i < timeline->spans.size(); ++i) {
      const TimelineSpan& span = timeline->spans[i];
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
      m.rank = order.first_rank_of_stage(s);
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

}  // namespace cs::plan
