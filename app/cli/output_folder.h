#pragma once
// Where the CLI writes a file the user named (an export, a trace store, a
// predicted timeline, a calibration store): the folders missing on the way
// to it are made first, as `run --out` makes them, so that every output
// flag behaves alike.

#include <string>

#include "core/made_folders.h"

namespace cs::cli {

// Makes the folders of `path` that are not there yet; "-" and a path in the
// working folder need none. A folder that cannot be made is a CliError that
// names it and says why ("x/y/z.json: cannot create its folder x/y (x is a
// file, not a folder)"), before anything is written.
//
// Held for the command's length: the folders it made that are still empty
// when it goes (the command was refused or failed before writing there) are
// removed, so that a refusal leaves nothing behind.
class OutputFolder {
 public:
  explicit OutputFolder(const std::string& path);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

 private:
  MadeFolders made_;
};

}  // namespace cs::cli
