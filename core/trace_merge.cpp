#include "core/trace_merge.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "core/format.h"
#include "core/json_text.h"
#include "core/median.h"
#include "core/parse_count.h"
#include "core/trace_reader.h"
#include "core/trace_reader_internal.h"

namespace cs::trace {

namespace {

constexpr auto kAlignmentNames = enum_names<ClockAlignment>(
    std::pair{ClockAlignment::automatic, std::string_view("auto")},
    std::pair{ClockAlignment::recorded, std::string_view("recorded")},
    std::pair{ClockAlignment::collectives, std::string_view("collectives")},
    std::pair{ClockAlignment::none, std::string_view("none")});

// The rows a merge writes of its own, besides those every store writes of
// itself (store::is_own_meta_row): never copied from its inputs.
const std::set<std::string> kMergeMeta = {"clock_alignment", "clock_offsets_json",
                                          "clock_alignment_spread_json", "merged_from_json",
                                          "world_size"};

struct Input {
  std::string path;
  std::unique_ptr<TraceReader> reader;
};

// The lanes whose communication events are the rank's collectives: its GPU
// streams, or the CPU engine's communication lanes.
std::vector<LaneId> communication_lanes(const TraceReader& r, std::int32_t rank) {
  std::vector<LaneId> gpu, cpu;
  for (const LaneInfo& l : r.lanes()) {
    if (l.rank != rank) continue;
    if (l.kind == LaneKind::gpu_stream) gpu.push_back(l.id);
    if (l.kind == LaneKind::communication) cpu.push_back(l.id);
  }
  return gpu.empty() ? cpu : gpu;
}

// End times of each kind of communication event, in start order. The key is
// the collective type when known, else the event's name.
Result<std::map<std::string, std::vector<std::int64_t>>> communication_ends(const TraceReader& r,
                                                                            std::int32_t rank) {
  std::map<std::string, std::vector<std::int64_t>> out;
  const auto lanes = communication_lanes(r, rank);
  if (lanes.empty()) return out;
  Status s =
      r.for_each_event(lanes, std::numeric_limits<std::int64_t>::min() / 4,
                       std::numeric_limits<std::int64_t>::max() / 4, [&](const StoredEvent& e) {
                         const Event& ev = e.event;
                         if (ev.kind != EventKind::collective && ev.kind != EventKind::p2p)
                           return true;
                         const std::string key = ev.collective != Collective::none
                                                     ? std::string(to_string(ev.collective))
                                                     : r.string(ev.name);
                         out[key].push_back(ev.end_ns);
                         return true;
                       });
  if (!s) return s.error();
  return out;
}

struct Alignment {
  std::string method;
  std::map<std::int32_t, std::int64_t> offsets;
  std::map<std::int32_t, std::string> rank_method;
  std::map<std::int32_t, std::int64_t> spread;  // median absolute deviation of the matches
  std::vector<std::string> warnings;
};

Result<Alignment> align(const std::vector<Input>& inputs, ClockAlignment wanted) {
  struct RankRef {
    const TraceReader* reader;
    RankInfo info;
  };
  std::vector<RankRef> ranks;
  for (const Input& in : inputs) {
    for (const RankInfo& r : in.reader->ranks())
      ranks.push_back({in.reader.get(), r});
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const RankRef& a, const RankRef& b) { return a.info.rank < b.info.rank; });
  Alignment a;
  for (const RankRef& r : ranks)
    a.offsets[r.info.rank] = 0;
  if (ranks.size() <= 1) {
    if (wanted == ClockAlignment::recorded && !ranks.empty()) {
      a.method = "recorded";
      a.offsets[ranks[0].info.rank] = ranks[0].info.clock_offset_ns;
    } else {
      a.method = "none (one rank)";
    }
    return a;
  }

