// clusterscope validate FILE... [--json]

#include <algorithm>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/model_json.h"
#include "planners/estimate.h"

namespace cs::cli {

namespace {

struct ValidateOptions {
  std::vector<std::string> files;
  bool json = false;
};

// The planner's rules on the plan documents of a file: what `plan` refuses
// (dp x tp x pp over the cluster, fp8 on an A100) is not a valid plan. Read
// leaving the parallel plan's own rules to check_plan, so that a global
// batch that is not a multiple does not hide the rules that need the model.
// One problem per line; "" when there is nothing to say.
std::string plan_problems(const nlohmann::json& document, const std::string& file,
                          const PresetCatalog& catalog) {
  std::vector<std::pair<std::string, const nlohmann::json*>> plans;  // (pointer, document)
  if (document.is_array()) {
    for (std::size_t i = 0; i < document.size(); ++i)
      plans.emplace_back("/" + std::to_string(i), &document[i]);
  } else {
    plans.emplace_back("", &document);
  }
  std::string text;
  // The first plans' problems, then a count (as validate_json counts).
  constexpr int kPlansReported = 20;
  int refused = 0;
  for (const auto& [pointer, j] : plans) {
    auto kind = detect_kind(*j, file);
    if (!kind || *kind != DocumentKind::plan) continue;
    auto plan = plan_from_json(*j, file, &catalog, ParallelRules::leave_to_caller);
    if (!plan) continue;  // validate_file said why
    const std::vector<Problem> problems = plan::check_plan(*plan);
    if (problems.empty() || ++refused > kPlansReported) continue;
    for (const Problem& p : problems)
      text += (text.empty() ? "" : "\n") + file + ": " + pointer + p.pointer + ": " + p.message;
  }
  if (refused > kPlansReported) {
    text += "\n" + file + ": ... and " + std::to_string(refused - kPlansReported) +
            " more plans the planner refuses";
  }
  return text;
}

// Plans that are valid but do not fit in their GPUs' memory: "valid" alone
// misled (a 70B model on 8 GPUs without sharding, 1 TB a GPU, read
// "valid plan"). Checked by the planner's estimate; the document stays valid.
struct DoesNotFit {
  std::string pointer;
  double needs = 0, capacity = 0;
};
std::vector<DoesNotFit> plans_not_fitting(const nlohmann::json& document, const std::string& file,
                                          const PresetCatalog& catalog) {
  std::vector<DoesNotFit> out;
  auto check = [&](const std::string& pointer, const nlohmann::json& j) {
    auto kind = detect_kind(j, file);
    if (!kind || *kind != DocumentKind::plan) return;
    auto plan = plan_from_json(j, file, &catalog);
    if (!plan || !plan::check_plan(*plan).empty()) return;
    if (auto e = plan::estimate(*plan); e && !e->fits)
      out.push_back({pointer, e->memory.total(), e->memory_capacity});
  };
  if (document.is_array()) {
    for (std::size_t i = 0; i < document.size(); ++i)
      check("/" + std::to_string(i), document[i]);
  } else {
    check("", document);
  }
  return out;
}

void run(const ValidateOptions& o, Context& ctx) {
  const PresetCatalog& catalog = ctx.catalog();
  nlohmann::json report = nlohmann::json::array();
  int failures = 0;
  // Before any result is printed: standard input can be read once.
  if (std::count(o.files.begin(), o.files.end(), "-") > 1)
    throw UsageError(
        "validate: - (standard input) is named more than once, and it can be read once");
  for (const std::string& source : o.files) {
    const std::string file = document_name(source);
    // Read once: standard input ("-") cannot be read again.
    const Result<nlohmann::json> document = read_document(source, "validate");
    Result<std::vector<DocumentKind>> kinds =
        document ? validate_json(*document, file, &catalog)
                 : Result<std::vector<DocumentKind>>(document.error());
    if (std::string problems = document ? plan_problems(*document, file, catalog) : std::string();
        !problems.empty()) {
      // Each problem once: the reader's and the planner's share some rules.
      std::string text = kinds ? std::string() : kinds.message();
      std::size_t start = 0;
      while (start < problems.size()) {
        std::size_t end = std::min(problems.find('\n', start), problems.size());
        const std::string line = problems.substr(start, end - start);
        if (("\n" + text + "\n").find("\n" + line + "\n") == std::string::npos)
          text += (text.empty() ? "" : "\n") + line;
        start = end + 1;
      }
      kinds = Error{std::move(text)};
    }
    nlohmann::json entry = {{"file", file}, {"valid", kinds.ok()}};
    if (kinds) {
      std::vector<std::string> names;
      for (DocumentKind k : *kinds) names.emplace_back(to_string(k));
      entry["kinds"] = names;
      const std::vector<DoesNotFit> too_big =
          document ? plans_not_fitting(*document, file, catalog) : std::vector<DoesNotFit>{};
      if (!too_big.empty()) {
        entry["does_not_fit"] = nlohmann::json::array();
        for (const DoesNotFit& d : too_big) {
          entry["does_not_fit"].push_back(
              {{"pointer", d.pointer}, {"per_gpu_bytes", d.needs}, {"capacity_bytes", d.capacity}});
        }
      }
      if (!o.json) {
        std::cout << file << ": valid ";
        if (names.size() == 1) {
          std::cout << names.front() << '\n';
        } else {
          std::cout << "list of " << names.size() << " documents\n";
        }
        for (const DoesNotFit& d : too_big) {
          std::cout << "  but " << (d.pointer.empty() ? "it" : d.pointer)
                    << " does not fit in GPU memory: " << format_bytes(d.needs)
                    << " per GPU, the GPU has " << format_bytes(d.capacity)
                    << " (clusterscope plan shows where it goes)\n";
        }
      }
    } else {
      ++failures;
      entry["errors"] = nlohmann::json::array();
      std::string text = kinds.message();
      std::size_t start = 0;
      while (start <= text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        entry["errors"].push_back(text.substr(start, end - start));
        start = end + 1;
      }
      if (!o.json) std::cerr << text << '\n';
    }
    report.push_back(entry);
  }
  if (o.json) std::cout << json_text(report, 2) << '\n';
  if (failures > 0) {
    throw CliError(std::to_string(failures) + " of " + std::to_string(o.files.size()) +
                   (o.files.size() == 1 ? " file is" : " files are") + " invalid");
  }
}

}  // namespace

void register_validate(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Check JSON files (cluster, GPU, link, workload, parallel or precision plan, plan, or a "
      "list of them); the kind is read from \"kind\" or detected");
  cmd->add_option("files", o->files, "JSON files to check (- reads standard input)")->required();
  add_json_flag(*cmd, o->json);
  cmd->callback([o, &ctx] { run(*o, ctx); });
}

}  // namespace cs::cli
