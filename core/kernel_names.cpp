#include "core/kernel_names.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <cxxabi.h>

namespace cs::trace {

std::string demangle(const char* name) {
  if (!name) return {};
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !text) return name;
  std::string readable(text);
  std::free(text);
  return readable;
}

namespace {

constexpr std::string_view kAnonymous = "(anonymous namespace)";

// The qualified name with its template arguments: after the return type
// ("void foo<int>(...)"), up to the parameter list, outside template arguments.
std::string_view qualified_name(std::string_view text) {
  std::size_t start = 0;
  std::size_t end = text.size();
  int angle = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size() - 1;
      continue;
    }
    const char c = text[i];
    if (c == '<') ++angle;
    if (c == '>' && angle > 0) --angle;
    if (angle > 0) continue;
    if (c == '(') {
      end = i;
      break;
    }
    if (c == ' ') start = i + 1;
  }
  return text.substr(start, end - start);
}

}  // namespace

std::string kernel_short_name(std::string_view text) {
  std::string name(qualified_name(text));
  const std::string anonymous = std::string(kAnonymous) + "::";
  for (std::size_t at; (at = name.find(anonymous)) != std::string::npos;)
    name.erase(at, anonymous.size());
  return name.empty() ? std::string(text) : name;
}

std::string_view kernel_base_name(std::string_view text) {
  const std::string_view base = qualified_name(text);
  // Without template arguments.
  for (std::size_t i = 0; i < base.size(); ++i) {
    if (base.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size() - 1;
      continue;
    }
    if (base[i] == '<') return base.substr(0, i);
  }
  return base;
}

namespace {

struct CollectiveToken {
  std::string_view token;
  Collective collective;
  bool point_to_point;
};

// NCCL's collective names in kernel names (device/generate.py), plus the
// symmetric kernels' and the old kernels' spellings.
constexpr std::array kCollectiveTokens = {
    CollectiveToken{"AllReduce", Collective::all_reduce, false},
    CollectiveToken{"AllGather", Collective::all_gather, false},
    CollectiveToken{"AllGatherV", Collective::all_gather, false},
    CollectiveToken{"ReduceScatter", Collective::reduce_scatter, false},
    CollectiveToken{"Broadcast", Collective::broadcast, false},
    CollectiveToken{"Reduce", Collective::reduce, false},
    CollectiveToken{"AlltoAll", Collective::all_to_all, false},
    CollectiveToken{"AllToAll", Collective::all_to_all, false},
    CollectiveToken{"Alltoall", Collective::all_to_all, false},
    CollectiveToken{"SendRecv", Collective::send_recv, true},
    CollectiveToken{"Send", Collective::send, true},
    CollectiveToken{"Recv", Collective::recv, true},
    CollectiveToken{"Generic", Collective::none, false},
};

struct TypeToken {
  std::string_view token;
  DataType dtype;
};

// Element types: the short names of NCCL >= 2.19 and the symmetric kernels,
// then the C types of older kernel names.
constexpr std::array kTypeTokens = {
    TypeToken{"bf16", DataType::bf16},
    TypeToken{"f16", DataType::fp16},
    TypeToken{"f32", DataType::fp32},
    TypeToken{"f64", DataType::fp64},
    TypeToken{"f8e4m3", DataType::fp8_e4m3},
    TypeToken{"f8e5m2", DataType::fp8_e5m2},
    TypeToken{"i8", DataType::int8},
    TypeToken{"u8", DataType::uint8},
    TypeToken{"i32", DataType::int32},
    TypeToken{"u32", DataType::int32},
    TypeToken{"i64", DataType::int64},
    TypeToken{"u64", DataType::int64},
    TypeToken{"__nv_bfloat16", DataType::bf16},
    TypeToken{"__nv_fp8_e4m3", DataType::fp8_e4m3},
    TypeToken{"__nv_fp8_e5m2", DataType::fp8_e5m2},
    TypeToken{"half", DataType::fp16},
    TypeToken{"float", DataType::fp32},
    TypeToken{"double", DataType::fp64},
    TypeToken{"int8_t", DataType::int8},
    TypeToken{"uint8_t", DataType::uint8},
    TypeToken{"int32_t", DataType::int32},
    TypeToken{"uint32_t", DataType::int32},
    TypeToken{"int64_t", DataType::int64},
    TypeToken{"uint64_t", DataType::int64},
};

// True when `token` stands between '_' separators (or the end) in `name`.
bool has_segment(std::string_view name, std::string_view token) {
  std::size_t from = 0;
  while (true) {
    const std::size_t at = name.find(token, from);
    if (at == std::string_view::npos) return false;
    const bool starts = at > 0 && name[at - 1] == '_';
    const std::size_t after = at + token.size();
    const bool ends = after == name.size() || name[after] == '_';
    if (starts && ends) return true;
    from = at + 1;
  }
}

// The function name of a mangled name the demangler refused: "_Z<length><name>...".
std::string_view mangled_function_name(std::string_view name) {
  std::size_t at = 2;
  std::size_t length = 0;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9' && length < 100000) {
    length = length * 10 + static_cast<std::size_t>(name[at++] - '0');
  }
  if (length == 0 || at + length > name.size()) return name;
  return name.substr(at, length);
}

}  // namespace

