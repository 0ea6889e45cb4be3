#include "app/cli/output_folder.h"

#include <filesystem>
#include <system_error>

#include "app/cli/context.h"

namespace cs::cli {

void make_output_folder(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty() || path == "-") return;
  const fs::path folder = fs::path(path).parent_path();
  std::error_code ec;
  if (folder.empty() || fs::is_directory(folder, ec)) return;
  fs::create_directories(folder, ec);
  std::error_code made;
  if (!ec && fs::is_directory(folder, made)) return;
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
  throw CliError(path + ": cannot create its folder " + folder.string() + " (" + why + ")");
}

}  // namespace cs::cli
