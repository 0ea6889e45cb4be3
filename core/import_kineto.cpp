// PyTorch profiler (Kineto) Chrome-trace JSON → trace store.
//
// The file is decompressed (zlib reads gzip and plain files alike) and read
// with a SAX parser that keeps only the fields the store needs, so a trace of
// hundreds of megabytes never exists as a JSON tree. Timestamps are
// microseconds with fractions; they are converted from their decimal text to
// integer nanoseconds exactly.

#if CLUSTERSCOPE_HAVE_ZLIB
#include <zlib.h>
#endif

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/file_exists.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/kernel_names.h"
#include "core/parse_count.h"
#include "core/step_names.h"
#include "core/trace_export.h"
#include "core/trace_import.h"
#include "core/trace_import_internal.h"
#include "core/trace_store_internal.h"
#include "core/utf8.h"

namespace cs::trace {

namespace {

constexpr const char* kFlowEvents = "flow events (ph s/f)";

// A file's bytes, uninitialised past `size`.
struct Text {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;
  std::size_t capacity = 0;
};

// Half the machine's memory: what the text of one trace may take.
std::size_t default_max_text_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::size_t{16} << 30;
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) / 2;
}

Error too_large(const std::string& path, std::size_t max_bytes) {
  return Error{
      path + ": holds more than " + format_bytes(static_cast<double>(max_bytes)) + " of JSON" +
      (max_bytes == default_max_text_bytes() ? " (half this machine's memory)" : std::string()) +
      ": not read; split the trace (the profiler's schedule, one file per rank or step)"};
}

Result<Text> read_possibly_gzipped(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  if (Status there = check_file_exists(path); !there) return there.error();
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes) return too_large(path, max_bytes);
#if CLUSTERSCOPE_HAVE_ZLIB
  // zlib reads plain files as they are, so one path serves both. The buffer
  // is sized once from the file (or, for gzip, from its trailer's length
  // field) and not zero-filled: a 100 MB trace is read in one pass.
  std::size_t expected = ec ? 0 : static_cast<std::size_t>(size);
  {
    std::ifstream probe(path, std::ios::binary);
    unsigned char head[2] = {};
    probe.read(reinterpret_cast<char*>(head), 2);
    if (head[0] == 0x1f && head[1] == 0x8b && size >= 18) {
      unsigned char tail[4] = {};
      probe.seekg(-4, std::ios::end);
      probe.read(reinterpret_cast<char*>(tail), 4);
      expected = std::max<std::size_t>(expected, tail[0] | (tail[1] << 8) | (tail[2] << 16) |
                                                     (static_cast<std::size_t>(tail[3]) << 24));
    }
  }
  expected = std::min(expected, max_bytes);
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Error{path + ": cannot open"};
  gzbuffer(f, 1 << 20);
  Text out;
  out.capacity = expected + 1;
  out.data.reset(new char[out.capacity]);
  for (;;) {
    if (out.size == out.capacity) {  // the trailer lied (a file of several gzip members)
      if (out.size > max_bytes) {
        gzclose(f);
        return too_large(path, max_bytes);
      }
      const std::size_t larger = std::min(out.capacity * 2, max_bytes + 2);
      std::unique_ptr<char[]> bigger(new char[larger]);
      std::memcpy(bigger.get(), out.data.get(), out.size);
      out.data = std::move(bigger);
      out.capacity = larger;
    }
    const std::size_t room = std::min<std::size_t>(out.capacity - out.size, 1u << 30);
    const int n = gzread(f, out.data.get() + out.size, static_cast<unsigned>(room));
    if (n < 0) {
      int code = 0;
      const std::string message = gzerror(f, &code);
      gzclose(f);
      return Error{path + ": cannot decompress: " + message};
    }
    if (n == 0) break;
    out.size += static_cast<std::size_t>(n);
    if (out.size > max_bytes) {
      gzclose(f);
      return too_large(path, max_bytes);
    }
  }
  // zlib ends a gzip stream cut short like a whole one, and says so only here.
  int code = 0;
  gzerror(f, &code);
  gzclose(f);
  if (code == Z_BUF_ERROR) {
    return Error{path + ": the gzip stream is cut short (" + std::to_string(size) +
                 " bytes hold " + std::to_string(out.size) +
                 " bytes of the trace): a copy or a download not finished?"};
  }
  return out;
#else
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open"};
  Text out;
  out.capacity = out.size = ec ? 0 : static_cast<std::size_t>(size);
  out.data.reset(new char[out.capacity + 1]);
  in.read(out.data.get(), static_cast<std::streamsize>(out.size));
  if (out.size >= 2 && static_cast<unsigned char>(out.data[0]) == 0x1f &&
      static_cast<unsigned char>(out.data[1]) == 0x8b)
    return Error{path + ": a gzip file, and this build has no zlib: decompress it first"};
  return out;
#endif
}

// "4458676522690.655" µs → 4458676522690655 ns, exactly. Exponent forms fall
// back to a double: their digits alone can overflow an int64
// ("100000000000000000000000e-20"), where the value (which the caller
// checked is within kMaxMicros) bounds the digits of one without.
std::int64_t micros_text_to_ns(std::string_view text) {
  if (text.find_first_of("eE") != std::string_view::npos) {
    double v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return static_cast<std::int64_t>(std::llround(v * 1000.0));
  }
  bool negative = false;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  std::int64_t whole = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    whole = whole * 10 + (text[i] - '0');
  std::int64_t frac = 0;
  int digits = 0;
  bool round_up = false;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (digits < 3) {
        frac = frac * 10 + (text[i] - '0');
        ++digits;
      } else if (digits == 3) {
        round_up = text[i] >= '5';
        ++digits;
      }
    }
  }
  while (digits < 3) {
    frac *= 10;
    ++digits;
  }
  std::int64_t ns = whole * 1000 + std::min<std::int64_t>(frac, 999) + (round_up ? 1 : 0);
  return negative ? -ns : ns;
}

enum class Cat : std::uint8_t {
  unknown,
  kernel,
  gpu_memcpy,
  gpu_memset,
  gpu_user_annotation,
  cpu_op,
  user_annotation,
  cuda_runtime,
  cuda_driver,
  python_function,
  overhead,
  trace_span,
  cuda_sync,  // a synchronization on a device's stream (PyTorch 2.4 on)
};

Cat category_of(std::string_view c) {
  if (c == "kernel" || c == "Kernel") return Cat::kernel;
  if (c == "gpu_memcpy" || c == "Memcpy") return Cat::gpu_memcpy;
  if (c == "gpu_memset" || c == "Memset") return Cat::gpu_memset;
  if (c == "gpu_user_annotation") return Cat::gpu_user_annotation;
  if (c == "cpu_op" || c == "Operator") return Cat::cpu_op;
  if (c == "user_annotation") return Cat::user_annotation;
  if (c == "cuda_runtime" || c == "Runtime") return Cat::cuda_runtime;
  if (c == "cuda_driver") return Cat::cuda_driver;
  if (c == "python_function") return Cat::python_function;
  if (c == "overhead") return Cat::overhead;
  if (c == "Trace") return Cat::trace_span;
  if (c == "cuda_sync") return Cat::cuda_sync;
  return Cat::unknown;
}

bool on_gpu(Cat c) {
  return c == Cat::kernel || c == Cat::gpu_memcpy || c == Cat::gpu_memset ||
         c == Cat::gpu_user_annotation || c == Cat::cuda_sync;
}

// A pid or tid: Kineto writes numbers, and strings for its own rows ("Spans").
struct Id {
  bool text = false;
  std::int64_t value = 0;
  auto operator<=>(const Id&) const = default;
};

struct LaneKey {
  Id pid, tid;
  bool gpu_annotation = false;
  auto operator<=>(const LaneKey&) const = default;
};

// One "X" event as read, names interned into the file's own table.
struct Parsed {
  std::uint32_t lane = 0;  // index into the lane table
  Cat cat = Cat::unknown;
  std::uint32_t name = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t correlation = 0;
  std::int64_t bytes = 0;
  std::int64_t in_elements = -1;
  std::int64_t out_elements = -1;
  std::int32_t group_size = 0;
  std::uint32_t collective_name = 0;  // args "Collective name"
  std::uint32_t dtype = 0;            // args "dtype"
  // This product's own export writes the event's fields under its own keys
  // (args "kind", "category", "step", "collective", ...): -1 / 0 when absent.
  std::int8_t own_kind = -1;
  std::uint32_t own_name = 0;  // args "stored_name": a step's name, exported as ProfilerStep#N
  std::int8_t own_category = -1;
  std::int8_t own_collective = -1;
  std::int32_t own_step = -1;
  std::int32_t own_peer = -1;
  std::int32_t own_group_size = -1;
  std::int64_t own_count = -1;
  double own_flops = 0;
  // A GEMM operator's work from its "Input Dims" and "Input type"
  // (record_shapes=True), as PyTorch's with_flops counts it; 0 when not one.
  double gemm_flops = 0;
  std::int64_t gemm_bytes = 0;
  DataType gemm_type = DataType::none;
  std::uint32_t launch = 0;  // a kernel's launch: 1 + its index in the handler's launches; 0: none
};

