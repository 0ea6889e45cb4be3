#include "core/text_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace cs {

Result<std::string> read_text_file(const std::string& path, std::size_t max_bytes,
                                   std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Error{path + ": is a folder, not " + std::string(what)};
  if (const std::string device = device_kind(path); !device.empty())
    return Error{path + ": is " + device + ", not " + std::string(what)};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open: " + std::strerror(errno)};
  std::string text;
  char piece[1 << 16];
  while (in.read(piece, sizeof piece) || in.gcount() > 0) {
    text.append(piece, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return Error{path + ": more than " + std::to_string(max_bytes >> 20) + " MiB: not " +
                   std::string(what)};
    }
  }
  if (in.bad()) return Error{path + ": cannot read: " + std::strerror(errno)};
  return text;
}

std::string device_kind(const std::string& path) {
  std::error_code ec;
  switch (std::filesystem::status(path, ec).type()) {
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::block:
      return "a block device";
    case std::filesystem::file_type::socket:
      return "a socket";
    default:
      return {};
  }
}

}  // namespace cs
