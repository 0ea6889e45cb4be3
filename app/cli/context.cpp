#include "app/cli/context.h"

#include <CLI/CLI.hpp>

namespace cs::cli {

const PresetCatalog& Context::catalog() {
  if (!catalog_) catalog_ = take(PresetCatalog::load_default());
  return *catalog_;
}

void add_json_flag(CLI::App& command, bool& json) {
  command.add_flag("--json", json, "Print machine-readable JSON instead of text");
}

}  // namespace cs::cli
