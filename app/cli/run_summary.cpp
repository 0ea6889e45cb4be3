#include "app/cli/run_summary.h"

#include <ostream>

#include <nlohmann/json.hpp>

namespace cs::cli {

nlohmann::json run_summary_json(const std::string& run_store) {
  return {{"error", run_store + ": the trace store's analyses are not in this build yet"}};
}

void print_run_summary(std::ostream& out, const nlohmann::json& summary) {
  if (summary.contains("error"))
    out << "no summary: " << summary["error"].get<std::string>() << '\n';
}

}  // namespace cs::cli