// A counter sample ("ph": "C"): its value is the first number in its args,
// `key` that number's key.
struct ParsedCounter {
  Id pid;
  std::uint32_t name = 0;
  std::uint32_t key = 0;
  std::int64_t time = 0;
  double value = 0;
};

enum class Key : std::uint8_t {
  other,
  ts,
  dur,
  ph,
  cat,
  name,
  pid,
  tid,
  labels,
  collective_name,
  dtype,
  backend,
  nccl_version,
  args,
  distributed_info,
  trace_events,
  device_properties,
  correlation,
  bytes,
  in_elements,
  out_elements,
  group_size,
  sort_index,
  rank,
  world_size,
  base_time_ns,
  other_data,
  own_kind,
  own_name,
  own_category,
  own_collective,
  own_step,
  own_peer,
  own_group_size,
  own_count,
  own_flops,
  total_allocated,  // a "[memory]" instant event's (PyTorch's profile_memory)
  total_reserved,   // the same event's: what the caching allocator holds
  grid,             // a kernel's launch: [x, y, z]
  block,
  registers_per_thread,
  shared_memory,          // per block, static and dynamic
  dynamic_shared_memory,  // this product's export: the dynamic part
  device_type,
  device_id,
  id,          // a deviceProperties entry's device index
  input_dims,  // a CPU operator's tensor shapes (record_shapes=True)
  input_type,  // ... and their element types
};

// The keys the handler reads; every other key is Key::other.
Key key_of(std::string_view k) {
  static const std::pair<std::string_view, Key> known[] = {
      {"ts", Key::ts},
      {"Input Dims", Key::input_dims},
      {"Input type", Key::input_type},
      {"dur", Key::dur},
      {"ph", Key::ph},
      {"cat", Key::cat},
      {"name", Key::name},
      {"pid", Key::pid},
      {"tid", Key::tid},
      {"labels", Key::labels},
      {"Collective name", Key::collective_name},
      {"dtype", Key::dtype},
      {"backend", Key::backend},
      {"nccl_version", Key::nccl_version},
      {"args", Key::args},
      {"distributedInfo", Key::distributed_info},
      {"traceEvents", Key::trace_events},
      {"deviceProperties", Key::device_properties},
      {"correlation", Key::correlation},
      {"bytes", Key::bytes},
      {"In msg nelems", Key::in_elements},
      {"Out msg nelems", Key::out_elements},
      {"Group size", Key::group_size},
      {"sort_index", Key::sort_index},
      {"rank", Key::rank},
      {"world_size", Key::world_size},
      {"baseTimeNanoseconds", Key::base_time_ns},
      {"otherData", Key::other_data},
      {"kind", Key::own_kind},
      {"stored_name", Key::own_name},
      {"category", Key::own_category},
      {"collective", Key::own_collective},
      {"step", Key::own_step},
      {"peer", Key::own_peer},
      {"group_size", Key::own_group_size},
      {"count", Key::own_count},
      {"flops", Key::own_flops},
      {"Total Allocated", Key::total_allocated},
      {"Total Reserved", Key::total_reserved},
      {"grid", Key::grid},
      {"block", Key::block},
      {"registers per thread", Key::registers_per_thread},
      {"shared memory", Key::shared_memory},
      {"dynamic shared memory", Key::dynamic_shared_memory},
      {"Device Type", Key::device_type},
      {"Device Id", Key::device_id},
      {"id", Key::id},
  };
  for (const auto& [text, key] : known) {
    if (text == k) return key;
  }
  return Key::other;
}

struct GemmWork {
  double flops = 0;
  std::int64_t bytes = 0;  // its operands read and its result written once
  DataType type = DataType::none;
};

// The work of PyTorch's matrix-multiply operators from their recorded
// shapes (record_shapes=True), as its profiler counts their FLOPs
// (with_flops: 2mkn, times the batch): aten::mm [[m,k],[k,n]], aten::addmm
// [bias, [m,k], [k,n], beta, alpha], aten::bmm [[b,m,k],[b,k,n]],
// aten::baddbmm [input, [b,m,k], [b,k,n], ...]. Only these leaf operators:
// aten::linear and aten::matmul call them, and would count their work twice.
std::optional<GemmWork> gemm_work(std::string_view name,
                                  std::span<const std::vector<std::int64_t>> dims,
                                  const std::vector<std::string>& types) {
  std::size_t first = 0;  // the index of the left operand
  bool batched = false;
  if (name == "aten::mm") {
  } else if (name == "aten::addmm") {
    first = 1;
  } else if (name == "aten::bmm") {
    batched = true;
  } else if (name == "aten::baddbmm") {
    first = 1;
    batched = true;
  } else {
    return std::nullopt;
  }
  if (dims.size() < first + 2) return std::nullopt;
  const std::vector<std::int64_t>& a = dims[first];
  const std::vector<std::int64_t>& b = dims[first + 1];
  const std::size_t rank = batched ? 3 : 2;
  if (a.size() != rank || b.size() != rank) return std::nullopt;
  for (std::size_t i = 0; i < rank; ++i) {
    if (a[i] <= 0 || b[i] <= 0) return std::nullopt;
  }
  const double batch = batched ? static_cast<double>(a[0]) : 1.0;
  if (batched && b[0] != a[0]) return std::nullopt;
  const double m = static_cast<double>(a[rank - 2]), k = static_cast<double>(a[rank - 1]);
  const double n = static_cast<double>(b[rank - 1]);
  if (b[rank - 2] != a[rank - 1]) return std::nullopt;  // not a product PyTorch would run
  GemmWork w;
  w.flops = 2 * batch * m * k * n;
  if (types.size() > first) {
    std::string_view type = types[first];
    if (type.starts_with("c10::")) type.remove_prefix(5);
    w.type = importing::data_type_from_any(type);
  }
  if (const int size = data_type_bytes(w.type); size > 0) {
    const double elements = batch * (m * k + k * n + m * n);
    if (elements * size < 9e18) w.bytes = static_cast<std::int64_t>(elements * size);
  }
  return w;
}

class KinetoHandler : public nlohmann::json_sax<nlohmann::json> {
 public:
  // Parse state: what the innermost open object or array is.
  enum class Ctx : std::uint8_t {
    root,
    events,
    event,
    args,
    distributed,
    device_properties,
    device,
    grid,               // a kernel's args.grid
    block,              // ... and args.block
    input_dims,         // args "Input Dims": a shape per input
    input_dims_tensor,  // ... one input's shape
    input_types,        // args "Input type"
    skip
  };

  std::vector<Parsed> events;
  std::vector<KernelLaunch> launches;  // the kernels' (Parsed::launch)
  std::vector<std::string> strings{""};
  std::unordered_map<std::string, std::uint32_t> string_ids{{"", 0}};
  std::vector<LaneKey> lane_keys;
  std::map<LaneKey, std::uint32_t> lane_index;
  std::map<Id, std::string> process_names, process_labels;
  std::map<std::pair<Id, Id>, std::string> thread_names;
  std::map<std::string, std::int64_t> skipped;
  bool saw_trace_events = false;
  std::optional<std::int32_t> rank;
  std::optional<std::int32_t> world_size;
  std::string rank_text, world_size_text;  // distributedInfo's, where given as text
  std::optional<std::int64_t> base_time_ns;
  std::string backend, nccl_version;
  // deviceProperties' names by device index: an entry's "id", else its
  // place in the list.
  std::map<std::int64_t, std::string> devices;
  std::vector<ParsedCounter> counters;
  std::vector<ParsedCounter> memory_samples;  // PyTorch's "[memory]" events, as counters
  // otherData, kept whole: this product's export writes its metadata there.
  nlohmann::json other_data;
  std::string error;

