// clusterscope: the headless front end. Every subcommand calls the same
// library functions as the desktop app.

#include <algorithm>
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/context.h"
#include "core/json_text.h"
#include "core/unfinished_file.h"

namespace {

// What a command printed must have reached its reader: a full disk or a
// closed pipe behind stdout is an error, not exit status 0.
int output_written(int code) {
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "clusterscope: error: the output could not be written to the standard output "
                 "(a full disk, or a pipe whose reader has gone)\n";
    return code == 0 ? 1 : code;
  }
  return code;
}

// Passes everything on to stdout's own buffer, noting whether anything was
// written: a failing command under --json says so on stdout only when it
// printed nothing there (a report followed by an error stays one document).
class WatchedOutput : public std::streambuf {
 public:
  explicit WatchedOutput(std::streambuf* target) : target_(target) {}
  bool written() const { return written_; }
  std::streambuf* target() const { return target_; }

 protected:
  int overflow(int c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    written_ = true;
    return target_->sputc(traits_type::to_char_type(c));
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n > 0) written_ = true;
    return target_->sputn(s, n);
  }
  int sync() override { return target_->pubsync(); }

 private:
  std::streambuf* target_;
  bool written_ = false;
};

// The failure as JSON on stdout, where the command that failed was given
// --json and printed nothing yet: a script that parses stdout learns why.
// The text on stderr stays.
void print_json_error(CLI::App& app, const WatchedOutput& out, const std::string& message,
                      int code) {
  CLI::App* command = &app;
  while (!command->get_subcommands().empty())
    command = command->get_subcommands().front();
  if (command == &app || out.written()) return;
  const CLI::Option* json = command->get_option_no_throw("--json");
  if (!json || json->count() == 0) return;
  std::cout << cs::json_text(nlohmann::json{{"error", message}, {"exit_code", code}}, 2) << '\n';
}

// The first word that is not an option, where `command` takes a subcommand,
// is one of them: otherwise CLI11 said "A subcommand is required" of
// `trace verify`, and `clusterscope bogus --help` printed the help and exit 0.
std::string unknown_subcommand(CLI::App& command, int argc, char** argv, int from) {
  if (command.get_require_subcommand_min() == 0) return {};
  for (int i = from; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word.front() == '-') {
      if (word == "--") return {};
      continue;
    }
    std::vector<std::string> names;
    for (CLI::App* sub : command.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() == word) return unknown_subcommand(*sub, argc, argv, i + 1);
      names.push_back(sub->get_name());
    }
    std::string list;
    for (const std::string& n : names)
      list += (list.empty() ? "" : ", ") + n;
    const std::string where = command.get_parent() ? command.get_name() + " " : std::string();
    return "unknown command \"" + where + word + "\": the " + where + "commands are " + list;
  }
  return {};
}

}  // namespace

// An empty value (`--plan ""`, `--from-store "$UNSET"`) is refused by name:
// the commands read an empty string as the option not given, and ran
// something else (the default model, a whole calibration). Only texts a user
// may leave blank on purpose take one.
void refuse_empty_values(CLI::App& command) {
  static const CLI::Validator not_empty(
      [](std::string& value) {
        return value.empty() ? std::string("an empty value") : std::string();
      },
      "");
  for (CLI::Option* option : command.get_options()) {
    const std::string& name = option->get_name();
    // `profile -- COMMAND ARGS...`: the traced program's arguments may be empty.
    if (option->get_items_expected_min() == 0 || name == "--title" ||
        name.starts_with("--slurm-") || name == "command")
      continue;
    option->check(not_empty);
  }
  for (CLI::App* sub : command.get_subcommands({}))
    refuse_empty_values(*sub);
}

