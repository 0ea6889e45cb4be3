#include "core/file_beside.h"

#include <filesystem>
#include <system_error>

namespace cs {

namespace fs = std::filesystem;

FileBeside::FileBeside(std::string path) : path_(std::move(path)), target_(path_) {
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  // /dev/stdout is a link to whatever the shell gave (a log appended to):
  // written in place, never replaced.
  const bool stream = path_.starts_with("/dev/") || path_.starts_with("/proc/");
  const bool in_place = !ec && fs::exists(status) && (!fs::is_regular_file(status) || stream);
  // A symbolic link to a file: its target is written beside and replaced,
  // the link kept (written in place, a full disk left the target cut short).
  if (!in_place && fs::is_symlink(fs::symlink_status(path_, ec))) {
    const fs::path resolved = fs::canonical(path_, ec);
    if (!ec) target_ = resolved.string();
  }
  beside_ = !in_place;
  writing_ = beside_ ? target_ + ".partial" : path_;
}

FileBeside::~FileBeside() {
  if (!beside_) return;
  std::error_code ec;
  fs::remove(writing_, ec);
}

Status FileBeside::commit() {
  if (!beside_) return {};
  std::error_code ec;
  fs::rename(writing_, target_, ec);
  if (ec) return Error{path_ + ": cannot write: " + ec.message()};
  beside_ = false;
  return {};
}

}  // namespace cs
