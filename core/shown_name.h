#pragma once
// What every view calls a named part (a GPU, a link, a cluster, a
// workload): its display name, else its name. Files read through
// model_json.h always have one; parts made in code may not.

#include <string>

namespace cs {

template <class Part>
const std::string& shown_name(const Part& part) {
  return part.display_name.empty() ? part.name : part.display_name;
}

}  // namespace cs
