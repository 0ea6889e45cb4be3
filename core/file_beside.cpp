#include "core/file_beside.h"

#include <filesystem>
#include <memory>
#include <system_error>

#include <unistd.h>

namespace cs {

namespace fs = std::filesystem;

namespace {

// A process's own streams (/dev/stdout, /dev/fd/N, /proc/self/fd/N), or a
// link whose chain passes through one (/dev/stdout -> /proc/self/fd/1 ->
// the shell's log): written in place. A file in /dev/shm is a file.
bool is_stream(fs::path p) {
  for (int hop = 0; hop < 40; ++hop) {
    const std::string text = p.string();
    if (text.starts_with("/proc/") || text.starts_with("/dev/fd/") || text == "/dev/stdout" ||
        text == "/dev/stderr" || text == "/dev/stdin")
      return true;
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return false;
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) return false;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  return false;
}

}  // namespace

Status check_not_read_only(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::is_regular_file(status)) return {};
  constexpr fs::perms writable =
      fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write;
  if ((status.permissions() & writable) != fs::perms::none) return {};
  return Error{path +
               ": is read-only, and is left as it was (write another file, or make it "
               "writable first)"};
}

FileBeside::FileBeside(std::string path) : path_(std::move(path)), target_(path_) {
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  stream_ = !ec && fs::exists(status) && is_stream(fs::absolute(path_, ec));
  bool in_place = !ec && fs::exists(status) && (!fs::is_regular_file(status) || stream_);
  // A symbolic link to a file: its target is written beside and replaced,
  // the link kept (written in place, a full disk left the target cut short).
  // A dangling link, or a target whose folder takes no new file, is written
  // in place as before.
  if (!in_place && fs::is_symlink(fs::symlink_status(path_, ec))) {
    const fs::path resolved = fs::canonical(path_, ec);
    if (!ec && ::access(resolved.parent_path().c_str(), W_OK) == 0)
      target_ = resolved.string();
    else
      in_place = true;
  }
  beside_ = !in_place;
  writing_ = beside_ ? target_ + ".partial" : path_;
  if (beside_) unfinished_.emplace(writing_);
}

FileBeside::~FileBeside() {
  if (!beside_) return;
  std::error_code ec;
  fs::remove(writing_, ec);
  unfinished_.reset();
}

Status FileBeside::commit() {
  if (!beside_) return {};
  if (Status s = check_not_read_only(target_); !s)
    return target_ == path_ ? s : Error{path_ + " -> " + s.message()};
  std::error_code ec;
  fs::rename(writing_, target_, ec);
  if (ec) return Error{path_ + ": cannot write: " + ec.message()};
  beside_ = false;
  unfinished_.reset();
  return {};
}

Status write_files_together(const std::vector<std::string>& paths,
                            const std::function<Status(std::size_t, const std::string&)>& write) {
  // One file is a set of its own: `write` writes it whole itself (beside
  // it, or in place where it is a stream such as /dev/stdout).
  if (paths.size() == 1) return write(0, paths[0]);
  std::vector<std::unique_ptr<FileBeside>> files;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    files.push_back(std::make_unique<FileBeside>(paths[i]));
    if (files.back()->stream())
      return Error{paths[i] + ": is a stream; a set of files is written to files"};
    const std::string& beside = files.back()->writing();
    if (Status s = write(i, beside); !s) {
      // Named by the file the user asked for, not the one beside it.
      std::string message = s.message();
      for (std::size_t at = message.find(beside); at != std::string::npos;
           at = message.find(beside, at + paths[i].size()))
        message.replace(at, beside.size(), paths[i]);
      return Error{message};
    }
  }
  // Checked again now that all are written (one made read-only meanwhile
  // would stop the set half-way).
  for (const std::string& path : paths) {
    if (Status s = check_not_read_only(path); !s) return s;
  }
  SignalsHeld held;  // a signal between two renames would leave half the set
  for (auto& file : files) {
    if (Status s = file->commit(); !s) return s;
  }
  return {};
}

}  // namespace cs
