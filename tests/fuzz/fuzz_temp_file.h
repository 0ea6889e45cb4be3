#pragma once
// For readers that take a path: the fuzzer's bytes as a file, in /dev/shm
// when there is one (a store per run on a disk would be slow), named by
// this process so that several fuzzers can run at once.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace cs::fuzz {

inline std::string temp_path(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                        ? "/dev/shm"
                                        : std::filesystem::temp_directory_path();
  return (dir / ("cs-fuzz-" + std::to_string(::getpid()) + "-" + name)).string();
}

inline void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// Removes a store and the files SQLite keeps beside it.
inline void remove_store(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path + suffix, ec);
}

}  // namespace cs::fuzz
