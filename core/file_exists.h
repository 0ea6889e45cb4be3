#pragma once
// Whether an input file is there, with the system's reason where it cannot
// be told: a 5000-character name said "no such file", not "File name too long".

#include <string>

#include "core/result.h"

namespace cs {

// "<path>: no such file", or "<path>: <why it cannot be looked at>".
Status check_file_exists(const std::string& path);

// A regular file that begins with SQLite's header: a database (a trace
// store, an Nsight Systems export, another program's).
bool is_sqlite_file(const std::string& path);

}  // namespace cs
