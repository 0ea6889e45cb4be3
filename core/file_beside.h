// A file written whole or not at all: it is written beside its path and
// takes the path's place only once complete, so a failed write (a full
// disk) leaves no half file and keeps what was there before.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unfinished_file.h"

namespace cs {

// Refuses to replace a file made read-only (no write permission for
// anyone), or a symbolic link's read-only target: a file written beside and
// renamed over is not stopped by the old file's mode, and came back
// writable. The mode is asked, not access(): root may write anything.
Status check_not_read_only(const std::string& path);

class FileBeside {
 public:
  // A device, a pipe or a process's own stream (/dev/stdout, /dev/fd/N,
  // /proc/self/fd/N, or a link through one: what the shell gave) is written
  // in place: there is nothing to rename over it. A symbolic link's target is written beside
  // the target and replaced, the link kept.
  explicit FileBeside(std::string path);
  // Without a successful commit() the file beside is removed.
  ~FileBeside();
  FileBeside(const FileBeside&) = delete;
  FileBeside& operator=(const FileBeside&) = delete;

  const std::string& path() const { return path_; }
  // The file to open and write: `path` + ".partial", or `path` itself.
  const std::string& writing() const { return writing_; }
  // A process's own stream, or linked through one (/dev/stdout): to be
  // opened for appending, never truncated (a log the shell appends to).
  bool stream() const { return stream_; }
  // The file written (and closed) takes the path's place; refused over a
  // read-only file (check_not_read_only), which is left as it was.
  Status commit();

 private:
  std::string path_;
  std::string target_;  // path_, or the file a symbolic link there points to
  std::string writing_;
  bool beside_ = false;
  bool stream_ = false;  // writing_ is a file beside path_, still to rename or remove
  std::optional<UnfinishedFile> unfinished_;  // writing_, while it is beside
};

// Several files written as one set (an export's CSV tables): `write(i,
// file)` writes the i-th into `file`, beside paths[i]; only once every one is
// written do they all take their paths' places, so a failure (a full disk at
// the fifth table) leaves every path as it was; its error names paths[i]
// where it named the file beside. A set of one is written to its path (the
// writer writes it whole); in a larger set, paths that are streams
// (FileBeside) are refused: a set cannot be taken back from one.
Status write_files_together(const std::vector<std::string>& paths,
                            const std::function<Status(std::size_t, const std::string&)>& write);

}  // namespace cs
