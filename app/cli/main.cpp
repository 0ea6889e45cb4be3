// clusterscope: the headless front end. Every subcommand calls the same
// library functions as the desktop app.

#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>

#include "app/cli/context.h"

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

}  // namespace

int main(int argc, char** argv) {
  // `clusterscope run ... | head` must not kill the launcher (and orphan its
  // ranks) when head exits: a write to the closed pipe fails instead, the
  // run goes on to its store, and the failure is reported at the end.
  std::signal(SIGPIPE, SIG_IGN);
  // A file-size limit (ulimit -f, common on cluster nodes) makes a write fail
  // with a message naming the file, instead of killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "clusterscope: error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const cs::cli::CliExitCode& e) {
    return output_written(e.code);
  } catch (const cs::cli::CliError& e) {
    std::cerr << "clusterscope: error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "clusterscope: internal error: " << e.what() << '\n';
    return 3;
  }
  return output_written(0);
}
