// Trace stores (our SQLite schema, chunks included) as a damaged or foreign
// file: opened, verified, queried and analysed. Seed it with real stores.

#include <cstddef>
#include <cstdint>

#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"
#include "tests/fuzz/fuzz_temp_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = cs::fuzz::temp_path("store.sqlite");
  cs::fuzz::remove_store(path);
  cs::fuzz::write_file(path, data, size);
  (void)cs::trace::inspect_store(path);
  (void)cs::trace::verify_store(path);
  // A store left "writing" is repaired (finalized in place): that reads
  // its rows back and encodes their chunks.
  cs::trace::TraceReader::Options options;
  options.writers_ended = true;
  auto opened = cs::trace::TraceReader::open(path, options);
  if (opened) {
    const cs::trace::TraceReader& reader = **opened;
    (void)reader.run();
    (void)reader.world_size();
    (void)reader.losses();
    const cs::trace::TimeRange range = reader.time_range();
    for (const cs::trace::LaneInfo& lane : reader.lanes()) {
      (void)reader.spans(lane.id, range.start_ns, range.end_ns, 1000);
      (void)reader.event_at(lane.id, range.start_ns / 2 + range.end_ns / 2);
    }
    std::int64_t visited = 0;
    (void)reader.for_each_event({}, range.start_ns, range.end_ns,
                                [&](const cs::trace::StoredEvent&) { return ++visited < 100000; });
    (void)reader.find_events("a", cs::trace::NameMatch::substring, 100);
    (void)reader.steps();
    if (auto series = reader.counter_series()) {
      for (const cs::trace::CounterSeries& s : *series) {
        (void)reader.counters(s.rank, s.name);
        (void)reader.counter_view(s.rank, s.name, range.start_ns, range.end_ns, 1000);
      }
    }
    cs::trace::AnalysisOptions analysis;
    analysis.threads = 1;
    (void)cs::trace::analyze_run(reader, analysis);
    (void)cs::trace::measure_step_parts(reader);
  }
  cs::fuzz::remove_store(path);
  return 0;
}
