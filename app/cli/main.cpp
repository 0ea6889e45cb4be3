// clusterscope: the headless front end. Every subcommand calls the same
// library functions as the desktop app.

#include <iostream>

#include <CLI/CLI.hpp>

#include "app/cli/context.h"

int main(int argc, char** argv) {
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
  cs::cli::register_trace(app, ctx);

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
  } catch (const cs::cli::CliError& e) {
    std::cerr << "clusterscope: error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "clusterscope: internal error: " << e.what() << '\n';
    return 3;
  }
  return 0;
}