  bool null() override {
    if (capturing()) return capture(nullptr);
    spoil_launch_dims();
    return other_value();
  }
  bool boolean(bool v) override {
    if (capturing()) return capture(v);
    spoil_launch_dims();
    return other_value();
  }
  bool number_integer(number_integer_t v) override {
    if (capturing()) return capture(v);
    return in_events() ? scalar() : integer(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (capturing()) return capture(v);
    return in_events() ? scalar()
                       : integer(static_cast<std::int64_t>(std::min<number_unsigned_t>(v, INT64_MAX)));
  }
  bool number_float(number_float_t v, const string_t& raw) override {
    if (capturing()) return capture(v);
    if (in_events()) return scalar();
    const Ctx c = top();
    if (c == Ctx::input_dims_tensor) {
      input_dims_[input_dims_used_ - 1].push_back(-1);  // a fraction is no dimension: no GEMM
    } else if (c == Ctx::grid || c == Ctx::block) {
      launch_dims_ = 4;  // a fraction is no dimension: no launch
    } else if (c == Ctx::distributed && (key_ == Key::rank || key_ == Key::world_size)) {
      // 1.0 is rank 1, as an integer's rules read it (it read as no rank:
      // rank 0 from the file order); 1.5 or 1e20 is refused, as -3 is.
      if (std::fabs(v) < 9e18 && v == std::floor(v)) return integer(static_cast<std::int64_t>(v));
      const bool is_rank = key_ == Key::rank;
      error = std::string("distributedInfo.") + (is_rank ? "rank" : "world_size") + " is " + raw +
              ": must be a whole number between " + (is_rank ? "0" : "1") + " and " +
              std::to_string(INT32_MAX);
      return false;
    } else if (c == Ctx::event && (key_ == Key::ts || key_ == Key::dur) &&
               !(std::fabs(v) <= kMaxMicros)) {
      time_out_of_range_ = true;
    } else if (c == Ctx::event) {
      if (key_ == Key::ts) {
        ts_ = micros_text_to_ns(raw);
        has_ts_ = true;
      } else if (key_ == Key::dur) {
        dur_ = micros_text_to_ns(raw);
        has_dur_ = true;
      } else if (key_ == Key::pid || key_ == Key::tid) {
        // 7.0 is 7; 7.5 is an id of its own, named as written (it read as
        // 0: a kernel of stream 7.5 drawn on stream 0).
        const bool whole = std::fabs(v) < 9e18 && v == std::floor(v);
        const Id id = whole ? Id{false, static_cast<std::int64_t>(v)} : Id{true, intern(raw)};
        (key_ == Key::pid ? pid_ : tid_) = id;
      }
    } else if (c == Ctx::args) {
      note_number(v);
      if (key_ == Key::own_flops)
        current_.own_flops = v;
      else  // clamped as number_unsigned is: a double past int64 does not convert (UB)
        integer(v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : static_cast<std::int64_t>(v));
    }
    return value_done();
  }
  bool string(string_t& v) override {
    if (capturing()) return capture(v);
    spoil_launch_dims();
    if (in_events()) return scalar();
    const Ctx c = top();
    if (c == Ctx::event) {
      if (key_ == Key::ts || key_ == Key::dur) {
        time_not_a_number_ = true;
      } else if (key_ == Key::ph) {
        ph_ = v.empty() ? '?' : v[0];
      } else if (key_ == Key::cat) {
        cat_ = category_of(v);
        if (cat_ == Cat::unknown) unknown_cat_ = v;
      } else if (key_ == Key::name) {
        name_ = intern(v);
      } else if (key_ == Key::pid) {
        pid_ = {true, intern(v)};
      } else if (key_ == Key::tid) {
        tid_ = {true, intern(v)};
      }
    } else if (c == Ctx::args) {
      if (key_ == Key::name) {
        arg_name_ = v;
      } else if (key_ == Key::labels) {
        arg_labels_ = v;
      } else if (key_ == Key::collective_name) {
        current_.collective_name = intern(v);
      } else if (key_ == Key::dtype) {
        current_.dtype = intern(v);
      } else if (key_ == Key::own_kind) {
        if (auto k = event_kind_from_string(v)) current_.own_kind = static_cast<std::int8_t>(*k);
      } else if (key_ == Key::own_name) {
        current_.own_name = intern(v);
      } else if (key_ == Key::own_category) {
        if (auto k = category_from_string(v)) current_.own_category = static_cast<std::int8_t>(*k);
      } else if (key_ == Key::own_collective) {
        if (auto k = collective_from_string(v))
          current_.own_collective = static_cast<std::int8_t>(*k);
      }
    } else if (c == Ctx::input_types) {
      input_types_.push_back(v);
    } else if (c == Ctx::distributed) {
      if (key_ == Key::backend) backend = v;
      if (key_ == Key::nccl_version) nccl_version = v;
      // A rank or world size written as text is none: said, not passed over.
      if (key_ == Key::rank) rank_text = v;
      if (key_ == Key::world_size) world_size_text = v;
    } else if (c == Ctx::device && key_ == Key::name) {
      device_name_ = v;
    }
    return value_done();
  }
  bool binary(binary_t&) override {
    if (capturing()) return capture(nullptr);
    spoil_launch_dims();
    return other_value();
  }

  bool start_object(std::size_t) override {
    if (capturing()) return capture_open(nlohmann::json::object());
    spoil_launch_dims();
    const Ctx parent = stack_.empty() ? Ctx::skip : stack_.back();
    if (parent == Ctx::root && key_ == Key::other_data) {
      other_data = nlohmann::json::object();
      capture_.push_back(&other_data);
      return true;
    }
    note_time_not_a_number(parent);
    Ctx c = Ctx::skip;
    root_opened_ = true;
    if (stack_.empty())
      c = Ctx::root;
    else if (parent == Ctx::events)
      c = Ctx::event;
    else if (parent == Ctx::event && key_ == Key::args)
      c = Ctx::args;
    else if (parent == Ctx::root && key_ == Key::distributed_info)
      c = Ctx::distributed;
    else if (parent == Ctx::device_properties)
      c = Ctx::device;
    if (c == Ctx::event) begin_event();
    if (c == Ctx::device) {
      device_id_ = devices_listed_++;
      device_name_.clear();
    }
    stack_.push_back(c);
    return true;
  }
  bool key(string_t& k) override {
    if (capturing()) {
      capture_key_ = k;
      return true;
    }
    key_ = key_of(k);
    if (!has_number_ && top() == Ctx::args) first_number_key_.assign(k);
    return true;
  }
  bool end_object() override {
    if (capturing()) {
      capture_.pop_back();
      return true;
    }
    const Ctx c = stack_.back();
    stack_.pop_back();
    if (c == Ctx::event) end_event();
    if (c == Ctx::device && !device_name_.empty()) devices[device_id_] = device_name_;
    return value_done();
  }
  bool start_array(std::size_t) override {
    if (capturing()) return capture_open(nlohmann::json::array());
    spoil_launch_dims();
    const Ctx parent = stack_.empty() ? Ctx::skip : stack_.back();
    note_time_not_a_number(parent);
    Ctx c = Ctx::skip;
    root_opened_ = true;
    if (stack_.empty() || (parent == Ctx::root && key_ == Key::trace_events)) {
      // {"traceEvents": [...]}, or the bare array Chrome also accepts.
      c = Ctx::events;
      saw_trace_events = true;
    } else if (parent == Ctx::root && key_ == Key::device_properties) {
      c = Ctx::device_properties;
    } else if (parent == Ctx::args && (key_ == Key::grid || key_ == Key::block)) {
      c = key_ == Key::grid ? Ctx::grid : Ctx::block;
      launch_dims_ = 0;
    } else if (parent == Ctx::args && key_ == Key::input_dims) {
      c = Ctx::input_dims;
      input_dims_used_ = 0;
    } else if (parent == Ctx::input_dims) {
      c = Ctx::input_dims_tensor;
      // The shapes' vectors are kept from event to event: most operators
      // of a profile with shapes record some, and the import reads millions.
      if (input_dims_used_ == input_dims_.size()) input_dims_.emplace_back();
      input_dims_[input_dims_used_++].clear();
    } else if (parent == Ctx::args && key_ == Key::input_type) {
      c = Ctx::input_types;
      input_types_.clear();
    } else if (parent == Ctx::events) {
      ++skipped[kNotAnEvent];
    }
    stack_.push_back(c);
    return true;
  }
  bool end_array() override {
    if (capturing()) {
      capture_.pop_back();
      return true;
    }
    const Ctx c = stack_.back();
    stack_.pop_back();
    // A launch's dimensions are three whole numbers, or no launch.
    if (c == Ctx::grid) has_grid_ = launch_dims_ == 3;
    if (c == Ctx::block) has_block_ = launch_dims_ == 3;
    return value_done();
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    // nlohmann's words without its tag ("[json.exception.parse_error.101]
    // parse error at line 1, column 2: "), and the bytes it last read as
    // UTF-8 (a binary file echoed raw bytes to the terminal).
    // nlohmann counts the end of the text as a byte read: an input cut
    // short failed "at byte 300001" of 300,000.
    if (root_opened_ && stack_.empty()) {
      more_after_document = position;
      error = "not valid JSON at byte " + std::to_string(position) +
              ": more follows the end of the document";
      return false;
    }
    error = position > text_bytes
                ? "not valid JSON: the text ends (at byte " + std::to_string(text_bytes) +
                      ") inside the document: " + valid_utf8(json_error_text(ex))
                : "not valid JSON at byte " + std::to_string(position) + ": " +
                      valid_utf8(json_error_text(ex));
    return false;
  }
  std::size_t text_bytes = SIZE_MAX;  // of the text parsed
  // Where text follows the document's end (the position nlohmann gives: 1 +
  // the index of the byte it read there); 0: none.
  std::size_t more_after_document = 0;

 private:
  static constexpr const char* kNotAnEvent = "traceEvents entries that are not objects";
  bool value_done() { return true; }
  // Anything but a whole number inside args.grid or args.block: no launch
  // (a string skipped left "grid": ["x", 128, 1, 1] as 128 x 1 x 1).
  void spoil_launch_dims() {
    if (top() == Ctx::grid || top() == Ctx::block) launch_dims_ = 4;
  }
  bool capturing() const { return !capture_.empty(); }
  // A value inside otherData: into the open object (under the last key) or array.
  nlohmann::json& capture_slot() {
    nlohmann::json& top = *capture_.back();
    if (top.is_array()) {
      top.push_back(nullptr);
      return top.back();
    }
    return top[capture_key_];
  }
  bool capture(nlohmann::json v) {
    capture_slot() = std::move(v);
    return true;
  }
  bool capture_open(nlohmann::json container) {
    nlohmann::json& slot = capture_slot();
    slot = std::move(container);
    capture_.push_back(&slot);  // its parent is open: it stays where it is
    return true;
  }
  void note_number(double v) {
    if (!has_number_) counter_value_ = v;
    has_number_ = true;
  }
  bool in_events() const { return !stack_.empty() && stack_.back() == Ctx::events; }
  // The innermost open container; a document that is a bare number or
  // string (a gzip of "1") has none.
  Ctx top() const { return stack_.empty() ? Ctx::skip : stack_.back(); }
  // A value with no key of its own: in the traceEvents array, not an event.
  bool scalar() {
    if (in_events()) ++skipped[kNotAnEvent];
    return value_done();
  }
  // null, true or an object as an event's ts or dur: the event is skipped and
  // counted, not placed at time 0 (or made zero-length).
  void note_time_not_a_number(Ctx parent) {
    if (parent == Ctx::event && (key_ == Key::ts || key_ == Key::dur)) time_not_a_number_ = true;
  }
  bool other_value() {
    if (!stack_.empty()) note_time_not_a_number(stack_.back());
    return scalar();
  }

  bool integer(std::int64_t v) {
    const Ctx c = top();
    if (c == Ctx::input_dims_tensor) {
      input_dims_[input_dims_used_ - 1].push_back(v);
      return value_done();
    }
    if (c == Ctx::grid || c == Ctx::block) {
      if (launch_dims_ < 3) (c == Ctx::grid ? launch_.grid : launch_.block)[launch_dims_] = v;
      ++launch_dims_;
      return value_done();
    }
    if (c == Ctx::event && (key_ == Key::ts || key_ == Key::dur) &&
        (v > kMaxMicros || v < -kMaxMicros)) {
      time_out_of_range_ = true;
    } else if (c == Ctx::event) {
      if (key_ == Key::ts) {
        ts_ = v * 1000;
        has_ts_ = true;
      } else if (key_ == Key::dur) {
        dur_ = v * 1000;
        has_dur_ = true;
      } else if (key_ == Key::pid) {
        pid_ = {false, v};
      } else if (key_ == Key::tid) {
        tid_ = {false, v};
      }
    } else if (c == Ctx::args) {
      note_number(static_cast<double>(v));
      if (key_ == Key::correlation)
        current_.correlation = v;
      else if (key_ == Key::bytes)
        current_.bytes = v;
      else if (key_ == Key::in_elements)
        current_.in_elements = v;
      else if (key_ == Key::out_elements)
        current_.out_elements = v;
      else if (key_ == Key::group_size)
        current_.group_size = static_cast<std::int32_t>(v);
      else if (key_ == Key::sort_index)
        arg_sort_index_ = v;
      else if (key_ == Key::own_step)
        current_.own_step = static_cast<std::int32_t>(std::clamp<std::int64_t>(v, -1, INT32_MAX));
      else if (key_ == Key::own_peer)
        current_.own_peer = static_cast<std::int32_t>(std::clamp<std::int64_t>(v, -1, INT32_MAX));
      else if (key_ == Key::own_group_size)
        current_.own_group_size =
            static_cast<std::int32_t>(std::clamp<std::int64_t>(v, 0, INT32_MAX));
      else if (key_ == Key::own_count)
        current_.own_count = std::max<std::int64_t>(v, 0);
      else if (key_ == Key::own_flops)
        current_.own_flops = static_cast<double>(v);
      else if (key_ == Key::total_allocated)
        memory_total_ = v;
      else if (key_ == Key::total_reserved)
        memory_reserved_ = v;
      else if (key_ == Key::registers_per_thread)
        launch_.registers_per_thread = v;
      else if (key_ == Key::shared_memory)
        launch_.shared_memory_bytes = v;
      else if (key_ == Key::dynamic_shared_memory)
        launch_.dynamic_shared_memory_bytes = v;
      else if (key_ == Key::device_type)
        memory_device_type_ = v;
      else if (key_ == Key::device_id)
        memory_device_id_ = v;
    } else if (c == Ctx::distributed && (key_ == Key::rank || key_ == Key::world_size)) {
      const bool is_rank = key_ == Key::rank;
      if (v < (is_rank ? 0 : 1) || v > INT32_MAX) {
        error = std::string("distributedInfo.") + (is_rank ? "rank" : "world_size") + " is " +
                std::to_string(v) + ": must be between " + (is_rank ? "0" : "1") + " and " +
                std::to_string(INT32_MAX);
        return false;
      }
      (is_rank ? rank : world_size) = static_cast<std::int32_t>(v);
    } else if (c == Ctx::root && key_ == Key::base_time_ns) {
      base_time_ns = v;
    } else if (c == Ctx::device && key_ == Key::id) {
      device_id_ = v;
    }
    return value_done();
  }

  std::uint32_t intern(const std::string& s) {
    auto [it, fresh] = string_ids.emplace(s, static_cast<std::uint32_t>(strings.size()));
    if (fresh) strings.push_back(s);
    return it->second;
  }

  void begin_event() {
    ph_ = '?';
    cat_ = Cat::unknown;
    unknown_cat_.clear();
    name_ = 0;
    pid_ = tid_ = {};
    ts_ = dur_ = 0;
    has_ts_ = has_dur_ = false;
    time_out_of_range_ = false;
    time_not_a_number_ = false;
    current_ = {};
    memory_total_.reset();
    memory_reserved_.reset();
    launch_ = {};
    has_grid_ = has_block_ = false;
    memory_device_type_ = memory_device_id_ = 0;
    arg_name_.clear();
    arg_labels_.clear();
    arg_sort_index_ = 0;
    has_number_ = false;
    counter_value_ = 0;
    first_number_key_.clear();
    input_dims_used_ = 0;
    input_types_.clear();
  }

  void end_event() {
    if (ph_ == 'M') {
      const std::string& what = strings[name_];
      if (what == "process_name") process_names[pid_] = arg_name_;
      if (what == "process_labels") process_labels[pid_] = arg_labels_;
      if (what == "thread_name") thread_names[{pid_, tid_}] = arg_name_;
      return;
    }
    if (ph_ == 'C' && has_ts_ && has_number_ && !time_out_of_range_ && !time_not_a_number_) {
      counters.push_back({.pid = pid_,
                          .name = name_,
                          .key = intern(first_number_key_),
                          .time = ts_,
                          .value = counter_value_});
      return;
    }
    // PyTorch's memory profile (profile_memory=True): each allocation and
    // free says what is allocated on its device after it, a counter as the
    // CUPTI tracer's "memory in use".
    if ((ph_ == 'i' || ph_ == 'I') && memory_total_ && has_ts_ && !time_out_of_range_ &&
        !time_not_a_number_ && strings[name_] == "[memory]") {
      const std::string device = memory_device_type_ == 1
                                     ? "GPU " + std::to_string(memory_device_id_)
                                     : std::string("CPU");
      memory_samples.push_back({.pid = pid_,
                                .name = intern(device + " memory allocated (bytes)"),
                                .time = ts_,
                                .value = static_cast<double>(*memory_total_)});
      // torch.cuda.memory_reserved: allocated plus the allocator's cached slack.
      if (memory_reserved_) {
        memory_samples.push_back({.pid = pid_,
                                  .name = intern(device + " memory reserved (bytes)"),
                                  .time = ts_,
                                  .value = static_cast<double>(*memory_reserved_)});
      }
      return;
    }
    if (ph_ != 'X' && ph_ != 'B' && ph_ != 'E') {
      ++skipped[ph_ == 's' || ph_ == 'f' || ph_ == 't' ? kFlowEvents
                : ph_ == 'i' || ph_ == 'I'             ? "instant events (ph i)"
                : ph_ == 'C'                           ? "counter events (ph C)"
                             : std::string("events with ph '") + ph_ + "'"];
      return;
    }
    if (time_out_of_range_ || (has_ts_ && std::abs(ts_ + std::max<std::int64_t>(dur_, 0)) >=
                                              kTraceTimeLimitNs)) {
      ++skipped["events with a ts or end past 2.3e15 us (73 years)"];
      return;
    }
    if (time_not_a_number_) {
      ++skipped["events with a ts or dur that is not a number"];
      return;
    }
    if (!has_ts_) {
      ++skipped["events without ts"];
      return;
    }
    if (has_grid_ && has_block_ && cat_ == Cat::kernel && (ph_ == 'X' || ph_ == 'B')) {
      if (auto launch = checked_launch(launch_)) {
        launches.push_back(*launch);
        current_.launch = static_cast<std::uint32_t>(launches.size());
      }
    }
    if (cat_ == Cat::cpu_op || cat_ == Cat::unknown) {
      if (const std::optional<GemmWork> gemm =
              gemm_work(strings[name_], {input_dims_.data(), input_dims_used_}, input_types_)) {
        current_.gemm_flops = gemm->flops;
        current_.gemm_bytes = gemm->bytes;
        current_.gemm_type = gemm->type;
      }
    }
    if (ph_ == 'B') return begin_duration();
    if (ph_ == 'E') return end_duration();
    if (dur_ < 0) {
      ++skipped["events with a negative dur"];
      return;
    }
    add_complete(current_, cat_, unknown_cat_, name_, ts_, ts_ + dur_, has_dur_);
  }

  // A complete event: from "ph": "X", or a "B" and its "E".
  void add_complete(Parsed p, Cat cat, const std::string& unknown_cat, std::uint32_t name,
                    std::int64_t start, std::int64_t end, bool has_dur) {
    if (cat == Cat::trace_span) {
      ++skipped["profiler spans (cat Trace)"];
      return;
    }
    if (cat == Cat::unknown && !unknown_cat.empty()) ++imported_unknown_[unknown_cat];
    // Imported all the same, and said: a hand-edited or cut trace.
    if (!has_dur) ++imported_without_["no dur: imported with zero length"];
    if (name == 0) ++imported_without_["no name"];
    if (cat == Cat::unknown && unknown_cat.empty())
      ++imported_without_["no cat: imported as CPU operations"];
    const LaneKey key{pid_, tid_, cat == Cat::gpu_user_annotation};
    auto [it, fresh] = lane_index.emplace(key, static_cast<std::uint32_t>(lane_keys.size()));
    if (fresh) lane_keys.push_back(key);
    p.lane = it->second;
    p.cat = cat;
    p.name = name;
    p.start = start;
    p.end = end;
    events.push_back(p);
  }

  // Chrome's duration events: a "B" opens a slice on its thread, the next
  // "E" there closes the innermost open one (they nest, in time order). The
  // slice keeps the "B" event's name, category and args.
  void begin_duration() {
    open_[{pid_, tid_}].push_back({current_, cat_, unknown_cat_, name_, ts_});
  }
  void end_duration() {
    auto it = open_.find({pid_, tid_});
    if (it == open_.end() || it->second.empty()) {
      ++skipped[kEndWithoutBegin];
      return;
    }
    const OpenSlice b = std::move(it->second.back());
    it->second.pop_back();
    if (ts_ < b.start) {
      ++skipped["duration events (ph B/E) that end before they begin"];
      return;
    }
    add_complete(b.parsed, b.cat, b.unknown_cat, b.name, b.start, ts_, true);
  }

 public:
  // After the last event: slices begun and never ended are counted, not
  // imported (a trace cut short, or written by a process that crashed).
  void count_unended() {
    std::int64_t n = 0;
    for (const auto& [thread, stack] : open_)
      n += static_cast<std::int64_t>(stack.size());
    if (n > 0) skipped["duration events begun (ph B) and never ended"] += n;
    open_.clear();
  }

 public:
  std::map<std::string, std::int64_t> imported_unknown_;
  std::map<std::string, std::int64_t> imported_without_;  // what they lacked -> events

 private:
  std::vector<Ctx> stack_;
  bool root_opened_ = false;  // the document's object or array has begun
  Key key_ = Key::other;
  char ph_ = '?';
  Cat cat_ = Cat::unknown;
  std::string unknown_cat_;
  std::uint32_t name_ = 0;
  Id pid_, tid_;
  std::int64_t ts_ = 0, dur_ = 0;
  // A ts or dur past the times a store holds (1e300, 8e15): skipped, not
  // wrapped; the event's end is checked too (a span of +-8e15 us hung the
  // app's timeline, its tick step wrapped to 1 ns).
  static constexpr std::int64_t kMaxMicros = kTraceTimeLimitNs / 1000 - 1;
  bool time_out_of_range_ = false;
  bool time_not_a_number_ = false;
  bool has_ts_ = false, has_dur_ = false;
  Parsed current_;
  std::string arg_name_, arg_labels_;
  std::int64_t arg_sort_index_ = 0;
  std::optional<std::int64_t> memory_total_;     // of a "[memory]" event
  std::optional<std::int64_t> memory_reserved_;  // the same event's, when it says
  KernelLaunch launch_;                          // of a kernel's args
  int launch_dims_ = 0;                          // numbers read in the open grid or block array
  std::vector<std::vector<std::int64_t>> input_dims_;  // args "Input Dims" (-1: not a whole number)
  std::size_t input_dims_used_ = 0;                    // of input_dims_, this event's
  std::vector<std::string> input_types_;               // args "Input type"
  bool has_grid_ = false, has_block_ = false;
  std::int64_t memory_device_type_ = 0, memory_device_id_ = 0;
  std::int64_t devices_listed_ = 0;  // deviceProperties entries opened so far
  std::int64_t device_id_ = 0;       // the open entry's index
  std::string device_name_;
  bool has_number_ = false;  // a counter's value: the first number in its args
  double counter_value_ = 0;
  std::string first_number_key_;  // its key (until it is read: the last key in args)
  struct OpenSlice {
    Parsed parsed;
    Cat cat = Cat::unknown;
    std::string unknown_cat;
    std::uint32_t name = 0;
    std::int64_t start = 0;
  };
  static constexpr const char* kEndWithoutBegin = "duration ends (ph E) with no begin (ph B)";
  std::map<std::pair<Id, Id>, std::vector<OpenSlice>> open_;  // by (pid, tid), innermost last
  std::vector<nlohmann::json*> capture_;  // the open objects and arrays inside otherData
  std::string capture_key_;
};

std::string id_text(const KinetoHandler& h, const Id& id) {
  return id.text ? h.strings[static_cast<std::size_t>(id.value)] : std::to_string(id.value);
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.pop_back();
  return s;
}

// nccl-tests' size of a collective from Kineto's element counts.
std::int64_t collective_bytes(Collective c, const Parsed& p, DataType t) {
  const int size = data_type_bytes(t);
  if (size == 0) return 0;
  switch (c) {
    case Collective::all_gather:
      return std::max<std::int64_t>(0, p.out_elements) * size;
    default:
      return std::max<std::int64_t>(0, p.in_elements) * size;
  }
}

Collective collective_from_pytorch(std::string_view name) {
  // PyTorch's record names: allreduce, _allgather_base, allgather_into_tensor_coalesced,
  // reduce_scatter_tensor, _reduce_scatter_base, broadcast, reduce, all_to_all(_single),
  // send, recv, barrier.
  auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  if (has("allreduce") || has("all_reduce")) return Collective::all_reduce;
  if (has("reduce_scatter") || has("reducescatter")) return Collective::reduce_scatter;
  if (has("allgather") || has("all_gather")) return Collective::all_gather;
  if (has("all_to_all") || has("alltoall")) return Collective::all_to_all;
  if (has("broadcast")) return Collective::broadcast;
  if (has("barrier")) return Collective::barrier;
  if (has("send")) return Collective::send;
  if (has("recv")) return Collective::recv;
  if (has("reduce")) return Collective::reduce;
  return Collective::none;
}

// An event's kind, category and details from Kineto's category, name and
// args (its lane and times are the caller's).
Event kineto_event(const KinetoHandler& h, const Parsed& p) {
  const std::string& name = h.strings[p.name];
  Event e;
  e.correlation = p.correlation;
  switch (p.cat) {
    case Cat::kernel: {
      e.kind = EventKind::kernel;
      e.category = Category::compute;
      if (auto nccl = parse_nccl_kernel_name(name)) {
        e.category = Category::communication;
        Collective c = nccl->collective;
        if (p.collective_name != 0) {
          const Collective from_args = collective_from_pytorch(h.strings[p.collective_name]);
          const bool args_point_to_point =
              from_args == Collective::send || from_args == Collective::recv;
          // NCCL runs all_to_all as grouped sends and receives: the SendRecv
          // kernel of an all_to_all is that collective (its bus bandwidth too).
          if (from_args != Collective::none && !(nccl->point_to_point && args_point_to_point))
            c = from_args;
        }
        e.kind = is_point_to_point(c) ? EventKind::p2p : EventKind::collective;
        const DataType t =
            p.dtype != 0 ? importing::data_type_from_any(h.strings[p.dtype]) : nccl->dtype;
        e.collective = c;
        e.dtype = t;
        e.count =
            std::max<std::int64_t>(0, c == Collective::all_gather ? p.out_elements : p.in_elements);
        e.bytes = collective_bytes(c, p, t);
        e.group_size = p.group_size;
      }
      break;
    }
    case Cat::gpu_memcpy:
      e.kind = EventKind::memcpy;
      e.category = Category::memory;
      e.bytes = p.bytes;
      break;
    case Cat::gpu_memset:
      e.kind = EventKind::memset;
      e.category = Category::memory;
      e.bytes = p.bytes;
      break;
    case Cat::gpu_user_annotation:
    case Cat::user_annotation:
      e.kind = EventKind::annotation;
      e.category = Category::other;
      // PyTorch's profiler's own steps (without them, steps_from_annotations).
      if (p.cat == Cat::user_annotation && name.rfind("ProfilerStep#", 0) == 0) {
        if (const auto step = step_of_range_name(name)) {
          e.kind = EventKind::step;
          e.step = *step;
        }
      }
      break;
    case Cat::cuda_runtime:
    case Cat::cuda_driver:
      e.kind = EventKind::api_call;
      e.category = Category::other;
      if (importing::is_synchronizing_api(name)) {
        e.kind = EventKind::sync;
        e.category = Category::synchronization;
      }
      break;
    case Cat::overhead:
      e.kind = EventKind::overhead;
      e.category = Category::other;
      break;
    case Cat::cuda_sync:  // "Stream Sync", "Event Sync", "Context Sync" on the GPU's row
      e.kind = EventKind::sync;
      e.category = Category::synchronization;
      break;
    default:
      e.kind = EventKind::cpu_op;
      e.category = Category::other;
      e.flops = p.gemm_flops;
      e.bytes = p.gemm_bytes;
      e.dtype = p.gemm_type;
      break;
  }
  return e;
}

// A trace taken without the profiler's schedule has no ProfilerStep#N: its
// steps are then its record_function ranges named as a step ("step N",
// "iteration N", ...), by the rule every source follows (core/step_names.h).
// A trace with the profiler's own steps keeps those alone. Each event's step,
// -1 where it is none.
std::vector<std::int32_t> steps_from_annotations(const KinetoHandler& h) {
  std::vector<std::int32_t> step(h.events.size(), -1);
  std::vector<std::size_t> ranges;
  for (std::size_t i = 0; i < h.events.size(); ++i) {
    if (h.events[i].cat != Cat::user_annotation) continue;
    if (h.strings[h.events[i].name].starts_with("ProfilerStep#")) return step;
    ranges.push_back(i);
  }
  // In the order they start; of two that start together, the outer first.
  std::stable_sort(ranges.begin(), ranges.end(), [&](std::size_t a, std::size_t b) {
    const Parsed& x = h.events[a];
    const Parsed& y = h.events[b];
    return x.start != y.start ? x.start < y.start : x.end > y.end;
  });
  StepRanges rule;
  for (const std::size_t i : ranges) {
    const Parsed& p = h.events[i];
    if (const auto s = rule.started(p.lane, "", h.strings[p.name], p.start)) {
      step[i] = *s;
      rule.ended(p.end);
    }
  }
  return step;
}

// This product's own export writes each event's stored fields in its args
// (trace_export.cpp): they replace what Kineto's category and args give.
void apply_own_fields(const KinetoHandler& h, const Parsed& p, Event& e) {
  if (p.own_kind >= 0) e.kind = static_cast<EventKind>(p.own_kind);
  if (p.own_category >= 0) e.category = static_cast<Category>(p.own_category);
  e.step = p.own_step;
  e.bytes = p.bytes;
  e.flops = p.own_flops;
  e.collective =
      p.own_collective >= 0 ? static_cast<Collective>(p.own_collective) : Collective::none;
  e.dtype = p.dtype != 0 ? importing::data_type_from_any(h.strings[p.dtype]) : DataType::none;
  e.count = std::max<std::int64_t>(p.own_count, 0);
  e.peer = p.own_peer;
  e.group_size = std::max(p.own_group_size, 0);
}

// The handler's names interned in the writer once each, when first used.
class NamesInterned {
 public:
  NamesInterned(const std::vector<std::string>& strings, TraceWriter& writer)
      : strings_(strings), writer_(writer), ids_(strings.size()), done_(strings.size(), false) {}
  StringId operator()(std::uint32_t id) {
    if (!done_[id]) {
      ids_[id] = writer_.intern(strings_[id]);
      done_[id] = true;
    }
    return ids_[id];
  }

