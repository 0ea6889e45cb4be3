#include "profiler/cupti/cupti_source.h"

#include <atomic>
#include <string>
#include <vector>

#include <cupti.h>

#include "core/run_clock.h"
#include "profiler/cupti/api_filter.h"

namespace cs::profiler {

static_assert(kStepCorrelationKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);

namespace {

std::string cupti_error(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) == CUPTI_SUCCESS && text) return text;
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
  bool required;  // without it there is nothing worth tracing
};

constexpr Kind kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", true},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", false},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", false},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", false},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", false},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER", false},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION", false},
    {CUPTI_ACTIVITY_KIND_MARKER, "MARKER", false},
    {CUPTI_ACTIVITY_KIND_MARKER_DATA, "MARKER_DATA", false},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD", false},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", false},
};

// CUPTI's timestamp callback: the run clock, in CUPTI's type.
std::uint64_t CUPTIAPI realtime_timestamp() {
  return static_cast<std::uint64_t>(trace::run_clock_ns());
}

class CuptiSource;
// The source CUPTI's process-wide callbacks deliver to.
std::atomic<CuptiSource*> g_active{nullptr};

// Step correlation pushes and pops CUPTI refused since the source started
// (they are free functions, called once a step): the source's warnings say so.
std::atomic<int> g_step_correlation_failures{0};
std::atomic<CUptiResult> g_step_correlation_refusal{CUPTI_SUCCESS};

void note_step_correlation(CUptiResult r) {
  if (r == CUPTI_SUCCESS) return;
  g_step_correlation_refusal.store(r);
  g_step_correlation_failures.fetch_add(1);
}

class CuptiSource final : public ActivitySource {
 public:
  explicit CuptiSource(CuptiSourceOptions options) : options_(options) {}
  ~CuptiSource() override {
    CuptiSource* self = this;
    g_active.compare_exchange_strong(self, nullptr);
  }

  std::string describe() const override {
    return "CUPTI " + std::to_string(loaded_cupti_version());
  }

  Status start(BufferPool& pool, BufferQueue& queue) override {
    CuptiSource* expected = nullptr;
    if (!g_active.compare_exchange_strong(expected, this)) {
      return Error{"a CUPTI tracer is already running in this process"};
    }
    pool_ = &pool;
    queue_ = &queue;
    std::uint32_t version = 0;
    if (CUptiResult r = cuptiGetVersion(&version); r != CUPTI_SUCCESS) {
      return fail("CUPTI is not usable here (cuptiGetVersion: " + cupti_error(r) + ")");
    }
    if (CUptiResult r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
        r != CUPTI_SUCCESS) {
      warnings_.push_back("thread ids are pthread_self() values, not system ids (" +
                          cupti_error(r) + ")");
    }
    if (CUptiResult r = cuptiActivityRegisterTimestampCallback(realtime_timestamp);
        r != CUPTI_SUCCESS) {
      warnings_.push_back("timestamps are on CUPTI's default clock (" + cupti_error(r) + ")");
      on_run_clock_ = false;
    }
    if (CUptiResult r = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
        r != CUPTI_SUCCESS) {
      return fail("CUPTI refused the activity buffer callbacks (" + cupti_error(r) + ")");
    }
    for (const Kind& k : kKinds) {
      const CUptiResult r = cuptiActivityEnable(k.kind);
      if (r == CUPTI_SUCCESS) {
        enabled_.push_back(k.kind);
        continue;
      }
      if (k.required) {
        return fail(std::string("CUPTI could not trace kernels (cuptiActivityEnable(") + k.name +
                    "): " + cupti_error(r) + "): this process has no usable NVIDIA GPU and driver");
      }
      warnings_.push_back(std::string("CUPTI did not enable ") + k.name + " records (" +
                          cupti_error(r) + ")");
    }
    // After enabling the kinds: enabling RUNTIME/DRIVER resets these.
    int kept = 0;
    CUptiResult refusal = CUPTI_SUCCESS;
    auto leave_out = [&](CUptiResult r) {
      if (r == CUPTI_SUCCESS) return;
      ++kept;
      refusal = r;
    };
    for (CUpti_CallbackId cbid : cupti_api::noisy_runtime_calls())
      leave_out(cuptiActivityEnableRuntimeApi(cbid, 0));
    for (CUpti_CallbackId cbid : cupti_api::noisy_driver_calls())
      leave_out(cuptiActivityEnableDriverApi(cbid, 0));
    if (kept > 0) {
      warnings_.push_back("CUPTI records " + std::to_string(kept) +
                          " API calls it was asked to leave out (" + cupti_error(refusal) +
                          "): the trace holds more API records than usual");
    }
    g_step_correlation_failures.store(0);
    if (options_.capture_range) follow_profiler_calls();
    return {};
  }

  void flush() override {
    if (g_active.load() == this) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }

  void flush_completed() override {
    if (g_active.load() == this && !stopped_.load()) cuptiActivityFlushAll(0);
  }

