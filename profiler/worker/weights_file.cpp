#include "profiler/worker/weights_file.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "core/file_beside.h"

namespace cs::worker {

namespace {
constexpr char kMagic[4] = {'C', 'S', 'W', '1'};
}

Status write_weights(const std::string& path, const NamedWeights& weights) {
  FileBeside file(path);
  std::ofstream out(file.writing(), std::ios::binary | std::ios::trunc);
  if (!out) return Error{path + ": cannot write: " + std::strerror(errno)};
  out.write(kMagic, 4);
  const std::uint32_t count = static_cast<std::uint32_t>(weights.size());
  out.write(reinterpret_cast<const char*>(&count), sizeof count);
  for (const auto& [name, values] : weights) {
    const std::uint32_t length = static_cast<std::uint32_t>(name.size());
    const std::uint64_t numel = values.size();
    out.write(reinterpret_cast<const char*>(&length), sizeof length);
    out.write(name.data(), length);
    out.write(reinterpret_cast<const char*>(&numel), sizeof numel);
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(numel * sizeof(float)));
  }
  out.close();
  if (!out) return Error{path + ": write failed (disk full?)"};
  return file.commit();
}

Result<NamedWeights> read_weights(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Error{path + ": cannot open: " + std::strerror(errno)};
  // Every size the file states is held against the bytes it has left: a
  // damaged size would otherwise ask for up to 64 GiB before the read
  // found the file short.
  std::uint64_t left = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  auto take = [&](void* into, std::uint64_t bytes) {
    if (bytes > left) return false;
    in.read(static_cast<char*>(into), static_cast<std::streamsize>(bytes));
    left -= bytes;
    return static_cast<bool>(in);
  };
  char magic[4] = {};
  if (!take(magic, 4) || std::memcmp(magic, kMagic, 4) != 0)
    return Error{path + ": not a weights file"};
  std::uint32_t count = 0;
  if (!take(&count, sizeof count)) return Error{path + ": truncated in its header"};
  NamedWeights weights;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string where =
        path + ": parameter " + std::to_string(i + 1) + " of " + std::to_string(count);
    std::uint32_t length = 0;
    if (!take(&length, sizeof length)) return Error{where + ": truncated"};
    if (length > 4096) return Error{where + ": corrupt name length " + std::to_string(length)};
    std::string name(length, '\0');
    if (!take(name.data(), length)) return Error{where + ": truncated in its name"};
    std::uint64_t numel = 0;
    if (!take(&numel, sizeof numel)) return Error{where + " (" + name + "): truncated"};
    if (numel > left / sizeof(float)) {
      return Error{where + " (" + name + "): " + std::to_string(numel) +
                   " values stated, the file holds " + std::to_string(left / sizeof(float)) +
                   " more: truncated or corrupt"};
    }
    std::vector<float> values(numel);
    if (!take(values.data(), numel * sizeof(float)))
      return Error{where + " (" + name + "): truncated"};
    if (!weights.emplace(name, std::move(values)).second)
      return Error{where + ": " + name + " appears twice"};
  }
  if (left != 0) {
    return Error{path + ": " + std::to_string(left) + " bytes after its " + std::to_string(count) +
                 " parameters: corrupt"};
  }
  return weights;
}

}  // namespace cs::worker
