#include "app/cli/context.h"

#include <cstdio>

#include <CLI/CLI.hpp>

namespace cs::cli {

namespace {

// On stderr: a note, which leaves --json output as it is.
void note_skipped(const PresetCatalog& catalog) {
  for (const std::string& skipped : catalog.skipped_user_files())
    std::fprintf(stderr, "clusterscope: note: %s\n", skipped.c_str());
}

}  // namespace

const PresetCatalog& Context::catalog() {
  if (!catalog_) {
    catalog_ = take(PresetCatalog::load_default());
    note_skipped(*catalog_);
  }
  return *catalog_;
}

const PresetCatalog& Context::catalog_even_without_user_presets() {
  if (catalog_) return *catalog_;
  std::string user_error;
  catalog_ = take(PresetCatalog::load_default_or_shipped(user_error));
  if (user_error.empty()) {
    note_skipped(*catalog_);
  } else {
    std::fprintf(stderr,
                 "clusterscope: warning: %s\n(the shipped presets are listed without them)\n",
                 user_error.c_str());
  }
  return *catalog_;
}

void add_json_flag(CLI::App& command, bool& json) {
  command.add_flag("--json", json, "Print machine-readable JSON instead of text");
}

}  // namespace cs::cli