std::optional<NcclKernel> parse_nccl_kernel_name(std::string_view name) {
  std::string readable;
  if (name.substr(0, 2) == "_Z") {
    readable = demangle(std::string(name).c_str());
    if (readable.substr(0, 2) == "_Z") readable = std::string(mangled_function_name(readable));
    name = readable;
  }
  name = kernel_base_name(name);
  if (name.substr(0, 4) != "nccl") return std::nullopt;
  NcclKernel kernel;
  // The collective is the first '_' segment that names one.
  std::size_t start = name.find('_');
  while (start != std::string_view::npos) {
    const std::size_t end = name.find('_', start + 1);
    const std::string_view segment = name.substr(
        start + 1, end == std::string_view::npos ? std::string_view::npos : end - start - 1);
    bool found = false;
    for (const CollectiveToken& t : kCollectiveTokens) {
      if (segment == t.token) {
        kernel.collective = t.collective;
        kernel.point_to_point = t.point_to_point;
        found = true;
        break;
      }
    }
    if (found) break;
    start = end;
  }
  // Older names run the collective into other words
  // (ncclAllReduceRingLLKernel_sum_f32): the longest token inside the name.
  if (kernel.collective == Collective::none && !has_segment(name, "Generic")) {
    std::size_t longest = 0;
    for (const CollectiveToken& t : kCollectiveTokens) {
      if (t.token.size() > longest && name.find(t.token) != std::string_view::npos) {
        kernel.collective = t.collective;
        kernel.point_to_point = t.point_to_point;
        longest = t.token.size();
      }
    }
  }
  for (const TypeToken& t : kTypeTokens) {
    if (has_segment(name, t.token)) {
      kernel.dtype = t.dtype;
      break;
    }
  }
  return kernel;
}

std::optional<NcclCall> nccl_call_from_range_name(std::string_view name) {
  struct Entry {
    std::string_view name;
    NcclCall call;
  };
  static constexpr std::array kCalls = {
      Entry{"ncclAllReduce", {Collective::all_reduce, false, false}},
      Entry{"ncclAllGather", {Collective::all_gather, false, false}},
      Entry{"ncclReduceScatter", {Collective::reduce_scatter, false, false}},
      Entry{"ncclBroadcast", {Collective::broadcast, false, true}},
      Entry{"ncclBcast", {Collective::broadcast, false, true}},
      Entry{"ncclReduce", {Collective::reduce, false, true}},
      Entry{"ncclAlltoAll", {Collective::all_to_all, false, false}},
      Entry{"ncclGather", {Collective::none, false, true}},
      Entry{"ncclScatter", {Collective::none, false, true}},
      Entry{"ncclSend", {Collective::send, true, true}},
      Entry{"ncclRecv", {Collective::recv, true, true}},
  };
  for (const Entry& e : kCalls) {
    if (name == e.name) return e.call;
  }
  return std::nullopt;
}

std::string_view api_name_without_version(std::string_view name) {
  const std::size_t v = name.rfind("_v");
  if (v == std::string_view::npos || name.size() - v - 2 < 4) return name;
  if (name.find_first_not_of("0123456789", v + 2) != std::string_view::npos) return name;
  return name.substr(0, v);
}

}  // namespace cs::trace
