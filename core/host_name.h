#pragma once
// This machine's name, as every part of a run records and compares it: the
// launcher tells its own ranks from another host's by it, and a store's
// writer identity names it. Its own small unit, so that the injection
// library links no more of core for it.

#include <string>

namespace cs {

// gethostname(), or "localhost" when it cannot be read.
std::string this_host_name();

}  // namespace cs
