#pragma once
// Recorded CUPTI activity buffers replayed as an activity source, so that the
// decoder runs on real record structs without a GPU; and the capture of live
// buffers into such a recording.
//
// Replay hands buffers over the way CUPTI does: it first asks the pool for a
// buffer for every recorded one (as CUPTI asks ahead while it fills), so with
// a small cap the later buffers are refused and their records count as
// dropped, exactly and repeatably; then it fills and completes the granted
// ones in order. Pointer fields are set only from the recording's fixups
// (everything else that could point somewhere is zeroed), so a damaged
// recording cannot make the decoder follow a stray pointer.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "profiler/activity_buffers.h"
#include "profiler/cupti/activity_source.h"
#include "profiler/replay_file.h"

namespace cs::profiler {

std::unique_ptr<ActivitySource> make_replay_source(ReplayRecording recording, std::string name);
Result<std::unique_ptr<ActivitySource>> open_replay_source(const std::string& path);

// Appends a copy of a buffer CUPTI handed over to `builder`, with what its
// records point to (kernel names, NVTX names and domains, NVTX extended
// payloads) copied into blobs. Other pointer fields are zeroed in the copy.
// `dropped_after`: the records CUPTI reported dropped when this buffer came.
void capture_cupti_buffer(ReplayBuilder& builder, const ActivityBuffer& buffer,
                          std::uint64_t dropped_after);

// The records in a buffer, as cuptiActivityGetNextRecord walks it.
std::size_t count_records(const std::uint8_t* data, std::size_t size);

}  // namespace cs::profiler