  ClockAlignment method = wanted;
  if (wanted == ClockAlignment::automatic) {
    const bool all_measured = std::all_of(ranks.begin(), ranks.end(), [](const RankRef& r) {
      return r.info.clock_offset_measured || r.info.clock_offset_ns != 0;
    });
    const bool one_host = !ranks.front().info.host.empty() &&
                          std::all_of(ranks.begin(), ranks.end(), [&](const RankRef& r) {
                            return r.info.host == ranks.front().info.host;
                          });
    if (all_measured) {
      method = ClockAlignment::recorded;
    } else if (one_host) {
      a.method = "same-host";
      for (const RankRef& r : ranks)
        a.offsets[r.info.rank] = r.info.clock_offset_ns;
      return a;
    } else {
      method = ClockAlignment::collectives;
    }
  }
  if (method == ClockAlignment::none) {
    a.method = "none";
    return a;
  }
  if (method == ClockAlignment::recorded) {
    a.method = "recorded";
    for (const RankRef& r : ranks)
      a.offsets[r.info.rank] = r.info.clock_offset_ns;
    return a;
  }

  // Collectives: the reference is the lowest rank; every other rank moves so
  // that its n-th collective of each kind ends when the reference's does.
  auto reference = communication_ends(*ranks.front().reader, ranks.front().info.rank);
  if (!reference) return reference.error();
  int aligned = 0;
  for (std::size_t i = 1; i < ranks.size(); ++i) {
    auto ends = communication_ends(*ranks[i].reader, ranks[i].info.rank);
    if (!ends) return ends.error();
    std::vector<std::int64_t> diffs;
    for (const auto& [key, ref_ends] : *reference) {
      auto it = ends->find(key);
      if (it == ends->end()) continue;
      const std::size_t n = std::min(ref_ends.size(), it->second.size());
      for (std::size_t k = 0; k < n; ++k)
        diffs.push_back(ref_ends[k] - it->second[k]);
    }
    const std::int32_t rank = ranks[i].info.rank;
    if (diffs.empty()) {
      a.rank_method[rank] =
          "none (no collective matches rank " + std::to_string(ranks.front().info.rank) + "'s)";
      continue;
    }
    const std::int64_t offset = middle_sample(diffs);
    std::vector<std::int64_t> deviations;
    for (std::int64_t d : diffs)
      deviations.push_back(d > offset ? d - offset : offset - d);
    const std::int64_t spread = middle_sample(std::move(deviations));
    if (wanted == ClockAlignment::automatic && spread > kAlignmentSpreadNs) {
      // Chosen for the user, a shift its own matches contradict is not made.
      const std::string disagree = std::to_string(diffs.size()) +
                                   " collectives matched disagree by " +
                                   format_seconds(static_cast<double>(spread) * 1e-9) + " (median)";
      a.rank_method[rank] = "none (its " + disagree + ")";
      a.warnings.push_back(
          "rank " + std::to_string(rank) + " was left as recorded: its " + disagree +
          ", so they are not the same ones (point-to-point transfers pair with different "
          "peers); shifting it by " +
          format_seconds(static_cast<double>(offset) * 1e-9) +
          " would misplace it. Give --align collectives to shift it anyway, or recorded if its "
          "clock offset was measured");
      continue;
    }
    a.offsets[rank] = offset;
    a.spread[rank] = spread;
    a.rank_method[rank] = "collectives (" + std::to_string(diffs.size()) + " matched)";
    ++aligned;
  }
  a.method = aligned == 0 && !a.warnings.empty()             ? "none (matched collectives disagree)"
             : aligned == 0                                  ? "none (no matching collectives)"
             : aligned + 1 == static_cast<int>(ranks.size()) ? "collectives"
                                                             : "collectives (some ranks)";
  return a;
}

// Copies every row of one input, shifting its ranks' times, in id order
// (segments stay whole, so the writer's batches stay sorted).
Status copy_input(const Input& in, TraceWriter& w,
                  const std::map<std::int32_t, std::int64_t>& offsets, std::int64_t& events) {
  TraceReader& r = *in.reader;
  auto& db = r.impl().db;

  // Input string id -> output id: -1 until used, -2 where the input holds
  // no such string (an event naming one is damage, not an empty name).
  std::vector<std::int64_t> strings;
  {
    auto stmt = db.prepare("SELECT coalesce(max(id), 0) FROM strings");
    if (!stmt || stmt->step() != SQLITE_ROW) return db.error("cannot read strings");
    strings.assign(static_cast<std::size_t>(stmt->int64_at(0)) + 1, -2);
    auto ids = db.prepare("SELECT id FROM strings");
    if (!ids) return ids.error();
    int rc;
    while ((rc = ids->step()) == SQLITE_ROW) {
      const std::int64_t id = ids->int64_at(0);
      if (id >= 0 && std::size_t(id) < strings.size()) strings[std::size_t(id)] = -1;
    }
    if (rc != SQLITE_DONE) return db.error("cannot read strings", rc);
  }
  auto map_string = [&](std::int64_t id) -> std::optional<StringId> {
    if (id < 0 || std::size_t(id) >= strings.size() || strings[std::size_t(id)] == -2)
      return std::nullopt;
    if (strings[std::size_t(id)] < 0)
      strings[std::size_t(id)] = w.intern(r.string(StringId{std::uint32_t(id)})).value;
    return StringId{static_cast<std::uint32_t>(strings[std::size_t(id)])};
  };
  // A row the store's own checks call damaged is refused by the input's name:
  // copied, a text time read as 0 and an unknown name as an empty one, and the
  // merged store passed every check.
  auto damaged_event = [&in](std::int64_t id, const std::string& what) {
    return Error{in.path + " is damaged: event " + std::to_string(id) + " " + what +
                 "; nothing was merged"};
  };

  std::map<std::uint32_t, std::pair<LaneId, std::int64_t>> lanes;  // input lane -> output, offset
  for (const LaneInfo& l : r.lanes()) {
    const auto off = offsets.count(l.rank) ? offsets.at(l.rank) : 0;
    lanes[l.id.value] = {w.add_lane(l.rank, l.kind, l.name, l.sort_index), off};
  }
  for (const RankInfo& rank : r.ranks()) {
    RankInfo out = rank;
    out.clock_offset_ns = 0;
    out.clock_offset_measured = false;
    w.add_rank(out);
  }

  auto rows = db.prepare(
      "SELECT id, lane, kind, category, start_ns, end_ns, name, correlation, step FROM events "
      "ORDER BY id");
  auto details = db.prepare(
      "SELECT event_id, bytes, flops, collective, dtype, count, peer, group_size "
      "FROM event_details ORDER BY event_id");
  if (!rows) return rows.error();
  if (!details) return details.error();
  // Kernels' launches, where the store kept them (stores written before
  // have no such table).
  std::optional<sql::Statement> launches;
  if (db.has_table("kernel_launches")) {
    auto stmt = db.prepare(std::string("SELECT event_id, ") + store::kLaunchColumns +
                           " FROM kernel_launches ORDER BY event_id");
    if (!stmt) return stmt.error();
    launches = std::move(stmt).value();
  }
  int launch_rc = launches ? launches->step() : SQLITE_DONE;
  int detail_rc = details->step();
  int rc;
  while ((rc = rows->step()) == SQLITE_ROW) {
    const std::int64_t id = rows->int64_at(0);
    const auto lane = lanes.find(static_cast<std::uint32_t>(rows->int64_at(1)));
    if (lane == lanes.end())
      return Error{in.path + ": event " + std::to_string(id) + " has no lane"};
    const std::int64_t off = lane->second.second;
    if (!rows->is_whole_number(2) || !rows->is_whole_number(3) || rows->int64_at(2) < 0 ||
        rows->int64_at(2) > std::int64_t(EventKind::overhead) || rows->int64_at(3) < 0 ||
        rows->int64_at(3) > std::int64_t(Category::other))
      return damaged_event(id, "has no known kind or category");
    if (!rows->is_whole_number(4) || !rows->is_whole_number(5))
      return damaged_event(id, "has a start or end that is not a whole number of nanoseconds");
    if (rows->int64_at(5) < rows->int64_at(4)) return damaged_event(id, "ends before it starts");
    const std::optional<StringId> name =
        rows->is_whole_number(6) ? map_string(rows->int64_at(6)) : std::nullopt;
    if (!name) return damaged_event(id, "is named by a string the store does not hold");
    if (!rows->is_null(8) && (!rows->is_whole_number(8) || rows->int64_at(8) < INT32_MIN ||
                              rows->int64_at(8) > INT32_MAX))
      return damaged_event(id, "has a step that is not a whole number");
    Event e;
    e.lane = lane->second.first;
    e.kind = static_cast<EventKind>(rows->int_at(2));
    e.category = static_cast<Category>(rows->int_at(3));
    // Offsets recorded in a store and its rows can be anything (an edited
    // store): a time shifted past int64 is held at its limit, and dropped.
    e.start_ns = saturating_add(rows->int64_at(4), off);
    e.end_ns = saturating_add(rows->int64_at(5), off);
    e.name = *name;
    e.correlation = rows->int64_at(7);
    e.step = rows->int_at(8);
    while (detail_rc == SQLITE_ROW && details->int64_at(0) < id)
      detail_rc = details->step();
    if (detail_rc == SQLITE_ROW && details->int64_at(0) == id) {
      e.bytes = details->int64_at(1);
      e.flops = details->double_at(2);
      e.collective = static_cast<Collective>(details->int_at(3));
      e.dtype = static_cast<DataType>(details->int_at(4));
      e.count = details->int64_at(5);
      e.peer = details->int_at(6);
      e.group_size = details->int_at(7);
    }
    while (launch_rc == SQLITE_ROW && launches->int64_at(0) < id)
      launch_rc = launches->step();
    std::optional<KernelLaunch> launch;
    if (launch_rc == SQLITE_ROW && launches->int64_at(0) == id)
      launch = store::launch_at(*launches, 1);
    w.add_with_launch(e, launch);
    ++events;
  }
  if (rc != SQLITE_DONE) return db.error("cannot read events", rc);
  if (launch_rc != SQLITE_ROW && launch_rc != SQLITE_DONE)
    return db.error("cannot read kernel launches", launch_rc);
  if (detail_rc != SQLITE_ROW && detail_rc != SQLITE_DONE)
    return db.error("cannot read event details", detail_rc);

  auto steps = r.steps();
  if (!steps) return steps.error();
  for (StepMetrics m : *steps) {
    const auto off = offsets.count(m.rank) ? offsets.at(m.rank) : 0;
    m.start_ns = saturating_add(m.start_ns, off);
    m.end_ns = saturating_add(m.end_ns, off);
    w.add(m);
  }
  auto series = r.counter_series();
  if (!series) return series.error();
  for (const CounterSeries& s : *series) {
    const std::int32_t rank = s.rank;
    auto samples = r.counters(rank, s.name);
    if (!samples) return samples.error();
    const auto off = offsets.count(rank) ? offsets.at(rank) : 0;
    const std::optional<StringId> name = map_string(s.name.value);
    if (!name) {
      return Error{in.path + " is damaged: a counter of rank " + std::to_string(rank) +
                   " is named by a string the store does not hold; nothing was merged"};
    }
    for (CounterSample c : *samples) {
      c.time_ns = saturating_add(c.time_ns, off);
      c.name = *name;
      w.add(c);
    }
  }
  return {};
}

}  // namespace

