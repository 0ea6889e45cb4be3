#include "core/trace_types.h"

#include <algorithm>

#include "core/enum_names.h"

namespace cs::trace {

namespace {

template <class E>
using Named = std::pair<E, std::string_view>;

// The names stores, exports and the CLI use; the integer values are the stored form.
constexpr auto kEventKindNames = enum_names<EventKind>(
    Named<EventKind>{EventKind::kernel, "kernel"}, Named<EventKind>{EventKind::memcpy, "memcpy"},
    Named<EventKind>{EventKind::memset, "memset"},
    Named<EventKind>{EventKind::collective, "collective"}, Named<EventKind>{EventKind::p2p, "p2p"},
    Named<EventKind>{EventKind::annotation, "annotation"},
    Named<EventKind>{EventKind::cpu_op, "cpu_op"},
    Named<EventKind>{EventKind::api_call, "api_call"}, Named<EventKind>{EventKind::step, "step"},
    Named<EventKind>{EventKind::sync, "sync"}, Named<EventKind>{EventKind::overhead, "overhead"});

constexpr auto kCategoryNames =
    enum_names<Category>(Named<Category>{Category::compute, "compute"},
                         Named<Category>{Category::communication, "communication"},
                         Named<Category>{Category::memory, "memory"},
                         Named<Category>{Category::synchronization, "synchronization"},
                         Named<Category>{Category::other, "other"});

constexpr auto kLaneKindNames = enum_names<LaneKind>(
    Named<LaneKind>{LaneKind::gpu_stream, "gpu_stream"},
    Named<LaneKind>{LaneKind::cpu_thread, "cpu_thread"},
    Named<LaneKind>{LaneKind::annotation, "annotation"},
    Named<LaneKind>{LaneKind::communication, "communication"},
    Named<LaneKind>{LaneKind::steps, "steps"}, Named<LaneKind>{LaneKind::predicted, "predicted"});

constexpr auto kCollectiveNames = enum_names<Collective>(
    Named<Collective>{Collective::none, "none"},
    Named<Collective>{Collective::all_reduce, "all_reduce"},
    Named<Collective>{Collective::all_gather, "all_gather"},
    Named<Collective>{Collective::reduce_scatter, "reduce_scatter"},
    Named<Collective>{Collective::broadcast, "broadcast"},
    Named<Collective>{Collective::reduce, "reduce"},
    Named<Collective>{Collective::all_to_all, "all_to_all"},
    Named<Collective>{Collective::send, "send"}, Named<Collective>{Collective::recv, "recv"},
    Named<Collective>{Collective::barrier, "barrier"},
    Named<Collective>{Collective::send_recv, "send_recv"});

constexpr auto kDataTypeNames = enum_names<DataType>(
    Named<DataType>{DataType::none, "none"}, Named<DataType>{DataType::fp32, "fp32"},
    Named<DataType>{DataType::fp16, "fp16"}, Named<DataType>{DataType::bf16, "bf16"},
    Named<DataType>{DataType::fp8_e4m3, "fp8_e4m3"},
    Named<DataType>{DataType::fp8_e5m2, "fp8_e5m2"}, Named<DataType>{DataType::int8, "int8"},
    Named<DataType>{DataType::uint8, "uint8"}, Named<DataType>{DataType::int32, "int32"},
    Named<DataType>{DataType::int64, "int64"}, Named<DataType>{DataType::fp64, "fp64"});

}  // namespace

std::string_view to_string(EventKind k) {
  return kEventKindNames.name(k);
}
std::string_view to_string(Category c) {
  return kCategoryNames.name(c);
}
std::string_view to_string(LaneKind k) {
  return kLaneKindNames.name(k);
}
std::string_view to_string(Collective c) {
  return kCollectiveNames.name(c);
}
std::string_view to_string(DataType t) {
  return kDataTypeNames.name(t);
}

std::optional<EventKind> event_kind_from_string(std::string_view text) {
  return kEventKindNames.parse(text);
}
std::optional<Category> category_from_string(std::string_view text) {
  return kCategoryNames.parse(text);
}
std::optional<Collective> collective_from_string(std::string_view text) {
  return kCollectiveNames.parse(text);
}
std::optional<DataType> data_type_from_string(std::string_view text) {
  return kDataTypeNames.parse(text);
}
std::optional<LaneKind> lane_kind_from_string(std::string_view text) {
  return kLaneKindNames.parse(text);
}

std::optional<Precision> precision_of(DataType t) {
  switch (t) {
    case DataType::fp32:
      return Precision::fp32;
    case DataType::bf16:
      return Precision::bf16;
    case DataType::fp16:
      return Precision::fp16;
    case DataType::fp8_e4m3:
    case DataType::fp8_e5m2:
      return Precision::fp8;
    case DataType::int8:
      return Precision::int8;
    default:
      return std::nullopt;
  }
}

int data_type_bytes(DataType t) {
  switch (t) {
    case DataType::none:
      return 0;
    case DataType::fp8_e4m3:
    case DataType::fp8_e5m2:
    case DataType::int8:
    case DataType::uint8:
      return 1;
    case DataType::fp16:
    case DataType::bf16:
      return 2;
    case DataType::fp32:
    case DataType::int32:
      return 4;
    case DataType::int64:
    case DataType::fp64:
      return 8;
  }
  return 0;
}

double bus_bandwidth_factor(Collective c, int ranks) {
  const double n = std::max(1, ranks);
  switch (c) {
    case Collective::all_reduce:
      return 2 * (n - 1) / n;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

}  // namespace cs::trace
