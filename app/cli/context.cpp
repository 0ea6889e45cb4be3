#include "app/cli/context.h"

#include <cstdio>

#include <CLI/CLI.hpp>

namespace cs::cli {

const PresetCatalog& Context::catalog() {
  if (!catalog_) {
    catalog_ = take(PresetCatalog::load_default());
    // On stderr: a note, which leaves --json output as it is.
    for (const std::string& skipped : catalog_->skipped_user_files())
      std::fprintf(stderr, "clusterscope: note: %s\n", skipped.c_str());
  }
  return *catalog_;
}

void add_json_flag(CLI::App& command, bool& json) {
  command.add_flag("--json", json, "Print machine-readable JSON instead of text");
}

}  // namespace cs::cli
