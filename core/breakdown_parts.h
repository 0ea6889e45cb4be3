#pragma once
// The parts a span of a rank's time is drawn in, with their colours: one
// list for the app's bars and the exported report's, so that a colleague
// reading the report sees what the app showed (they had different parts and
// colours). The parts add up to the span; the colours are the timeline's
// (app/gui/timeline_widget.cpp: compute blue, communication orange, memory
// green, synchronization purple, idle grey).

#include <cstdint>

#include "core/trace_analysis.h"

namespace cs::trace {

struct BreakdownPart {
  const char* name;
  const char* color;  // "#rrggbb"
  std::int64_t (*ns)(const Breakdown&);
};

inline constexpr BreakdownPart kBreakdownParts[] = {
    {"compute", "#4e79a7", [](const Breakdown& b) { return b.compute_ns - b.overlap_ns; }},
    // Compute while communication runs beside it: the communication hidden.
    {"hidden communication", "#ffbe7d", [](const Breakdown& b) { return b.overlap_ns; }},
    {"exposed communication", "#f28e2b",
     [](const Breakdown& b) { return b.exposed_communication_ns; }},
    {"exposed memory", "#59a14f", [](const Breakdown& b) { return b.exposed_memory_ns; }},
    {"synchronization", "#b07aa1", [](const Breakdown& b) { return b.exposed_synchronization_ns; }},
    {"other device work", "#9d7660", [](const Breakdown& b) { return b.other_busy_ns; }},
    {"idle: host wait", "#bab0ac", [](const Breakdown& b) { return b.idle_host_wait_ns; }},
    {"idle: kernel wait", "#d7d2cf", [](const Breakdown& b) { return b.idle_kernel_wait_ns; }},
    {"idle: other", "#eeeeee", [](const Breakdown& b) { return b.idle_other_ns; }},
};

// Breakdown::events as the app's range table and the report head it: the
// device events that start in the span or range. One that started before
// and runs through it counts in the parts' time but not here, so a rank
// whose whole range lies inside one collective has none ("device events 0"
// read as if it did nothing).
inline constexpr const char* kEventsStartingName = "events starting";
inline constexpr const char* kEventsStartingNote =
    "events starting: the kernels, copies and collectives (the CPU engine's operations) "
    "that start inside it; one that began before and runs through it counts in the time, "
    "not here";

}  // namespace cs::trace
