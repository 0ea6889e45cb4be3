#include "profiler/replay_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

namespace cs::profiler {

namespace {

constexpr char kMagic[8] = {'C', 'S', 'C', 'U', 'P', 'T', 'I', '\0'};
constexpr std::uint32_t kFormatVersion = 1;
// A recording is read whole; refuse sizes no real capture reaches before
// allocating them.
constexpr std::uint64_t kMaxSegmentBytes = 1ull << 32;
constexpr std::uint64_t kMaxCount = 1ull << 28;

std::uint64_t padded(std::uint64_t size) {
  return (size + 7) / 8 * 8;
}

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

class Reader {
 public:
  Reader(std::ifstream& in, const std::string& path) : in_(in), path_(path) {}

  template <class T>
  bool get(T& value, const char* what) {
    if (!in_.read(reinterpret_cast<char*>(&value), sizeof(T))) return fail(what);
    offset_ += sizeof(T);
    return true;
  }
  bool bytes(std::vector<std::uint8_t>& out, std::uint64_t size, const char* what) {
    out.resize(size);
    if (size > 0 &&
        !in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size))) {
      return fail(what);
    }
    offset_ += size;
    const std::uint64_t pad = padded(size) - size;
    char skip[8];
    if (pad > 0 && !in_.read(skip, static_cast<std::streamsize>(pad))) return fail(what);
    offset_ += pad;
    return true;
  }
  bool fail(const std::string& what) {
    if (message_.empty()) {
      message_ = path_ + ": " + what + " at byte " + std::to_string(offset_);
    }
    return false;
  }
  std::uint64_t offset() const { return offset_; }
  const std::string& message() const { return message_; }

 private:
  std::ifstream& in_;
  const std::string& path_;
  std::uint64_t offset_ = 0;
  std::string message_;
};

}  // namespace

Status write_replay(const std::string& path, const ReplayRecording& recording) {
  std::string out;
  out.append(kMagic, sizeof kMagic);
  put<std::uint32_t>(out, kFormatVersion);
  put<std::uint32_t>(out, recording.cupti_version);
  put<std::uint64_t>(out, recording.segments.size());
  for (const auto& segment : recording.segments) {
    put<std::uint32_t>(out, static_cast<std::uint32_t>(segment.kind));
    put<std::uint32_t>(out, 0);
    put<std::uint64_t>(out, segment.dropped_after);
    put<std::uint64_t>(out, segment.bytes.size());
    out.append(reinterpret_cast<const char*>(segment.bytes.data()), segment.bytes.size());
    out.append(padded(segment.bytes.size()) - segment.bytes.size(), '\0');
  }
  put<std::uint64_t>(out, recording.fixups.size());
  for (const auto& f : recording.fixups) {
    put<std::uint32_t>(out, f.segment);
    put<std::uint32_t>(out, f.target);
    put<std::uint64_t>(out, f.offset);
    put<std::uint64_t>(out, f.target_offset);
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return Error{path + ": cannot create the file"};
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.close();
  if (!file) return Error{path + ": cannot write the file (disk full?)"};
  return {};
}

Result<ReplayRecording> read_replay(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open file"};
  Reader r(in, path);
  char magic[8] = {};
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
    return Error{path + ": not a CUPTI activity recording (no CSCUPTI header)"};
  }
  std::uint32_t version = 0;
  ReplayRecording rec;
  std::uint64_t count = 0;
  if (!r.get(version, "truncated header")) return Error{r.message()};
  if (version != kFormatVersion) {
    return Error{path + ": recording format version " + std::to_string(version) +
                 " is not the supported version " + std::to_string(kFormatVersion)};
  }
  if (!r.get(rec.cupti_version, "truncated header") || !r.get(count, "truncated header")) {
    return Error{r.message()};
  }
  // Nothing is allocated for what a header claims before the file shows it
  // holds it: 24 bytes claiming 2^28 segments resized a vector to 10 GiB,
  // a segment header claiming 4 GiB allocated it. Segments and fixups are
  // added as they are read (each read takes 24 bytes of the file or fails),
  // and a segment longer than the bytes left is a file cut short. A file
  // whose size is not known (a pipe) is held to the limits alone.
  std::error_code ec;
  const std::uint64_t file_bytes = std::filesystem::file_size(path, ec);
  auto left = [&] {
    const std::streamoff at = in.tellg();
    if (ec || at < 0) return std::numeric_limits<std::uint64_t>::max();
    return file_bytes - std::min<std::uint64_t>(file_bytes, static_cast<std::uint64_t>(at));
  };
  if (count > kMaxCount)
    return Error{path + ": implausible segment count " + std::to_string(count)};
  for (std::uint64_t i = 0; i < count; ++i) {
    ReplayRecording::Segment segment;
    std::uint32_t kind = 0;
    std::uint32_t reserved = 0;
    std::uint64_t size = 0;
    if (!r.get(kind, "truncated segment header") || !r.get(reserved, "truncated segment header") ||
        !r.get(segment.dropped_after, "truncated segment header") ||
        !r.get(size, "truncated segment header")) {
      return Error{r.message()};
    }
    if (kind != 1 && kind != 2) {
      r.fail("segment " + std::to_string(i) + " has unknown kind " + std::to_string(kind));
      return Error{r.message()};
    }
    if (size > kMaxSegmentBytes) {
      r.fail("segment " + std::to_string(i) + " claims " + std::to_string(size) + " bytes");
      return Error{r.message()};
    }
    if (size > left()) {
      r.fail("truncated segment");
      return Error{r.message()};
    }
    segment.kind = static_cast<ReplayRecording::SegmentKind>(kind);
    if (!r.bytes(segment.bytes, size, "truncated segment")) return Error{r.message()};
    rec.segments.push_back(std::move(segment));
  }
  std::uint64_t fixups = 0;
  if (!r.get(fixups, "truncated fixup table")) return Error{r.message()};
  if (fixups > kMaxCount)
    return Error{path + ": implausible fixup count " + std::to_string(fixups)};
  for (std::uint64_t i = 0; i < fixups; ++i) {
    ReplayRecording::Fixup f;
    if (!r.get(f.segment, "truncated fixup") || !r.get(f.target, "truncated fixup") ||
        !r.get(f.offset, "truncated fixup") || !r.get(f.target_offset, "truncated fixup")) {
      return Error{r.message()};
    }
    const bool inside = f.segment < count && f.target < count &&
                        f.offset + sizeof(void*) <= rec.segments[f.segment].bytes.size() &&
                        f.offset + sizeof(void*) > f.offset &&
                        f.target_offset < rec.segments[f.target].bytes.size() &&
                        rec.segments[f.target].kind == ReplayRecording::SegmentKind::blob;
    if (!inside) {
      return Error{path + ": fixup " + std::to_string(i) +
                   " points outside the recording (segment " + std::to_string(f.segment) +
                   " offset " + std::to_string(f.offset) + " -> segment " +
                   std::to_string(f.target) + " offset " + std::to_string(f.target_offset) + ")"};
    }
    rec.fixups.push_back(f);
  }
  char extra = 0;
  if (in.read(&extra, 1)) return Error{path + ": unexpected bytes after the fixup table"};
  return rec;
}

