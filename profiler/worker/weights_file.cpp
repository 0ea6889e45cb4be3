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
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open"};
  char magic[4] = {};
  in.read(magic, 4);
  if (!in || std::memcmp(magic, kMagic, 4) != 0) return Error{path + ": not a weights file"};
  std::uint32_t count = 0;
  in.read(reinterpret_cast<char*>(&count), sizeof count);
  NamedWeights weights;
  for (std::uint32_t i = 0; in && i < count; ++i) {
    std::uint32_t length = 0;
    in.read(reinterpret_cast<char*>(&length), sizeof length);
    if (length > 4096) return Error{path + ": corrupt parameter name"};
    std::string name(length, '\0');
    in.read(name.data(), length);
    std::uint64_t numel = 0;
    in.read(reinterpret_cast<char*>(&numel), sizeof numel);
    if (numel > (1ull << 34)) return Error{path + ": corrupt parameter size"};
    std::vector<float> values(numel);
    in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(numel * sizeof(float)));
    weights.emplace(std::move(name), std::move(values));
  }
  if (!in) return Error{path + ": truncated"};
  return weights;
}

}  // namespace cs::worker
