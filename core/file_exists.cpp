#include "core/file_exists.h"

#include <filesystem>
#include <system_error>

namespace cs {

Status check_file_exists(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return Error{path + ": " + ec.message()};
  if (!std::filesystem::exists(status)) return Error{path + ": no such file"};
  return {};
}

}  // namespace cs
