#pragma once
// What every `clusterscope` subcommand shares, and how commands are added.
// A command registers itself on the root CLI::App; its callback does the work
// through core/planners/profiler calls and throws CliError for a user-facing
// failure, which main() prints as one line and turns into exit status 1.

#include <optional>
#include <stdexcept>
#include <string>

#include "core/presets.h"

namespace CLI {
class App;
}

namespace cs::cli {

struct CliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A command line that asks for something the command cannot do (flags that
// exclude each other, found after parsing): main() prints it as CLI11's own
// usage errors, with exit status 2.
struct UsageError : CliError {
  using CliError::CliError;
};

// Ends the program with `code`; the command has already said why (e.g. the
// exit status of a program it ran).
struct CliExitCode {
  int code = 1;
};
// `plan`'s status for a plan whose estimate is printed but which does not
// fit in its GPUs' memory.
inline constexpr int kPlanDoesNotFit = 4;  // 3 is main()'s internal error

class Context {
 public:
  // The preset catalog, loaded on first use.
  const PresetCatalog& catalog();
  // For `presets`, the command that looks at them: a user preset file that
  // does not read is a warning naming it, over the shipped presets alone
  // (it stopped the listing meant to look into it).
  const PresetCatalog& catalog_even_without_user_presets();

 private:
  std::optional<PresetCatalog> catalog_;
};

// Unwraps a result or throws its message as a CliError.
template <class T>
T take(Result<T> result) {
  if (!result) throw CliError(result.message());
  return std::move(result).value();
}
inline void take(const Status& status) {
  if (!status) throw CliError(status.message());
}

// Adds `--json` to a subcommand.
void add_json_flag(CLI::App& command, bool& json);

// The registrars, one per subcommand (each in its own <name>_command.cpp).
void register_presets(CLI::App& app, Context& ctx);
void register_validate(CLI::App& app, Context& ctx);
void register_describe(CLI::App& app, Context& ctx);
void register_plan(CLI::App& app, Context& ctx);
void register_search(CLI::App& app, Context& ctx);
void register_profile(CLI::App& app, Context& ctx);
void register_trace(CLI::App& app, Context& ctx);
void register_run(CLI::App& app, Context& ctx);
void register_calibrate(CLI::App& app, Context& ctx);
void register_calc(CLI::App& app, Context& ctx);

}  // namespace cs::cli
