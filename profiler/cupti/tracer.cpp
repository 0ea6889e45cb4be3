#include "profiler/cupti/tracer.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/format.h"
#include "core/json_text.h"
#include "core/run_clock.h"
#include "profiler/activity_buffers.h"
#include "profiler/cupti/cupti_source.h"
#include "profiler/cupti/replay_source.h"
#include "profiler/gpu_memory.h"
#include "profiler/replay_file.h"

namespace cs::profiler {

namespace {

std::uint32_t system_thread_id() {
  return static_cast<std::uint32_t>(syscall(SYS_gettid));
}

nlohmann::json counts_json(const DecoderCounts& c) {
  return {{"records", c.records},
          {"kernels", c.kernels},
          {"nccl_kernels", c.nccl_kernels},
          {"nccl_kernels_sized", c.nccl_annotated},
          {"memcpys", c.memcpys},
          {"memsets", c.memsets},
          {"api_calls", c.api_calls},
          {"filtered_api_calls", c.filtered_api_calls},
          {"syncs", c.syncs},
          {"nvtx_ranges", c.nvtx_ranges},
          {"nvtx_marks", c.nvtx_marks},
          {"nvtx_steps", c.steps},
          {"outside_capture_range", c.outside_capture_range},
          {"gpu_work_written", c.gpu_work_written},
          {"overheads", c.overheads},
          {"external_correlations", c.external_correlations},
          {"without_timestamps", c.without_timestamps},
          {"unclosed_ranges", c.unclosed_ranges},
          {"unmatched_range_ends", c.unmatched_range_ends},
          {"other_kinds", c.other_kinds},
          {"invalid_buffers", c.invalid_buffers},
          {"events", c.events}};
}

}  // namespace

std::string TracerReport::summary() const {
  const DecoderCounts& c = counts;
  std::string text = std::to_string(c.events) + " events: " + std::to_string(c.kernels) +
                     " kernels (" + std::to_string(c.nccl_kernels) + " NCCL, " +
                     std::to_string(c.nccl_annotated) + " sized), " + std::to_string(c.memcpys) +
                     " copies, " + std::to_string(c.memsets) + " memsets, " +
                     std::to_string(c.api_calls) + " API calls, " + std::to_string(c.syncs) +
                     " syncs, " + std::to_string(c.nvtx_ranges) + " NVTX ranges" +
                     (c.steps > 0 ? " (" + std::to_string(c.steps) + " of them steps)" : "") +
                     ", " + std::to_string(c.overheads) + " overheads" +
                     (c.outside_capture_range > 0 ? ", " + std::to_string(c.outside_capture_range) +
                                                        " outside the capture range (not written)"
                                                  : std::string()) +
                     "; " + std::to_string(dropped_records) + " records dropped";
  return text;
}

struct Tracer::Impl {
  Impl(std::unique_ptr<ActivitySource> s, trace::TraceWriter& w, TracerOptions o)
      : source(std::move(s)),
        writer(w),
        options(std::move(o)),
        pool(options.buffer_bytes, options.buffer_cap_bytes),
        decoder(writer,
                DecoderOptions{options.rank.rank, options.max_wait_buffers, options.p2p_peer_ranks,
                               options.steps_from_ranges, options.capture_range}) {}

  std::unique_ptr<ActivitySource> source;
  trace::TraceWriter& writer;
  TracerOptions options;
  BufferPool pool;
  BufferQueue queue;
  ActivityDecoder decoder;
  std::thread decoding;
  std::thread housekeeping;

  std::mutex mutex;  // guards what follows; never held across a CUPTI call
  std::condition_variable wake;
  bool stopping = false;
  bool rank_written = false;
  std::map<int, std::string> devices;  // ordinal -> name, as first seen

  std::uint64_t dropped = 0;  // decoding thread until it is joined
  std::optional<ReplayBuilder> capture;
  bool capture_full = false;

  std::unique_ptr<GpuMemoryProbe> probe;
  std::string probe_error;
  std::uint64_t memory_samples = 0;  // housekeeping thread until it is joined

  std::mutex finalize_mutex;
  bool finalized = false;
  TracerReport report;

