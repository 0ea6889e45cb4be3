#include "core/file_exists.h"

#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

namespace cs {

Status check_file_exists(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return Error{path + ": " + ec.message()};
  if (!std::filesystem::exists(status)) return Error{path + ": no such file"};
  return {};
}

bool is_sqlite_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  char magic[16] = {};
  std::ifstream(path, std::ios::binary).read(magic, sizeof magic);
  return std::string_view(magic, sizeof magic) == std::string_view("SQLite format 3", 16);
}

}  // namespace cs