std::string_view to_string(ClockAlignment a) {
  return kAlignmentNames.name(a);
}
std::optional<ClockAlignment> clock_alignment_from_string(std::string_view text) {
  return kAlignmentNames.parse(text);
}

namespace {

Result<MergeReport> merge_into(const std::vector<std::string>& inputs, const std::string& output,
                               const MergeOptions& options) {
  std::vector<Input> opened;
  for (const std::string& path : inputs) {
    TraceReader::Options read;
    read.writers_ended = options.writers_ended;
    auto reader = TraceReader::open(path, read);
    if (!reader) return reader.error();
    opened.push_back({path, std::move(reader).value()});
  }
  // The ranks of one run record its id (kRunIdMeta): two runs of one command,
  // whose stores say the same of themselves, merged into a run of ranks
  // that never ran together. Stores without one (older, imported) pass.
  // Inputs that are not (a calibration's phases) keep theirs, and the
  // merged store records none.
  const Input* identified = nullptr;
  bool runs_differ = false;
  for (const Input& in : opened) {
    const auto id = in.reader->meta(kRunIdMeta);
    if (!id || id->empty()) continue;
    if (!identified) {
      identified = &in;
      continue;
    }
    const std::string first = *identified->reader->meta(kRunIdMeta);
    if (*id == first) continue;
    if (options.ranks_of_one_run) {
      return Error{"merge: " + identified->path + " is a rank store of run " + first + ", " +
                   in.path + " of run " + *id + ": merge the rank stores of one run"};
    }
    runs_differ = true;
  }
  // The ranks of one run record one world size: stores of two runs would
  // merge into a run of ranks that never ran together.
  // As recorded: a value that does not parse says nothing of the run.
  auto recorded_world = [](const Input& i) {
    const auto text = i.reader->meta("world_size");
    return text ? parse_count<std::int64_t>(*text) : std::nullopt;
  };
  // Each against the first input that records one (a first input that
  // records none let any sizes after it through).
  const Input* sized = nullptr;
  for (const Input& in : opened) {
    if (!options.ranks_of_one_run) break;
    const auto b = recorded_world(in);
    if (!b) continue;
    if (!sized) {
      sized = &in;
      continue;
    }
    const auto a = recorded_world(*sized);
    if (*a != *b) {
      return Error{"merge: " + sized->path + " is a rank of a run of " + std::to_string(*a) +
                   " ranks, " + in.path + " of " + std::to_string(*b) +
                   ": merge the rank stores of one run"};
    }
  }
  // An input's ranks: its ranks rows, and each rank known only by its lanes
  // (a store without a ranks row), as the analyses take them: two inputs of
  // one rank would merge their events onto the same lanes.
  std::map<std::int32_t, std::string> owner;
  for (const Input& in : opened) {
    std::set<std::int32_t> ranks;
    for (const RankInfo& r : in.reader->ranks())
      ranks.insert(r.rank);
    for (const LaneInfo& l : in.reader->lanes())
      ranks.insert(l.rank);
    for (std::int32_t rank : ranks) {
      auto [it, fresh] = owner.emplace(rank, in.path);
      if (!fresh) {
        return Error{"merge: rank " + std::to_string(rank) + " is in both " + it->second + " and " +
                     in.path};
      }
    }
  }

  auto alignment = align(opened, options.alignment);
  if (!alignment) return alignment.error();

  RunInfo run = options.run;
  for (const Input& in : opened) {
    const RunInfo r = in.reader->run();
    if (run.title.empty()) run.title = r.title;
    if (run.source.empty()) run.source = r.source;
    if (options.run.start_utc_ns == 0 && r.start_utc_ns != 0 &&
        (run.start_utc_ns == 0 || r.start_utc_ns < run.start_utc_ns))
      run.start_utc_ns = r.start_utc_ns;  // the earliest rank's start
    if (run.clock.empty()) run.clock = r.clock;
    if (run.host.empty()) run.host = r.host;
    if (run.command_line.empty()) run.command_line = r.command_line;
    if (run.plan_json.empty()) run.plan_json = r.plan_json;
    if (run.tool_versions_json.empty()) run.tool_versions_json = r.tool_versions_json;
  }

  auto created = TraceWriter::create(output, run, options.writer);
  if (!created) return created.error();
  TraceWriter& w = **created;

  // Meta of the inputs (the first one that has a key wins; what their
  // writers lost, summed), then the caller's.
  std::set<std::string> written;
  std::map<std::string, std::int64_t> lost;
  for (const LossCount& loss : kLossCounts) written.insert(loss.key);
  if (runs_differ) written.insert(kRunIdMeta);
  int world_size = static_cast<int>(owner.size());
  for (const Input& in : opened) {
    world_size = std::max(world_size, in.reader->world_size());
    for (const LossCount& loss : kLossCounts) {
      if (auto value = in.reader->meta(loss.key))
        lost[loss.key] += parse_count<std::int64_t>(*value).value_or(0);
    }
    for (const auto& [key, value] : in.reader->all_meta()) {
      if (store::is_own_meta_row(key) || kMergeMeta.count(key) || written.count(key)) continue;
      w.set_meta(key, value);
      written.insert(key);
    }
  }
  w.set_meta("world_size", std::to_string(world_size));
  for (const auto& [key, count] : lost) {
    if (count > 0) w.set_meta(key, std::to_string(count));
  }

  MergeReport report;
  report.method = alignment->method;
  report.offsets_ns = alignment->offsets;
  report.rank_method = alignment->rank_method;
  report.warnings = alignment->warnings;
  for (const auto& [rank, spread] : alignment->spread) {
    if (spread <= kAlignmentSpreadNs) continue;
    report.warnings.push_back(
        "rank " + std::to_string(rank) + " was aligned on its collectives, shifted by " +
        format_seconds(static_cast<double>(alignment->offsets.at(rank)) * 1e-9) +
        ", but the collectives matched disagree by " +
        format_seconds(static_cast<double>(spread) * 1e-9) +
        " (median): they may not be the same ones (point-to-point transfers pair with "
        "different peers). Its times may be off by that much; give --align recorded or none "
        "if the clocks were synchronised");
  }
  report.ranks = static_cast<std::int32_t>(owner.size());
  nlohmann::json offsets = nlohmann::json::object();
  for (const auto& [rank, off] : alignment->offsets)
    offsets[std::to_string(rank)] = off;
  w.set_meta("clock_alignment", alignment->method);
  w.set_meta("clock_offsets_json", json_text(offsets));
  if (!alignment->spread.empty()) {
    nlohmann::json spread = nlohmann::json::object();
    for (const auto& [rank, s] : alignment->spread)
      spread[std::to_string(rank)] = s;
    w.set_meta("clock_alignment_spread_json", json_text(spread));
  }
  w.set_meta("merged_from_json", json_text(nlohmann::json(inputs)));
  for (const auto& [key, value] : options.meta)
    w.set_meta(key, value);

  for (const Input& in : opened) {
    const std::int64_t before = report.events;
    Status s = copy_input(in, w, alignment->offsets, report.events);
    // A damaged page ends a query early, as if its rows had ended: the
    // merge would lack them without a word.
    if (s) s = in.reader->damage();
    // Rows gone from the events table (an edited store) while its lanes
    // still count them: the analyses read the lanes' chunks and see them
    // all, a merge of the rows would not.
    if (s && in.reader->state().finalized && report.events - before != in.reader->event_count()) {
      s = Error{in.path + " is damaged: its lanes hold " +
                std::to_string(in.reader->event_count()) + " events but its events table " +
                std::to_string(report.events - before) + " (clusterscope trace info --check " +
                in.path + " says more)"};
    }
    if (!s) {
      (void)w.close("failed");
      return s.error();
    }
  }
  if (Status s = w.close(options.status); !s) return s.error();
  return report;
}

}  // namespace

Result<MergeReport> merge_stores(const std::vector<std::string>& inputs, const std::string& output,
                                 const MergeOptions& options) {
  if (inputs.empty()) return Error{"merge: no input stores"};
  std::error_code ec;
  for (const std::string& path : inputs) {
    if (std::filesystem::equivalent(path, output, ec))
      return Error{output + ": the output is also an input"};
  }
  MergeReport report;
  const Status built = build_store_then_replace(output, [&](const std::string& temporary) {
    auto merged = merge_into(inputs, temporary, options);
    if (!merged) return Status(merged.error());
    report = std::move(merged).value();
    auto kept = count_kept_events(temporary, report.events, report.losses);
    if (!kept) return Status(kept.error());
    report.events = *kept;
    return Status();
  });
  if (!built) return built.error();
  return report;
}

}  // namespace cs::trace