  void decode_loop() {
    decoder.ignore_thread(system_thread_id());
    while (auto buffer = queue.pop()) {
      const std::uint64_t lost = source->take_dropped_records();
      dropped += lost;
      if (capture && !capture_full) {
        std::size_t bytes = 0;
        for (const auto& segment : capture->recording().segments)
          bytes += segment.bytes.size();
        if (bytes + buffer->valid > options.capture_cap_bytes) {
          capture_full = true;
        } else {
          capture_cupti_buffer(*capture, *buffer, lost);
        }
      }
      decoder.decode(*buffer);
      pool.release(buffer->data);
    }
  }

  void housekeeping_loop() {
    decoder.ignore_thread(system_thread_id());
    using Clock = std::chrono::steady_clock;
    const auto sample_period = options.memory_sample_period;
    const auto tick = sample_period.count() > 0 ? std::min(sample_period, options.flush_period)
                                                : options.flush_period;
    auto next_flush = Clock::now() + options.flush_period;
    std::map<int, std::pair<std::int64_t, Clock::time_point>>
        last;  // device -> value, when written
    std::unique_lock lock(mutex);
    while (!stopping) {
      lock.unlock();
      if (probe && sample_period.count() > 0) sample_memory(last);
      if (Clock::now() >= next_flush) {
        source->flush_completed();
        next_flush = Clock::now() + options.flush_period;
      }
      lock.lock();
      wake.wait_for(lock, tick, [this] { return stopping; });
    }
  }

  void sample_memory(
      std::map<int, std::pair<std::int64_t, std::chrono::steady_clock::time_point>>& last) {
    // Outside the capture range, nothing is recorded (nor read).
    if (options.capture_range && !options.capture_range->holds(trace::run_clock_ns())) return;
    const auto now = std::chrono::steady_clock::now();
    for (const GpuMemoryProbe::Reading& r : probe->read()) {
      note_device(r.device);
      // A counter row when the value moves, and once a second otherwise.
      auto it = last.find(r.device);
      if (it != last.end() && it->second.first == r.used_bytes &&
          now - it->second.second < std::chrono::seconds(1)) {
        continue;
      }
      last[r.device] = {r.used_bytes, now};
      trace::CounterSample sample;
      sample.rank = options.rank.rank;
      sample.name = writer.intern("GPU " + std::to_string(r.device) + " memory used");
      sample.time_ns = trace::run_clock_ns();
      sample.value = static_cast<double>(r.used_bytes);
      writer.add(sample);
      ++memory_samples;
    }
  }

  void note_device(int device) {
    {
      std::lock_guard lock(mutex);
      if (devices.count(device)) return;
    }
    const std::string name = probe->device_name(device);
    writer.set_meta("gpu." + std::to_string(device) + ".name", name);
    std::lock_guard lock(mutex);
    devices.emplace(device, name);
    if (!rank_written) {
      trace::RankInfo rank = options.rank;
      rank.device = name + " (GPU " + std::to_string(device) + ")";
      writer.add_rank(rank);
      rank_written = true;
    }
  }

