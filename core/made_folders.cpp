#include "core/made_folders.h"

namespace cs {

namespace fs = std::filesystem;

std::error_code MadeFolders::make(const fs::path& folder) {
  std::error_code ec;
  std::vector<fs::path> missing;
  for (fs::path at = fs::absolute(folder, ec).lexically_normal(); !ec && !at.empty();
       at = at.parent_path()) {
    if (at.filename().empty()) {  // "parts/": the same folder as "parts"
      if (at == at.parent_path()) break;
      continue;
    }
    std::error_code there;
    if (fs::exists(at, there)) break;
    missing.insert(missing.begin(), at);
  }
  if (ec) return ec;
  fs::create_directories(folder, ec);
  if (!ec && !fs::is_directory(folder, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) {
    for (auto at = missing.rbegin(); at != missing.rend(); ++at) {
      std::error_code removed;
      fs::remove(*at, removed);
    }
    return ec;
  }
  made_.insert(made_.end(), missing.begin(), missing.end());
  return {};
}

void MadeFolders::remove_empty() const {
  for (auto at = made_.rbegin(); at != made_.rend(); ++at) {
    std::error_code ec;
    // remove() takes a folder only while it is empty.
    if (!fs::remove(*at, ec)) break;
  }
}

}  // namespace cs