ReplayBuilder::Ref ReplayBuilder::add_string(std::string_view text) {
  if (auto it = strings_.find(text); it != strings_.end()) return it->second;
  std::string copy(text);
  const Ref ref = add_blob(copy.c_str(), copy.size() + 1);
  strings_.emplace(std::move(copy), ref);
  return ref;
}

ReplayBuilder::Ref ReplayBuilder::add_blob(
    const void* data, std::size_t size,
    std::initializer_list<std::pair<std::size_t, Ref>> pointers) {
  ReplayRecording::Segment segment;
  segment.kind = ReplayRecording::SegmentKind::blob;
  segment.bytes.assign(static_cast<const std::uint8_t*>(data),
                       static_cast<const std::uint8_t*>(data) + size);
  recording_.segments.push_back(std::move(segment));
  const auto index = static_cast<std::uint32_t>(recording_.segments.size() - 1);
  for (const auto& [offset, target] : pointers) {
    recording_.fixups.push_back({index, target.segment, offset, target.offset});
  }
  return Ref{index, 0};
}

void ReplayBuilder::begin_buffer() {
  if (current_ >= 0) end_buffer();
  recording_.segments.push_back({});
  current_ = static_cast<std::int64_t>(recording_.segments.size() - 1);
}

void ReplayBuilder::add_raw_record(const void* data, std::size_t size,
                                   std::initializer_list<std::pair<std::size_t, Ref>> pointers) {
  if (current_ < 0) begin_buffer();
  auto& bytes = recording_.segments[current_].bytes;
  const std::size_t at = bytes.size();
  bytes.insert(bytes.end(), static_cast<const std::uint8_t*>(data),
               static_cast<const std::uint8_t*>(data) + size);
  bytes.resize(padded(bytes.size()), 0);
  for (const auto& [offset, target] : pointers)
    add_pointer(at + offset, target);
}

void ReplayBuilder::add_pointer(std::size_t field_offset, Ref target) {
  if (current_ < 0) begin_buffer();
  recording_.fixups.push_back(
      {static_cast<std::uint32_t>(current_), target.segment, field_offset, target.offset});
}

void ReplayBuilder::end_buffer(std::uint64_t dropped_after) {
  if (current_ < 0) return;
  recording_.segments[current_].dropped_after = dropped_after;
  current_ = -1;
}

std::size_t ReplayBuilder::buffer_size() const {
  return current_ < 0 ? 0 : recording_.segments[current_].bytes.size();
}

}  // namespace cs::profiler
