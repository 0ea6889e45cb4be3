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

const PresetCatalog& Context::catalog_even_without_user_presets() {
  if (catalog_) return *catalog_;
  auto loaded = PresetCatalog::load_default();
  if (loaded) return catalog();  // notes said as usual
  auto dir = find_presets_dir();
  auto shipped = dir ? PresetCatalog::load(*dir) : Result<PresetCatalog>(dir.error());
  if (!shipped) throw CliError(loaded.message());  // not the user's file: the error stands
  std::fprintf(stderr, "clusterscope: warning: %s\n(the shipped presets are listed without them)\n",
               loaded.message().c_str());
  catalog_ = std::move(shipped).value();
  return *catalog_;
}

void add_json_flag(CLI::App& command, bool& json) {
  command.add_flag("--json", json, "Print machine-readable JSON instead of text");
}

}  // namespace cs::cli
