#include "core/host_name.h"

#include <climits>

#include <unistd.h>

namespace cs {

std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace cs
