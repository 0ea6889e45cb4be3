#pragma once
// Where the CLI writes a file the user named (an export, a trace store, a
// predicted timeline, a calibration store): the folders missing on the way
// to it are made first, as `run --out` makes them, so that every output
// flag behaves alike.

#include <string>

namespace cs::cli {

// Makes the folders of `path` that are not there yet; "-" and a path in the
// working folder need none. A folder that cannot be made is a CliError that
// names it and says why ("x/y/z.json: cannot create its folder x/y (x is a
// file, not a folder)"), before anything is written.
void make_output_folder(const std::string& path);

}  // namespace cs::cli
