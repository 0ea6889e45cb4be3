#include "app/cli/output_folder.h"

#include <filesystem>
#include <system_error>

#include "app/cli/context.h"

namespace cs::cli {

namespace fs = std::filesystem;

OutputFolder::OutputFolder(const std::string& path) {
  if (path.empty() || path == "-") return;
  const fs::path folder = fs::path(path).parent_path();
  std::error_code ec;
  if (folder.empty() || fs::is_directory(folder, ec)) return;
  ec = made_.make(folder);
  if (!ec) return;
  // The first part of the way that is not a folder: what stands there (a
  // file), or the folder that could not be made (no permission).
  fs::path at;
  for (const fs::path& part : folder) {
    at /= part;
    std::error_code is;
    if (!fs::is_directory(at, is)) break;
  }
  std::error_code there;
  const bool blocked = fs::exists(at, there);
  const std::string why = blocked
                              ? at.string() + " is a file, not a folder"
                              : (at == folder ? std::string() : at.string() + ": ") + ec.message();
  throw CliError(path + ": cannot create its folder " + folder.string() + " (" + why + ")");
}

OutputFolder::~OutputFolder() {
  made_.remove_empty();
}

}  // namespace cs::cli
