#pragma once
// Shared by the trace store tests: stores written through TraceWriter with a
// copy of every event kept in memory, so that what the reader returns can be
// checked against a straightforward computation over all events.

#include <QtTest>
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/trace_writer.h"

namespace trace_test {

using namespace cs::trace;

struct LaneSpec {
  std::int32_t rank = 0;
  LaneKind kind = LaneKind::gpu_stream;
  std::string name;
};

struct Written {
  std::vector<LaneId> lanes;
  std::vector<Event> events;       // as given to the writer
  std::vector<std::string> names;  // index = StringId value - 1 for interned names
};

// Event patterns for one lane.
enum class Pattern {
  uniform,  // back-to-back kernels with small gaps, durations 1-20 µs
  nested,   // CPU ops nested up to 4 deep, with long parents
  bursty,   // dense bursts of tiny events separated by long idle gaps
  sparse,   // a few long events far apart
};

inline std::vector<Event> generate(Pattern pattern, LaneId lane, int count, std::uint32_t seed,
                                   const std::vector<StringId>& names) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  std::vector<Event> out;
  out.reserve(count);
  std::int64_t t = 1'700'000'000'000'000'000;
  auto make = [&](std::int64_t s, std::int64_t e, EventKind kind, Category cat) {
    Event ev;
    ev.lane = lane;
    ev.kind = kind;
    ev.category = cat;
    ev.start_ns = s;
    ev.end_ns = e;
    ev.name = names[rng() % names.size()];
    ev.correlation = static_cast<std::int64_t>(out.size()) + 1;
    out.push_back(ev);
  };
  switch (pattern) {
    case Pattern::uniform:
      while (static_cast<int>(out.size()) < count) {
        const std::int64_t s = t + pick(0, 3000);
        const std::int64_t e = s + pick(1000, 20000);
        make(s, e, EventKind::kernel, rng() % 5 == 0 ? Category::communication : Category::compute);
        t = e;
      }
      break;
    case Pattern::nested:
      // A parent of 50-500 µs holding children, which may hold grandchildren.
      while (static_cast<int>(out.size()) < count) {
        const std::int64_t ps = t + pick(1000, 50000);
        const std::int64_t pe = ps + pick(50000, 500000);
        make(ps, pe, EventKind::cpu_op, Category::other);
        std::int64_t c = ps + 100;
        while (c < pe - 2000 && static_cast<int>(out.size()) < count) {
          const std::int64_t ce = std::min(pe - 100, c + pick(500, 40000));
          make(c, ce, EventKind::cpu_op, Category::other);
          if (ce - c > 3000 && rng() % 2 == 0 && static_cast<int>(out.size()) < count) {
            const std::int64_t gs = c + 200;
            const std::int64_t ge = std::max(gs, ce - 200);
            make(gs, ge, EventKind::api_call, Category::other);
            if (ge - gs > 1000 && static_cast<int>(out.size()) < count)
              make(gs + 100, gs + 100 + (ge - gs) / 3, EventKind::sync, Category::synchronization);
          }
          c = ce + pick(0, 3000);
        }
        t = pe;
      }
      break;
    case Pattern::bursty:
      while (static_cast<int>(out.size()) < count) {
        t += pick(1'000'000, 50'000'000);  // 1-50 ms idle
        const int burst = static_cast<int>(pick(50, 400));
        for (int i = 0; i < burst && static_cast<int>(out.size()) < count; ++i) {
          const std::int64_t s = t + pick(0, 200);
          const std::int64_t e = s + pick(50, 900);
          make(s, e, EventKind::kernel, Category::memory);
          t = e;
        }
      }
      break;
    case Pattern::sparse:
      while (static_cast<int>(out.size()) < count) {
        t += pick(10'000'000, 100'000'000);
        make(t, t + pick(1'000'000, 30'000'000), EventKind::step, Category::other);
      }
      break;
  }
  return out;
}

// Writes `per_lane` events of each pattern into its own lane of rank 0.
// The events are added in a shuffled order within windows of ~64 events, as
// a tracer that flushes several buffers would, so batches are not sorted.
inline Written write_store(const std::string& path, const std::vector<Pattern>& patterns,
                           int per_lane, cs::trace::WriterOptions options = {},
                           std::uint32_t seed = 1) {
  Written w;
  RunInfo run;
  run.title = "test store";
  run.source = "test";
  auto created = TraceWriter::create(path, run, options);
  if (!created) qFatal("%s", created.message().c_str());
  TraceWriter& writer = **created;
  writer.add_rank({0, "localhost", "test device", 1, 0, false});
  std::vector<StringId> names;
  for (int i = 0; i < 40; ++i) {
    w.names.push_back("name_" + std::to_string(i));
    names.push_back(writer.intern(w.names.back()));
  }
  int index = 0;
  for (Pattern p : patterns) {
    const LaneId lane =
        writer.add_lane(0, p == Pattern::nested ? LaneKind::cpu_thread : LaneKind::gpu_stream,
                        "lane " + std::to_string(index), index);
    w.lanes.push_back(lane);
    auto events = generate(p, lane, per_lane, seed + static_cast<std::uint32_t>(index), names);
    w.events.insert(w.events.end(), events.begin(), events.end());
    ++index;
  }
  std::mt19937 rng(seed);
  std::vector<Event> order = w.events;
  for (std::size_t i = 0; i < order.size(); i += 64) {
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(i),
                 order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), i + 64)), rng);
  }
  for (const Event& e : order)
    writer.add(e);
  const cs::Status closed = writer.close();
  if (!closed) qFatal("%s", closed.message().c_str());
  return w;
}

// The events of one lane in the reader's order (start, end descending) with
// the nesting depth the store defines.
struct Placed {
  Event event;
  std::int32_t depth = 0;
};

inline std::vector<Placed> placed(const Written& w, LaneId lane) {
  std::vector<Placed> out;
  for (const Event& e : w.events) {
    if (e.lane == lane) out.push_back({e, 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const Placed& a, const Placed& b) {
    if (a.event.start_ns != b.event.start_ns) return a.event.start_ns < b.event.start_ns;
    return a.event.end_ns > b.event.end_ns;
  });
  std::vector<std::int64_t> open;
  for (Placed& p : out) {
    while (!open.empty() && open.back() <= p.event.start_ns)
      open.pop_back();
    p.depth = static_cast<std::int32_t>(open.size());
    open.push_back(p.event.end_ns);
  }
  return out;
}

}  // namespace trace_test
