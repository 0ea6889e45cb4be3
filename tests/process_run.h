#pragma once
// A test's run of one of the product's programs to its end: its exit code
// and what it printed. Each suite's target defines CS_BIN_DIR.

#include <QByteArray>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>
#include <QtGlobal>

namespace cs::test {

struct ProcessRun {
  int exit_code = -1;  // -1: it did not exit normally (a signal, a crash)
  QString out;
  QString err;
};

struct ProcessOptions {
  QString dir;  // the working directory; the test's own when empty
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  int timeout_ms = 120000;  // past it the whole suite stops: a hang is a failure
  QByteArray input;         // written to its standard input, then closed (not null)
};

inline ProcessRun run_process(const QString& program, const QStringList& args,
                              const ProcessOptions& options = {}) {
  QProcess p;
  p.setProcessEnvironment(options.env);
  if (!options.dir.isEmpty()) p.setWorkingDirectory(options.dir);
  p.start(program, args);
  if (!options.input.isNull()) {
    p.write(options.input);
    p.closeWriteChannel();
  }
  if (!p.waitForFinished(options.timeout_ms))
    qFatal("%s %s did not finish", qPrintable(program), qPrintable(args.value(0)));
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

// The command-line program, `clusterscope`.
inline ProcessRun run_cli(const QStringList& args, const ProcessOptions& options = {}) {
  return run_process(CS_BIN_DIR "/clusterscope", args, options);
}

}  // namespace cs::test
