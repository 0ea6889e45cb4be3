#pragma once
// Reading a whole input file of text (a log, JSON lines) with a bound: a
// device such as /dev/zero, or a large binary given by mistake, is refused
// by name instead of filling the memory.

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace cs {

// The file's bytes; "<path>: more than 64 MiB: not <what>" past max_bytes,
// "<path>: is a folder, not <what>", "<path>: is a character device, not
// <what>", "<path>: cannot open: <why>".
Result<std::string> read_text_file(const std::string& path, std::size_t max_bytes,
                                   std::string_view what);

// "a character device", "a block device" or "a socket" for such a path, for
// messages; empty for anything else (a file, a folder, a pipe, nothing).
std::string device_kind(const std::string& path);

}  // namespace cs
