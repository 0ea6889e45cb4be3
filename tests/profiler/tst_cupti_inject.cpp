// libclusterscope-inject.so on a machine without a GPU: it loads with nothing
// undefined, exports only its entry points, and InitializeInjection fails
// gracefully (0, one line on stderr, no store left behind) for every reason
// it can meet before CUDA is there, without hanging.

#include <QDir>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

const QString kLibrary = CS_BINARY_DIR "/lib/libclusterscope-inject.so";

struct Probe {
  int exit_code = -1;
  QString out;
  QString err;
};

Probe probe(const QProcessEnvironment& env, int calls = 1) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(CS_BIN_DIR "/cs_inject_probe", {kLibrary, QString::number(calls)});
  if (!p.waitForFinished(60000)) qFatal("the injection probe did not finish");
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

QProcessEnvironment clean_environment() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const QString& name : env.keys()) {
    if (name.startsWith("CLUSTERSCOPE_") || name == "RANK" || name == "WORLD_SIZE" ||
        name == "LOCAL_RANK") {
      env.remove(name);
    }
  }
  return env;
}

}  // namespace

class TestCuptiInject : public QObject {
  Q_OBJECT

 private slots:
  void loadsAndExportsOnlyItsEntryPoints();
  void failsGracefully_data();
  void failsGracefully();
  void secondCallGivesTheSameAnswerQuietly();
};

void TestCuptiInject::loadsAndExportsOnlyItsEntryPoints() {
  const Probe p = probe(clean_environment(), 0);
  QVERIFY2(p.exit_code == 0, qPrintable(p.out + p.err));
  QVERIFY2(p.out.contains("InitializeInjection exported"), qPrintable(p.out));
  QVERIFY2(p.out.contains("InitializeInjectionNvtx2 exported"), qPrintable(p.out));
  QVERIFY2(p.out.contains("InitializeInjectionNvtxExtension exported"), qPrintable(p.out));
  QVERIFY2(p.out.contains("internal symbols hidden"), qPrintable(p.out));
  QVERIFY2(p.err.isEmpty(), qPrintable(p.err));  // loading alone does nothing
}

void TestCuptiInject::failsGracefully_data() {
  QTest::addColumn<QString>("profile_dir");    // "": unset; "temp": a fresh directory
  QTest::addColumn<QString>("capture_range");  // CLUSTERSCOPE_CAPTURE_RANGE; "": unset
  QTest::addColumn<QString>("message");
  QTest::addRow("not under clusterscope profile") << ""
                                                  << ""
                                                  << "CLUSTERSCOPE_PROFILE_DIR is not set";
  QTest::addRow("no driver in the process") << "temp"
                                            << ""
                                            << "no CUDA driver is loaded in this process";
  QTest::addRow("capture range cudaProfilerApi, no driver")
      << "temp"
      << "cudaProfilerApi"
      << "no CUDA driver is loaded in this process";
  QTest::addRow("unknown capture range")
      << "temp"
      << "nvtx"
      << "CLUSTERSCOPE_CAPTURE_RANGE=\"nvtx\" is not a capture range this library knows "
         "(cudaProfilerApi, or unset)";
}

void TestCuptiInject::failsGracefully() {
  QFETCH(QString, profile_dir);
  QFETCH(QString, capture_range);
  QFETCH(QString, message);
  QTemporaryDir dir;
  QProcessEnvironment env = clean_environment();
  if (profile_dir == "temp") env.insert("CLUSTERSCOPE_PROFILE_DIR", dir.path());
  if (!capture_range.isEmpty()) env.insert("CLUSTERSCOPE_CAPTURE_RANGE", capture_range);
  const Probe p = probe(env);
  QVERIFY2(p.exit_code == 0, qPrintable(p.out + p.err));
  QVERIFY2(p.out.contains("InitializeInjection=0"), qPrintable(p.out));
  const QStringList lines = p.err.trimmed().split('\n');
  QCOMPARE(lines.size(), 1);
  QVERIFY2(lines[0].startsWith("clusterscope-inject: "), qPrintable(p.err));
  QVERIFY2(lines[0].contains(message), qPrintable(p.err));
  QVERIFY2(lines[0].endsWith("; not tracing this process"), qPrintable(p.err));
  QVERIFY(QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).isEmpty());
}

void TestCuptiInject::secondCallGivesTheSameAnswerQuietly() {
  QTemporaryDir dir;
  QProcessEnvironment env = clean_environment();
  env.insert("CLUSTERSCOPE_PROFILE_DIR", dir.path());
  const Probe p = probe(env, 3);
  QCOMPARE(p.out.count("InitializeInjection=0"), 3);
  QCOMPARE(p.err.count("clusterscope-inject: "), 1);
}

QTEST_GUILESS_MAIN(TestCuptiInject)
#include "tst_cupti_inject.moc"
