#pragma once
// The folders a command makes on the way to an output it writes (a store,
// an export, --keep-parts), so that it can remove them again when it ends
// having written nothing there: a refusal or a failure leaves no empty
// folder behind.

#include <filesystem>
#include <system_error>
#include <vector>

namespace cs {

class MadeFolders {
 public:
  // Makes `folder` and the folders missing above it, and remembers those it
  // made; the error of the first that could not be made (those made before
  // it are removed again).
  std::error_code make(const std::filesystem::path& folder);

  // Removes the folders it made that are empty, innermost first; one that
  // holds anything stays, and so do those around it.
  void remove_empty() const;

 private:
  std::vector<std::filesystem::path> made_;  // outermost first
};

}  // namespace cs
