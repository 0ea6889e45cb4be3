#include "profiler/worker/op_tracer.h"

#include "core/run_clock.h"
#include "core/trace_writer.h"

namespace cs::worker {

OpTracer::OpTracer(trace::TraceWriter& writer, int rank) : writer_(writer), rank_(rank) {
  compute_lane_ = writer_.add_lane(rank, trace::LaneKind::cpu_thread, "compute", 0);
  communication_lane_ = writer_.add_lane(rank, trace::LaneKind::communication, "communication", 1);
  phase_lane_ = writer_.add_lane(rank, trace::LaneKind::annotation, "phases", 2);
  steps_lane_ = writer_.add_lane(rank, trace::LaneKind::steps, "steps", 3);
}

std::int64_t OpTracer::now_ns() {
  return trace::run_clock_ns();
}

trace::StringId OpTracer::name(std::string_view text) {
  std::lock_guard lock(names_mutex_);
  auto it = names_.find(std::string(text));
  if (it != names_.end()) return it->second;
  const trace::StringId id = writer_.intern(text);
  names_.emplace(std::string(text), id);
  return id;
}

void OpTracer::record(trace::LaneId lane, trace::EventKind kind, trace::Category category,
                      std::int64_t start_ns, std::int64_t end_ns, std::string_view op_name,
                      double flops, std::int64_t bytes, trace::Collective collective,
                      trace::DataType dtype, std::int64_t count, std::int32_t peer,
                      std::int32_t group_size) {
  trace::Event e;
  e.lane = lane;
  e.kind = kind;
  e.category = category;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.name = name(op_name);
  e.flops = flops;
  e.bytes = bytes;
  e.collective = collective;
  e.dtype = dtype;
  e.count = count;
  e.peer = peer;
  e.group_size = group_size;
  e.step = step_;
  writer_.add(e);
}

void OpTracer::counter(std::string_view counter_name, std::int64_t time_ns, double value) {
  trace::CounterSample s;
  s.rank = rank_;
  s.name = name(counter_name);
  s.time_ns = time_ns;
  s.value = value;
  writer_.add(s);
}

}  // namespace cs::worker