// A whole-number option reads its value in decimal, as its range check
// does: CLI11 alone took "0100" as octal (64 where the check saw 100) and
// "0x10" as hex. Leading zeros are dropped; any other form is refused by name.
void read_whole_numbers_in_decimal(CLI::App& command) {
  static const CLI::Validator decimal(
      [](std::string& value) -> std::string {
        if (value.empty()) return {};  // said by the empty-value check
        const std::size_t sign = value[0] == '+' || value[0] == '-' ? 1 : 0;
        const bool digits =
            value.size() > sign && std::all_of(value.begin() + std::ptrdiff_t(sign), value.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) return "must be a whole number in decimal digits (got " + value + ")";
        const std::size_t first = value.find_first_not_of('0', sign);
        value.erase(sign, (first == std::string::npos ? value.size() - 1 : first) - sign);
        return {};
      },
      "");
  for (CLI::Option* option : command.get_options()) {
    const std::string type = option->get_type_name();
    if (type.starts_with("INT") || type.starts_with("UINT")) option->transform(decimal);
  }
  for (CLI::App* sub : command.get_subcommands({}))
    read_whole_numbers_in_decimal(*sub);
}

// CLI11's message in words a user reads: an option given more times than it
// takes ("--output: At Most 1 required but received 2") says so.
std::string parse_error_text(const CLI::ParseError& e) {
  std::string text = e.what();
  const std::string at_most = ": At Most 1 required but received ";
  if (const std::size_t at = text.find(at_most); at != std::string::npos) {
    const std::string times = text.substr(at + at_most.size());
    return text.substr(0, at) + " is given " + times + " times: give it once";
  }
  return text;
}

int main(int argc, char** argv) {
  // `clusterscope run ... | head` must not kill the launcher (and orphan its
  // ranks) when head exits: a write to the closed pipe fails instead, the
  // run goes on to its store, and the failure is reported at the end.
  std::signal(SIGPIPE, SIG_IGN);
  // A file-size limit (ulimit -f, common on cluster nodes) makes a write fail
  // with a message naming the file, instead of killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  // Ctrl-C or a kill during an export, import or merge leaves no half file.
  cs::remove_unfinished_files_on_signal();
  CLI::App app{
      "ClusterScope: plan, run and profile neural-network training on GPU clusters.",
      "clusterscope"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "clusterscope " CLUSTERSCOPE_VERSION);

  cs::cli::Context ctx;
  cs::cli::register_presets(app, ctx);
  cs::cli::register_validate(app, ctx);
  cs::cli::register_describe(app, ctx);
  cs::cli::register_plan(app, ctx);
  cs::cli::register_search(app, ctx);
  cs::cli::register_profile(app, ctx);
  cs::cli::register_trace(app, ctx);
  cs::cli::register_run(app, ctx);
  cs::cli::register_calibrate(app, ctx);
  cs::cli::register_calc(app, ctx);
  refuse_empty_values(app);
  read_whole_numbers_in_decimal(app);

  WatchedOutput watched(std::cout.rdbuf());
  std::cout.rdbuf(&watched);
  // Put back before `watched` goes, for the flush at exit.
  struct Restore {
    std::streambuf* buffer;
    ~Restore() { std::cout.rdbuf(buffer); }
  } const restore{watched.target()};

  if (const std::string unknown = unknown_subcommand(app, argc, argv, 1); !unknown.empty()) {
    std::cerr << "clusterscope: error: " << unknown << " (see --help)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string text = parse_error_text(e);
    std::cerr << "clusterscope: error: " << text << " (see --help)\n";
    print_json_error(app, watched, text, 2);
    return output_written(2);
  } catch (const cs::cli::CliExitCode& e) {
    return output_written(e.code);
  } catch (const cs::cli::UsageError& e) {
    std::cerr << "clusterscope: error: " << e.what() << " (see --help)\n";
    print_json_error(app, watched, e.what(), 2);
    return output_written(2);
  } catch (const cs::cli::CliError& e) {
    std::cerr << "clusterscope: error: " << e.what() << '\n';
    print_json_error(app, watched, e.what(), 1);
    return output_written(1);
  } catch (const std::exception& e) {
    std::cerr << "clusterscope: internal error: " << e.what() << '\n';
    return 3;
  }
  return output_written(0);
}
