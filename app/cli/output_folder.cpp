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
  // The folders missing on the way, to remove again if left empty.
  std::vector<fs::path> missing;
  for (fs::path at = folder; !at.empty(); at = at.parent_path()) {
    std::error_code there;
    if (fs::exists(at, there)) break;
    missing.insert(missing.begin(), at);
    if (at == at.parent_path()) break;
  }
  fs::create_directories(folder, ec);
  std::error_code made;
  if (!ec && fs::is_directory(folder, made)) {
    made_ = std::move(missing);
    return;
  }
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
  const std::string why = blocked ? at.string() + " is a file, not a folder"
                                  : (at == folder ? std::string() : at.string() + ": ") +
                                        (ec ? ec.message() : std::string("it could not be made"));
  // Those made before the one that failed go again.
  for (auto made_at = missing.rbegin(); made_at != missing.rend(); ++made_at) {
    std::error_code removed;
    fs::remove(*made_at, removed);
  }
  throw CliError(path + ": cannot create its folder " + folder.string() + " (" + why + ")");
}

OutputFolder::~OutputFolder() {
  // Innermost first; a folder holding anything stays (remove() takes only
  // an empty one), and so do those around it.
  for (auto at = made_.rbegin(); at != made_.rend(); ++at) {
    std::error_code ec;
    if (!fs::remove(*at, ec)) break;
  }
}

}  // namespace cs::cli