 private:
  const std::vector<std::string>& strings_;
  TraceWriter& writer_;
  std::vector<StringId> ids_;
  std::vector<bool> done_;
};

// This product's own export (otherData's producer): each pid is a rank, each
// tid a lane whose kind and name otherData lists with the ranks' rows, the
// store's meta and its steps; events and counters keep their stored fields.
// Times are the store's (base + ts), already on one clock.
// The launch a parsed kernel's args gave, if any.
std::optional<KernelLaunch> launch_of(const KinetoHandler& h, const Parsed& p) {
  if (p.launch == 0) return std::nullopt;
  return h.launches[p.launch - 1];
}

Result<ImportReport> import_own_export(const KinetoHandler& h, const std::string& file,
                                       const std::string& output, const ImportOptions& options,
                                       ImportReport report) {
  using nlohmann::json;
  const json& other = h.other_data;
  const json empty_object = json::object(), empty_array = json::array();
  auto member = [&](const json& object, const char* key, const json& fallback) -> const json& {
    auto it = object.find(key);
    return it != object.end() && it->type() == fallback.type() ? *it : fallback;
  };
  const json& meta = member(other, "meta", empty_object);
  auto text = [&](const char* key) {
    auto it = meta.find(key);
    if (it != meta.end() && it->is_string()) return it->get<std::string>();
    it = other.find(key);  // exports before the meta rows: title and source only
    return it != other.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  RunInfo run;
  run.title = !options.title.empty() ? options.title : text("title");
  if (run.title.empty()) run.title = std::filesystem::path(file).filename().string();
  run.source = text("source");
  run.start_utc_ns = parse_count<std::int64_t>(text("start_utc_ns")).value_or(0);
  run.clock = text("clock");
  run.host = text("host");
  run.command_line = text("command_line");
  run.plan_json = text("plan_json");
  run.tool_versions_json = text("tool_versions_json");

  // The critical path's process (an export's "critical_path_pid") is derived
  // from the ranks' events, not recorded: left out.
  std::optional<std::int64_t> path_pid;
  if (auto it = other.find("critical_path_pid"); it != other.end() && it->is_number_integer())
    path_pid = it->get<std::int64_t>();
  auto derived = [&](const Id& pid) { return path_pid && !pid.text && pid.value == *path_pid; };
  // A pid must be a rank: a file of another producer's pids is refused, not merged.
  auto rank_of = [&](const Id& pid) -> std::optional<std::int32_t> {
    if (pid.text || pid.value < 0 || pid.value > INT32_MAX) return std::nullopt;
    return static_cast<std::int32_t>(pid.value);
  };
  auto not_a_rank = [&](const Id& pid) {
    return Error{file + ": a ClusterScope export whose pid " + id_text(h, pid) +
                 " is not a rank (each process of the export is one)"};
  };
  // otherData's rows, read field by field before anything is written: a
  // wrong type or a negative rank is named where it sits in the file (it
  // threw an internal error, or was written and then refused as damage of
  // the new store).
  Diagnostics diag;
  auto rows = [&](const char* key, auto&& read) {
    const json& list = member(other, key, empty_array);
    for (std::size_t i = 0; i < list.size(); ++i) {
      ObjectReader r(list[i], std::string("/otherData/") + key + "/" + std::to_string(i), diag);
      if (r.is_object()) read(r);
    }
  };
  std::map<std::int32_t, RankInfo> ranks;
  rows("ranks", [&](ObjectReader& r) {
    RankInfo info;
    int rank = 0;
    r.integer("rank", rank, Range::non_negative());
    info.rank = rank;
    r.text("host", info.host);
    r.text("device", info.device);
    r.integer64("pid", info.pid);
    r.integer64("clock_offset_ns", info.clock_offset_ns);
    r.boolean("clock_offset_measured", info.clock_offset_measured);
    ranks[info.rank] = info;
  });
  struct LaneRow {
    int rank = 0;
    std::string kind, name;
    std::int64_t tid = -1;
    int sort_index = 0;
  };
  std::vector<LaneRow> lane_rows;
  rows("lanes", [&](ObjectReader& r) {
    LaneRow l;
    r.integer("rank", l.rank, Range::non_negative());
    r.text("kind", l.kind);
    r.integer64("tid", l.tid);
    r.text("name", l.name);
    r.integer("sort_index", l.sort_index);
    lane_rows.push_back(std::move(l));
  });
  std::vector<StepMetrics> steps;
  rows("steps", [&](ObjectReader& r) {
    StepMetrics m;
    int rank = 0, step = 0;
    r.integer("rank", rank, Range::non_negative());
    r.integer("step", step, Range::non_negative());
    m.rank = rank;
    m.step = step;
    r.integer64("start_ns", m.start_ns);
    r.integer64("end_ns", m.end_ns);
    if (m.end_ns < m.start_ns) {
      diag.add(r.pointer("end_ns"), "must not be before start_ns (got " + std::to_string(m.end_ns) +
                                        ", start_ns " + std::to_string(m.start_ns) + ")");
    }
    r.number("loss", m.loss);
    r.number("tokens", m.tokens, Range::non_negative());
    r.number("loss_scale", m.loss_scale, Range::non_negative());
    steps.push_back(m);
  });
  if (!diag.empty()) return diag.to_error(file);
  for (const LaneKey& k : h.lane_keys) {
    if (derived(k.pid)) continue;
    auto rank = rank_of(k.pid);
    if (!rank) return not_a_rank(k.pid);
    ranks.try_emplace(*rank, RankInfo{*rank, "", "", 0, 0, false});
  }
  for (const ParsedCounter& c : h.counters) {
    auto rank = rank_of(c.pid);
    if (!rank) return not_a_rank(c.pid);
    ranks.try_emplace(*rank, RankInfo{*rank, "", "", 0, 0, false});
  }

  auto created = TraceWriter::create(output, run, options.writer);
  if (!created) return created.error();
  TraceWriter& w = **created;
  // The rows that describe one file, or that RunInfo wrote, are the new store's own.
  for (const auto& [key, value] : meta.items()) {
    if (value.is_string() && !store::is_own_meta_row(key)) w.set_meta(key, value.get<std::string>());
  }
  importing::add_caller_meta(w, options);
  for (const auto& [rank, info] : ranks)
    w.add_rank(info);

  // Lanes as the store had them (tid = its lane id), in its order.
  std::map<std::pair<std::int32_t, std::int64_t>, LaneId> by_tid;
  for (const LaneRow& l : lane_rows) {
    const LaneKind kind = lane_kind_from_string(l.kind).value_or(LaneKind::cpu_thread);
    by_tid[{l.rank, l.tid}] = w.add_lane(l.rank, kind, l.name, l.sort_index);
  }
  // Threads otherData does not list (an export before it listed them): by
  // their thread_name, on the GPU where GPU work ran.
  std::vector<LaneId> lanes(h.lane_keys.size());
  std::vector<bool> gpu_lane(h.lane_keys.size(), false);
  for (const Parsed& p : h.events)
    gpu_lane[p.lane] = gpu_lane[p.lane] || on_gpu(p.cat);
  for (std::size_t i = 0; i < h.lane_keys.size(); ++i) {
    const LaneKey& k = h.lane_keys[i];
    if (derived(k.pid)) continue;
    const std::int32_t rank = *rank_of(k.pid);
    auto known = by_tid.find({rank, k.tid.value});
    if (known == by_tid.end() || k.tid.text) {
      auto tn = h.thread_names.find({k.pid, k.tid});
      const std::string name =
          tn != h.thread_names.end() ? trim(tn->second) : "thread " + id_text(h, k.tid);
      known =
          by_tid
              .emplace(std::pair{rank, k.tid.value},
                       w.add_lane(rank, gpu_lane[i] ? LaneKind::gpu_stream : LaneKind::cpu_thread,
                                  name, static_cast<std::int32_t>(1000 + i)))
              .first;
    }
    lanes[i] = known->second;
  }

  NamesInterned name_of(h.strings, w);
  for (const Parsed& p : h.events) {
    if (derived(h.lane_keys[p.lane].pid)) continue;
    Event e = kineto_event(h, p);
    apply_own_fields(h, p, e);
    e.lane = lanes[p.lane];
    e.start_ns = p.start;
    e.end_ns = p.end;
    e.name = name_of(p.own_name != 0 ? p.own_name : p.name);
    w.add_with_launch(e, launch_of(h, p));
    ++report.events;
  }
  // Each counter by the stored name its export split (chrome_counter).
  std::map<std::pair<std::uint32_t, std::uint32_t>, StringId> counter_names;
  for (const ParsedCounter& c : h.counters) {
    auto [it, fresh] = counter_names.try_emplace({c.name, c.key});
    if (fresh) it->second = w.intern(stored_counter_name(h.strings[c.name], h.strings[c.key]));
    w.add(CounterSample{*rank_of(c.pid), it->second, c.time, c.value});
  }
  for (const StepMetrics& m : steps)
    w.add(m);
  if (Status s = w.close("complete"); !s) return s.error();
  // The flow arrows repeat each event's args.correlation, which is kept.
  report.skipped.erase(kFlowEvents);
  report.ranks = static_cast<std::int32_t>(ranks.size());
  report.on_one_clock = true;
  report.format = "clusterscope export";  // Kineto's JSON, read as this product wrote it
  return report;
}

// Chrome's JSON Array Format may end without its "]" (a process that was
// writing it stopped), often after a comma: closes such an array in place.
// Returns whether it did. The buffer has a byte of room past `size`.
bool close_open_array(Text& text) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  std::size_t first = 0;
  while (first < text.size && space(text.data[first]))
    ++first;
  if (first == text.size || text.data[first] != '[') return false;
  std::size_t end = text.size;
  while (end > first && space(text.data[end - 1]))
    --end;
  if (text.data[end - 1] == ']' && end - 1 > first) return false;
  if (text.data[end - 1] == ',') --end;
  text.data[end] = ']';
  text.size = end + 1;
  return true;
}

// Kineto before PyTorch 1.10 could write a non-finite argument bare
// ("est. achieved occupancy %": inf), which is no JSON. Makes each such
// value outside strings (inf, nan, Infinity, NaN, with or without a minus)
// null, in a copy of the text with a byte of room past its end; returns how
// many, 0 when there are none (the text then stays as it was).
std::size_t null_bare_non_finite(Text& text) {
  static constexpr std::string_view kTokens[] = {"-Infinity", "Infinity", "-inf", "inf",
                                                 "-nan",      "nan",      "-NaN", "NaN"};
  const std::string_view in(text.data.get(), text.size);
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  // The token at `i`, where a value may start, that a delimiter ends.
  const auto token_at = [&](std::size_t i) -> std::string_view {
    for (std::string_view t : kTokens) {
      if (in.substr(i, t.size()) != t) continue;
      const std::size_t end = i + t.size();
      if (end == in.size() || space(in[end]) || in[end] == ',' || in[end] == '}' || in[end] == ']')
        return t;
    }
    return {};
  };
  std::vector<std::pair<std::size_t, std::size_t>> found;  // (offset, length)
  bool in_string = false;
  char before = 0;  // the last character outside strings that was not a space
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        before = c;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (before == ':' || before == ',' || before == '[') {
      if (const std::string_view t = token_at(i); !t.empty()) {
        found.emplace_back(i, t.size());
        i += t.size() - 1;
        before = 'l';  // a value ended
        continue;
      }
    }
    if (!space(c)) before = c;
  }
  if (found.empty()) return 0;
  std::size_t size = in.size();
  for (const auto& [at, length] : found)
    size = size - length + 4;
  Text out;
  out.capacity = size + 1;
  out.data = std::make_unique<char[]>(out.capacity);
  std::size_t from = 0;
  for (const auto& [at, length] : found) {
    std::memcpy(out.data.get() + out.size, in.data() + from, at - from);
    out.size += at - from;
    std::memcpy(out.data.get() + out.size, "null", 4);
    out.size += 4;
    from = at + length;
  }
  std::memcpy(out.data.get() + out.size, in.data() + from, in.size() - from);
  out.size += in.size() - from;
  text = std::move(out);
  return found.size();
}

