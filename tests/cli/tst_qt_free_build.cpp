// A GPU node has CUDA but no Qt: a configure with the GUI off must build core,
// planners, profiler and the CLI without finding or including any Qt header.
// Qt is hidden from CMake here, so a stray find_package(Qt6) fails the build.

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

class TestQtFreeBuild : public QObject {
  Q_OBJECT

 private slots:
  void buildsWithoutQt();
};

namespace {
QString run(const QString& program, const QStringList& args, int* exit_code) {
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("CCACHE_NOHASHDIR", "1");  // reuse the main build's objects where they match
  p.setProcessEnvironment(env);
  p.start(program, args);
  p.waitForFinished(-1);
  *exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  return QString::fromUtf8(p.readAll());
}
}  // namespace

void TestQtFreeBuild::buildsWithoutQt() {
  QTemporaryDir build;
  int code = 0;
  const QString configure =
      run("cmake", {"-S", CS_SOURCE_DIR, "-B", build.path(), "-G", "Ninja", "-DCLUSTERSCOPE_GUI=OFF",
                    "-DCLUSTERSCOPE_TESTS=OFF", "-DCLUSTERSCOPE_BENCH=OFF",
                    "-DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"},
          &code);
  QVERIFY2(code == 0, qPrintable(configure));
  QVERIFY2(!configure.contains("Qt6_DIR") && !configure.contains("Found Qt"), qPrintable(configure));

  // The CLI pulls in core, planners and the profiler's Qt-free library; the
  // worker's model library stands for the rest of the profiler. (Same build
  // type as the main build, so that ccache serves most objects.)
  const QString built = run("cmake", {"--build", build.path(), "--parallel", "2", "--target",
                                      "clusterscope", "cs_worker_model"},
                            &code);
  QVERIFY2(code == 0, qPrintable(built.right(4000)));

  QFile commands(build.filePath("compile_commands.json"));
  QVERIFY(commands.open(QIODevice::ReadOnly));
  const QByteArray text = commands.readAll();
  QVERIFY2(!text.contains("Qt6") && !text.contains("qt6"), "a Qt include path reached the build");
  QVERIFY2(!QFile::exists(build.filePath("bin/clusterscope-ui")), "the GUI was built");

  // What a cluster node runs.
  const QString out = run(build.filePath("bin/clusterscope"), {"describe", "dgx-a100-64"}, &code);
  QVERIFY2(code == 0, qPrintable(out));
  QVERIFY(out.contains("64 x NVIDIA A100"));
}

QTEST_GUILESS_MAIN(TestQtFreeBuild)
#include "tst_qt_free_build.moc"
