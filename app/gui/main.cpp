// clusterscope-ui: the desktop app.
//   clusterscope-ui [PROJECT]   opens PROJECT, else the default project
//   --startup-time              prints the time from process start to the
//                               default project's estimate painted, and exits

#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <unistd.h>

#include "app/gui/estimate_view.h"
#include "app/gui/main_window.h"
#include "app/gui/workspace.h"

namespace {

// Seconds since this process started (its start time from the kernel), so
// that the figure includes loading the libraries, not only main().
double secondsSinceProcessStart() {
  FILE* f = std::fopen("/proc/self/stat", "r");
  if (!f) return -1;
  char buffer[4096];
  const std::size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, f);
  std::fclose(f);
  buffer[n] = 0;
  // Field 22 (starttime, clock ticks since boot) counts from after the ")" of the name.
  const char* p = std::strrchr(buffer, ')');
  if (!p) return -1;
  unsigned long long start_ticks = 0;
  int field = 2;
  for (const char* c = p + 1; *c && field < 22; ++c) {
    if (*c == ' ') {
      ++field;
      if (field == 22) start_ticks = std::strtoull(c + 1, nullptr, 10);
    }
  }
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const double ticks = double(sysconf(_SC_CLK_TCK));
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9 - double(start_ticks) / ticks;
}

}  // namespace

int main(int argc, char** argv) {
  QElapsedTimer since_main;
  since_main.start();
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("ClusterScope"));
  QApplication::setApplicationName(QStringLiteral("clusterscope-ui"));
  QApplication::setApplicationVersion(QStringLiteral(CLUSTERSCOPE_VERSION));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral(
      "ClusterScope: plan, run and profile neural-network training on GPU clusters."));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument(QStringLiteral("project"), QStringLiteral("A project file to open"));
  QCommandLineOption startup(
      QStringLiteral("startup-time"),
      QStringLiteral("Print the time until the first estimate is painted, then exit"));
  parser.addOption(startup);
  parser.process(app);

  cs::gui::MainWindow window;
  if (parser.isSet(startup)) {
    QObject::connect(
        window.estimateView(), &cs::gui::EstimateView::painted, &app, [&](std::uint64_t) {
          std::printf("startup: %.1f ms since process start, %.1f ms since main()\n",
                      1e3 * secondsSinceProcessStart(), double(since_main.nsecsElapsed()) * 1e-6);
          std::fflush(stdout);
          window.workspace()->closeSession();
          QTimer::singleShot(0, &app, &QApplication::quit);
        });
  }
  const QStringList args = parser.positionalArguments();
  window.start(args.isEmpty() ? QString() : args.front());
  window.show();
  return QApplication::exec();
}