  std::uint64_t take_dropped_records() override {
    if (g_active.load() != this) return 0;
    std::size_t dropped = 0;
    // Outside every lock of ours: CUPTI takes its own lock here, and its
    // buffer callbacks take the pool's and the queue's under it.
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) return 0;
    return dropped;
  }

  void stop() override {
    if (g_active.load() != this || stopped_.exchange(true)) return;
    if (subscriber_) {
      cuptiUnsubscribe(subscriber_);
      subscriber_ = nullptr;
    }
    for (CUpti_ActivityKind kind : enabled_)
      cuptiActivityDisable(kind);
    if (CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        r != CUPTI_SUCCESS) {
      warnings_.push_back("CUPTI's last flush failed (" + cupti_error(r) +
                          "): the records of the run's last moments may be missing");
    }
  }

  void finalize() override {
    if (g_active.load() != this) return;
    if (options_.finalize_cupti) cuptiFinalize();
    g_active.store(nullptr);
  }

  std::vector<std::string> warnings() const override {
    std::vector<std::string> all = warnings_;
    if (const int failed = g_step_correlation_failures.load(); failed > 0) {
      all.push_back("CUPTI refused " + std::to_string(failed) + " step correlation call" +
                    (failed == 1 ? "" : "s") + " (" +
                    cupti_error(g_step_correlation_refusal.load()) +
                    "): some kernels carry no step and are placed by time alone");
    }
    return all;
  }

 private:
  static void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                           std::size_t* max_records) {
    *max_records = 0;
    CuptiSource* source = g_active.load();
    std::uint8_t* data = source ? source->pool_->acquire() : nullptr;
    *buffer = data;
    *size = data ? source->pool_->buffer_bytes() : 0;
  }

  static void CUPTIAPI on_buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer,
                                           std::size_t size, std::size_t valid) {
    CuptiSource* source = g_active.load();
    if (!buffer || !source) return;
    if (valid == 0) {
      source->pool_->release(buffer);
      return;
    }
    source->queue_->push(ActivityBuffer{buffer, size, valid, true});
  }

  // cudaProfilerStart and cudaProfilerStop open and close the capture range
  // (the runtime's calls reach CUPTI as the driver's too: opening an open
  // range does nothing).
  void follow_profiler_calls() {
    // The range is timed on the run clock, which the records are on only
    // when CUPTI took the timestamp callback.
    if (!on_run_clock_) {
      warnings_.push_back(
          "the capture range cannot be held against the records (their timestamps are not on "
          "the run clock): the whole run is recorded");
      options_.capture_range->open_throughout();
      return;
    }
    const auto refused = [&](const char* call, CUptiResult r) {
      warnings_.push_back(std::string("the capture range cannot follow cudaProfilerStart and "
                                      "cudaProfilerStop (") +
                          call + ": " + cupti_error(r) +
                          "; another tool in the process may hold CUPTI's callbacks): the "
                          "whole run is recorded");
      options_.capture_range->open_throughout();
    };
    if (CUptiResult r = cuptiSubscribe(&subscriber_, on_profiler_call, this); r != CUPTI_SUCCESS) {
      subscriber_ = nullptr;
      refused("cuptiSubscribe", r);
      return;
    }
    const std::pair<CUpti_CallbackDomain, CUpti_CallbackId> calls[] = {
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000},
    };
    for (const auto& [domain, cbid] : calls) {
      if (CUptiResult r = cuptiEnableCallback(1, subscriber_, domain, cbid); r != CUPTI_SUCCESS) {
        cuptiUnsubscribe(subscriber_);
        subscriber_ = nullptr;
        refused("cuptiEnableCallback", r);
        return;
      }
    }
  }

  // On the program's thread, inside its call: no lock but the range's.
  static void CUPTIAPI on_profiler_call(void* self, CUpti_CallbackDomain domain,
                                        CUpti_CallbackId cbid, const void* data) {
    if (!self) return;
    follow_profiler_call(*static_cast<CuptiSource*>(self)->options_.capture_range, domain, cbid,
                         data);
  }

  Error fail(std::string message) {
    for (CUpti_ActivityKind kind : enabled_)
      cuptiActivityDisable(kind);
    enabled_.clear();
    CuptiSource* self = this;
    g_active.compare_exchange_strong(self, nullptr);
    return Error{std::move(message)};
  }

  CuptiSourceOptions options_;
  BufferPool* pool_ = nullptr;
  BufferQueue* queue_ = nullptr;
  std::vector<CUpti_ActivityKind> enabled_;
  std::vector<std::string> warnings_;
  std::atomic<bool> stopped_{false};
  CUpti_SubscriberHandle subscriber_ = nullptr;  // the profiler calls' (capture_range)
  bool on_run_clock_ = true;                     // CUPTI took the timestamp callback
};

}  // namespace

std::unique_ptr<ActivitySource> make_cupti_source(CuptiSourceOptions options) {
  return std::make_unique<CuptiSource>(options);
}

void follow_profiler_call(CaptureRange& range, int domain, std::uint32_t cbid, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (!call || call->callbackSite != CUPTI_API_ENTER) return;
  std::uint32_t start = 0, stop = 0;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    start = CUPTI_DRIVER_TRACE_CBID_cuProfilerStart;
    stop = CUPTI_DRIVER_TRACE_CBID_cuProfilerStop;
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    start = CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000;
    stop = CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000;
  } else {
    return;
  }
  if (cbid == start) range.open(trace::run_clock_ns());
  if (cbid == stop) range.close(trace::run_clock_ns());
}

std::uint32_t loaded_cupti_version() {
  std::uint32_t version = 0;
  if (cuptiGetVersion(&version) != CUPTI_SUCCESS) return 0;
  return version;
}

void push_step_correlation(std::int32_t step) {
  note_step_correlation(cuptiActivityPushExternalCorrelationId(
      CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2,
      static_cast<std::uint64_t>(static_cast<std::uint32_t>(step))));
}

void pop_step_correlation() {
  note_step_correlation(
      cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, nullptr));
}

}  // namespace cs::profiler
