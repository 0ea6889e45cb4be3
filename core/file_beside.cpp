#include "core/file_beside.h"

#include <filesystem>
#include <system_error>

namespace cs {

namespace fs = std::filesystem;

FileBeside::FileBeside(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  const bool in_place = !ec && fs::exists(status) &&
                        (!fs::is_regular_file(status) || fs::is_symlink(fs::symlink_status(path_, ec)));
  beside_ = !in_place;
  writing_ = beside_ ? path_ + ".partial" : path_;
}

FileBeside::~FileBeside() {
  if (!beside_) return;
  std::error_code ec;
  fs::remove(writing_, ec);
}

Status FileBeside::commit() {
  if (!beside_) return {};
  std::error_code ec;
  fs::rename(writing_, path_, ec);
  if (ec) return Error{path_ + ": cannot write: " + ec.message()};
  beside_ = false;
  return {};
}

}  // namespace cs