Result<ImportReport> import_one_kineto(const std::string& file, const std::string& output,
                                       int first_rank, const ImportOptions& options) {
  auto text = read_possibly_gzipped(
      file, options.max_text_bytes > 0 ? options.max_text_bytes : default_max_text_bytes());
  if (!text) return text.error();
  const std::size_t bytes = text->size;
  const bool closed_array = close_open_array(*text);
  KinetoHandler h;
  const char* begin = nullptr;
  auto parse = [&] {
    h = KinetoHandler{};
    h.text_bytes = text->size;
    h.events.reserve(text->size / 350);  // Kineto writes 300-600 bytes per event
    begin = text->data.get();
    return nlohmann::json::sax_parse(begin, begin + text->size, &h);
  };
  bool ok = parse();
  // Read again with bare non-finite values made null (looked for only when
  // the text did not read: the search copies it).
  std::size_t nulled = 0;
  if (!ok && (nulled = null_bare_non_finite(*text)) > 0) ok = parse();
  // A document after the document: JSON lines, as `nsys export --type json`
  // writes (it read as "syntax error ... expected end of input").
  if (const std::size_t at = h.more_after_document;
      !ok && at > 0 && at <= text->size && (begin[at - 1] == '{' || begin[at - 1] == '[')) {
    h.error = "a second JSON document begins at byte " + std::to_string(at) +
              ": a trace is one object or array, and this file holds several (JSON lines, as "
              "an Nsight Systems JSON export is: import its SQLite export instead, `nsys export "
              "--type sqlite`)";
  }
  if (!ok && nulled > 0 && !h.error.empty()) {
    h.error += " (byte offsets in the text with its " + std::to_string(nulled) +
               " bare inf or nan values read as null)";
  }
  text->data.reset();  // the events are all in `h` now
  if (!ok) return Error{file + ": " + (h.error.empty() ? "cannot parse" : h.error)};
  if (!h.saw_trace_events)
    return Error{file + " is not a PyTorch profiler or Chrome trace: it has no traceEvents array"};
  h.count_unended();

  ImportReport report;
  report.format = "kineto";
  report.bytes_read = static_cast<std::int64_t>(bytes);
  report.skipped = h.skipped;
  if (nulled > 0)
    report.warnings.push_back(
        std::to_string(nulled) + (nulled == 1 ? " value" : " values") +
        " written bare as inf or nan (not JSON; older PyTorch profilers wrote some "
        "arguments so) read as null");
  if (closed_array)
    report.warnings.push_back(
        "the array of events has no closing ']' (Chrome's format allows it): read to the end of "
        "the file");
  const bool own_export =
      h.other_data.is_object() && h.other_data.value(kExportProducerKey, "") == kExportProducer;
  // An export's critical path is left out of the import, not imported.
  const bool critical_path = own_export && h.other_data.contains("critical_path_pid");
  for (const auto& [cat, n] : h.imported_unknown_) {
    if (critical_path && cat == "critical_path") continue;
    report.warnings.push_back(std::to_string(n) + " events of category '" + cat +
                              "' imported as CPU operations");
  }
  for (const auto& [lack, n] : h.imported_without_)
    report.warnings.push_back(std::to_string(n) + (n == 1 ? " event with " : " events with ") +
                              lack);
  const std::int32_t rank = h.rank.value_or(first_rank);
  if (!h.rank && !h.rank_text.empty()) {
    report.warnings.push_back("distributedInfo.rank is \"" + h.rank_text +
                              "\", not a number: rank " + std::to_string(rank) +
                              " from the file order");
  } else if (!h.rank && !own_export) {
    report.warnings.push_back("no distributedInfo.rank: rank " + std::to_string(rank) +
                              " from the file order");
  }
  if (!h.world_size && !h.world_size_text.empty())
    report.warnings.push_back("distributedInfo.world_size is \"" + h.world_size_text +
                              "\", not a number: the world size is left out");
  // A rank past the world it names: one of the two is wrong, and a merge
  // would take the world size as the run's.
  if (h.world_size && rank >= *h.world_size) {
    report.warnings.push_back("distributedInfo says rank " + std::to_string(rank) +
                              " of a world of " + std::to_string(*h.world_size) +
                              ": the world size is left out");
    h.world_size.reset();
  }

  // PyTorch 2 writes ts relative to baseTimeNanoseconds: the host time is
  // base + ts, as HTA reads it. Without it, each rank's trace would start near
  // its own zero and ranks whose profilers began in different seconds would
  // not line up. Older traces have no base: ts is the host clock already.
  bool base_applied = false;
  if (h.base_time_ns) {
    // A base may be negative: this product's export of a store whose times
    // begin before zero (a merge shifted a rank back) writes one.
    const std::int64_t base = *h.base_time_ns;
    std::int64_t first_start = 0, last = 0;
    for (const Parsed& p : h.events) {
      first_start = std::min(first_start, p.start);
      last = std::max(last, p.end);
    }
    if (base <= -kTraceTimeLimitNs - first_start || base >= kTraceTimeLimitNs - last) {
      report.warnings.push_back("baseTimeNanoseconds " + std::to_string(base) +
                                " is out of range: times imported as recorded, without it");
    } else {
      for (Parsed& p : h.events) {
        p.start += base;
        p.end += base;
      }
      for (ParsedCounter& c : h.counters)
        c.time += base;
      for (ParsedCounter& c : h.memory_samples)
        c.time += base;
      base_applied = true;
    }
  }

  // As an Nsight export with nothing in it: an empty store helps no one.
  // Events left out say why, or the file seemed to hold none.
  if (h.events.empty()) {
    std::string left_out;
    for (const auto& [what, n] : h.skipped) {
      left_out +=
          (left_out.empty() ? "; left out: " : ", ") + what + " (" + std::to_string(n) + ")";
    }
    return Error{file +
                 ": no events to import (its traceEvents hold no complete events, ph X or "
                 "a B/E pair, that can be read" +
                 (h.counters.empty() ? std::string() : ", only counters") + left_out + ")"};
  }
  if (own_export) return import_own_export(h, file, output, options, std::move(report));
  if (!h.counters.empty())
    report.skipped["counter events (ph C)"] += static_cast<std::int64_t>(h.counters.size());

  std::int64_t first = INT64_MAX;
  for (const Parsed& p : h.events)
    first = std::min(first, p.start);
  RunInfo run;
  run.title =
      options.title.empty() ? std::filesystem::path(file).filename().string() : options.title;
  run.source = "kineto-import";
  // Kineto's host clock is the system clock on Linux: microseconds since the
  // epoch. A trace on another clock (small values) gets no wall-clock start.
  if (first != INT64_MAX && first > 946'684'800'000'000'000) run.start_utc_ns = first;
  run.clock = base_applied ? "Kineto timestamps (baseTimeNanoseconds + ts)"
                           : "Kineto timestamps (microseconds, as recorded)";
  run.command_line = file;
  auto created = TraceWriter::create(output, run, options.writer);
  if (!created) return created.error();
  TraceWriter& w = **created;
  importing::add_caller_meta(w, options);

  // Ranks: one per file. Its device is the GPU the kernels ran on; a
  // profile of CPU activities only ran on none.
  std::string device = "CPU";
  std::int64_t pid = 0;
  for (const Parsed& p : h.events) {
    if (on_gpu(p.cat)) {
      const LaneKey& k = h.lane_keys[p.lane];
      const auto gpu = k.pid.value;
      const auto named = h.devices.find(gpu);
      device = named != h.devices.end() ? named->second + " (GPU " + std::to_string(gpu) + ")"
                                        : "GPU " + std::to_string(gpu);
      break;
    }
  }
  for (const Parsed& p : h.events) {
    const LaneKey& k = h.lane_keys[p.lane];
    if (!on_gpu(p.cat) && !k.pid.text) {
      pid = k.pid.value;
      break;
    }
  }
  w.add_rank({rank, "", device, pid, 0, false});
  if (h.world_size) w.set_meta("world_size", std::to_string(*h.world_size));
  if (!h.backend.empty()) w.set_meta("distributed_backend", h.backend);
  if (!h.nccl_version.empty()) w.set_meta("nccl_version", h.nccl_version);
  if (h.base_time_ns) w.set_meta("kineto_base_time_ns", std::to_string(*h.base_time_ns));

  // Lanes: which kind each (pid, tid) is, from what runs there.
  std::vector<bool> gpu_lane(h.lane_keys.size(), false);
  for (const Parsed& p : h.events)
    gpu_lane[p.lane] = gpu_lane[p.lane] || on_gpu(p.cat);
  std::vector<LaneId> lanes(h.lane_keys.size());
  int cpu_order = 0;
  for (std::size_t i = 0; i < h.lane_keys.size(); ++i) {
    const LaneKey& k = h.lane_keys[i];
    std::string name;
    LaneKind kind;
    std::int32_t sort;
    if (gpu_lane[i]) {
      const std::string gpu = id_text(h, k.pid);
      // PyTorch 1.8's Kineto wrote the tid as "stream 7" (it read as "GPU 0
      // stream stream 7").
      auto tn = h.thread_names.find({k.pid, k.tid});
      const std::string tid = id_text(h, k.tid);
      const std::string stream = tn != h.thread_names.end()   ? trim(tn->second)
                                 : tid.starts_with("stream ") ? tid
                                                              : "stream " + tid;
      kind = k.gpu_annotation ? LaneKind::annotation : LaneKind::gpu_stream;
      // Exports tell device-side annotations by this name (gpu_side_annotations).
      name = "GPU " + gpu + " " + stream + (k.gpu_annotation ? " annotations" : "");
      sort = 1000 +
             static_cast<std::int32_t>(std::clamp<std::int64_t>(k.pid.value, 0, 63)) * 10000 +
             static_cast<std::int32_t>(std::clamp<std::int64_t>(k.tid.value, 0, 9000)) +
             (k.gpu_annotation ? 1 : 0);
    } else {
      auto tn = h.thread_names.find({k.pid, k.tid});
      name = tn != h.thread_names.end() ? trim(tn->second) : "thread " + id_text(h, k.tid);
      kind = LaneKind::cpu_thread;
      sort = cpu_order++;
    }
    lanes[i] = w.add_lane(rank, kind, name, sort);
  }
  const LaneId steps = w.add_lane(rank, LaneKind::steps, "steps", -1);

  NamesInterned name_of(h.strings, w);
  const std::vector<std::int32_t> annotated_steps = steps_from_annotations(h);

  for (std::size_t i = 0; i < h.events.size(); ++i) {
    const Parsed& p = h.events[i];
    Event e = kineto_event(h, p);
    if (annotated_steps[i] >= 0) {
      e.kind = EventKind::step;
      e.step = annotated_steps[i];
    }
    e.lane = e.kind == EventKind::step ? steps : lanes[p.lane];
    e.start_ns = p.start;
    e.end_ns = p.end;
    e.name = name_of(p.name);
    w.add_with_launch(e, launch_of(h, p));
    ++report.events;
  }
  for (const ParsedCounter& c : h.memory_samples)
    w.add(CounterSample{rank, name_of(c.name), c.time, c.value});
  if (Status s = w.close("complete"); !s) return s.error();
  report.ranks = 1;
  return report;
}

}  // namespace

Result<ImportReport> import_kineto(const std::vector<std::string>& files, const std::string& output,
                                   const ImportOptions& options) {
  return importing::import_files(files, output, options, import_one_kineto);
}

}  // namespace cs::trace