  void write_rank_if_missing() {
    std::lock_guard lock(mutex);
    if (rank_written) return;
    trace::RankInfo rank = options.rank;
    if (rank.device.empty()) rank.device = "no GPU used";
    writer.add_rank(rank);
    rank_written = true;
  }
};

Tracer::Tracer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Tracer::~Tracer() {
  finalize();
}

Result<std::unique_ptr<Tracer>> Tracer::start(std::unique_ptr<ActivitySource> source,
                                              trace::TraceWriter& writer, TracerOptions options) {
  if (!source) return Error{"no activity source"};
  auto impl = std::make_unique<Impl>(std::move(source), writer, std::move(options));
  Impl& d = *impl;
  if (!d.options.capture_path.empty()) d.capture.emplace(loaded_cupti_version());
  if (Status started = d.source->start(d.pool, d.queue); !started) return started.error();
  if (!d.options.rank.device.empty()) {
    writer.add_rank(d.options.rank);
    d.rank_written = true;
  }
  if (d.options.memory_sample_period.count() > 0) {
    auto probe = GpuMemoryProbe::attach();
    if (probe) {
      d.probe = std::move(probe).value();
    } else {
      d.probe_error = probe.message();
    }
  }
  d.decoding = std::thread([&d] { d.decode_loop(); });
  d.housekeeping = std::thread([&d] { d.housekeeping_loop(); });
  return std::unique_ptr<Tracer>(new Tracer(std::move(impl)));
}

const TracerReport& Tracer::finalize() {
  Impl& d = *impl_;
  std::lock_guard finalizing(d.finalize_mutex);
  if (d.finalized) return d.report;
  {
    std::lock_guard lock(d.mutex);
    d.stopping = true;
  }
  d.wake.notify_all();
  if (d.housekeeping.joinable()) d.housekeeping.join();
  d.source->stop();  // disables collection and forces a flush: no lock of ours is held
  d.queue.close();
  if (d.decoding.joinable()) d.decoding.join();
  d.decoder.finish();
  d.dropped += d.source->take_dropped_records();
  d.write_rank_if_missing();

  TracerReport& r = d.report;
  r.source = d.source->describe();
  r.counts = d.decoder.counts();
  r.dropped_records = d.dropped;
  r.refused_buffers = d.pool.refused();
  r.peak_buffer_bytes = d.pool.peak_in_use() * d.pool.buffer_bytes();
  r.memory_samples = d.memory_samples;
  r.warnings = d.source->warnings();
  if (d.options.memory_sample_period.count() > 0 && !d.probe) {
    r.warnings.push_back("no GPU memory counter: " + d.probe_error);
  }
  if (r.refused_buffers > 0) {
    r.warnings.push_back(std::to_string(r.dropped_records) +
                         " activity records were dropped: the " +
                         format_bytes(static_cast<double>(d.options.buffer_cap_bytes)) +
                         " of trace buffers were full " + std::to_string(r.refused_buffers) +
                         " times (decoding fell behind); the trace has gaps");
  } else if (r.dropped_records > 0) {
    // No buffer was refused: CUPTI lost them on its side (its device buffers).
    r.warnings.push_back(std::to_string(r.dropped_records) +
                         " activity records were dropped by CUPTI itself, though no trace "
                         "buffer was refused; the trace has gaps");
  }
  if (r.counts.invalid_buffers > 0) {
    r.warnings.push_back(
        std::to_string(r.counts.invalid_buffers) +
        " buffers held a record CUPTI could not read; their remaining records were skipped");
  }
  if (d.options.capture_range && d.options.capture_range->spans() == 0) {
    r.warnings.push_back(
        "the capture range never opened: the program did not call cudaProfilerStart "
        "(torch.cuda.profiler.start()), so nothing was recorded");
  }
  if (d.capture_full) r.warnings.push_back("the capture stopped at its size cap");
  // Before the warnings are stored, so that a capture that could not be written says so there.
  if (d.capture) {
    if (Status written = write_replay(d.options.capture_path, d.capture->recording()); !written) {
      r.warnings.push_back(written.message());
    }
  }

  trace::TraceWriter& w = d.writer;
  w.set_meta("tracer.source", r.source);
  w.set_meta("tracer.clock", std::string(trace::kRunClockName));
  w.set_meta("tracer.counts", json_text(counts_json(r.counts)));
  w.set_meta("tracer.dropped_records", std::to_string(r.dropped_records));
  w.set_meta("tracer.refused_buffers", std::to_string(r.refused_buffers));
  w.set_meta("tracer.buffer_cap_bytes", std::to_string(d.options.buffer_cap_bytes));
  w.set_meta("tracer.peak_buffer_bytes", std::to_string(r.peak_buffer_bytes));
  w.set_meta("tracer.memory_samples", std::to_string(r.memory_samples));
  w.set_meta("tracer.warnings", json_text(nlohmann::json(r.warnings)));
  if (Status flushed = w.flush(); !flushed) r.warnings.push_back(flushed.message());
  // Last: everything is decoded and committed before CUPTI lets go of its
  // kernel names (and before anything it does at teardown can go wrong).
  d.source->finalize();
  d.finalized = true;
  return r;
}

}  // namespace cs::profiler
