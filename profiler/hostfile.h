#pragma once
// Hostfiles in Open MPI's format: one host per line, `name [slots=N]
// [max_slots=N]`, `#` starts a comment. Host names are checked against what
// DNS allows (letters, digits, '-', '.', plus '_' and ':' for the odd
// cluster and IPv6), so that nothing else reaches mpirun or ssh; every
// error names the file and the line.

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cs::launch {

struct Host {
  std::string name;
  int slot_count = 1;      // ranks mpirun places there ("slots"; the name is a Qt macro)
  int max_slot_count = 0;  // 0: no limit given
  int line = 0;            // where it was read, for messages
};

Result<std::vector<Host>> parse_hostfile(std::string_view text, std::string_view file_name);
Result<std::vector<Host>> read_hostfile(const std::string& path);

bool valid_host_name(std::string_view name);
int total_slots(const std::vector<Host>& hosts);

// The hosts in the format read above (what the launcher hands to mpirun:
// only values that passed validation).
std::string format_hostfile(const std::vector<Host>& hosts);

}  // namespace cs::launch
