// The `clusterscope` binary as a user runs it: exit status, output, JSON, and
// the one-line errors on bad input.

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

struct Run {
  int exit_code = -1;
  QString out;
  QString err;
};

Run run_cli(const QStringList& args, const QString& program = CS_BIN_DIR "/clusterscope") {
  QProcess p;
  p.start(program, args);
  if (!p.waitForFinished(60000)) qFatal("clusterscope did not finish");
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

QString write_file(const QTemporaryDir& dir, const QString& name, const QByteArray& text) {
  QFile f(dir.filePath(name));
  f.open(QIODevice::WriteOnly);
  f.write(text);
  return f.fileName();
}

}  // namespace

class TestCli : public QObject {
  Q_OBJECT

 private slots:
  void exitCodes_data();
  void exitCodes();
  void presetsModelsJson();
  void describeClusterJson();
  void describeInlineCluster();
  void validateReportsEveryProblem();
  void validateJsonReport();
  void installedBinaryFindsItsPresets();
  void cliLinksNoQt();
  void outputThatCannotBeWrittenFails_data();
  void outputThatCannotBeWrittenFails();
  void endlessOrBinaryJsonIsRefused();
};

void TestCli::exitCodes_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("stdout_has");
  QTest::addColumn<QString>("stderr_has");
  QTest::addRow("help") << QStringList{"--help"} << 0 << "describe" << "";
  QTest::addRow("subcommand help") << QStringList{"describe", "--help"} << 0 << "--gpus-per-node" << "";
  QTest::addRow("version") << QStringList{"--version"} << 0 << "clusterscope 0." << "";
  QTest::addRow("no subcommand") << QStringList{} << 2 << ""
                                 << "clusterscope: error: A subcommand is required";
  QTest::addRow("unknown option") << QStringList{"presets", "--colour"} << 2 << ""
                                  << "clusterscope: error:";
  QTest::addRow("bad preset kind") << QStringList{"presets", "gadgets"} << 2 << ""
                                   << "gadgets not in {gpus,links,models,clusters}";
  QTest::addRow("presets gpus") << QStringList{"presets", "gpus"} << 0 << "h100-sxm" << "";
  QTest::addRow("presets clusters") << QStringList{"presets", "clusters"} << 0 << "this-machine" << "";
  QTest::addRow("describe preset") << QStringList{"describe", "dgx-h100-32"} << 0
                                   << "4 nodes x 8 GPUs = 32 x NVIDIA H100 SXM5 80GB" << "";
  // A preset changed by flags says so in its name, which said "8 GPUs"
  // above a line saying "no GPU".
  QTest::addRow("describe preset changed")
      << QStringList{"describe", "dgx-a100-8", "--gpus-per-node", "0"} << 0
      << "DGX A100 node, 1 node (8 GPUs), changed by --gpus-per-node 0 (dgx-a100-8)\n  1 node, no GPU"
      << "";
  QTest::addRow("describe preset, flags that change nothing")
      << QStringList{"describe", "dgx-a100-8", "--nodes", "1"} << 0
      << "DGX A100 node, 1 node (8 GPUs) (dgx-a100-8)\n" << "";
  QTest::addRow("describe typo") << QStringList{"describe", "dgx-h10-32"} << 1 << ""
                                 << "did you mean \"dgx-h100-32\"?";
  QTest::addRow("describe nothing") << QStringList{"describe"} << 1 << "" << "no cluster given";
  QTest::addRow("describe this machine") << QStringList{"describe", "this-machine"} << 0
                                         << "This machine" << "";
  QTest::addRow("describe missing file") << QStringList{"describe", "/nonexistent/c.json"} << 1 << ""
                                         << "/nonexistent/c.json: cannot open file";
  QTest::addRow("unknown gpu inline") << QStringList{"describe", "--gpu", "h300"} << 1 << ""
                                      << "unknown GPU preset \"h300\"";
  QTest::addRow("negative nodes") << QStringList{"describe", "--gpu", "h100-sxm", "--nodes", "-3"} << 2
                                  << "" << "--nodes";
  QTest::addRow("validate missing file") << QStringList{"validate", "/nonexistent.json"} << 1 << ""
                                         << "/nonexistent.json: cannot open file";
}

void TestCli::exitCodes() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, stdout_has);
  QFETCH(QString, stderr_has);
  const Run r = run_cli(args);
  QVERIFY2(r.exit_code == code, qPrintable(QString("exit %1\n%2%3").arg(r.exit_code).arg(r.out, r.err)));
  QVERIFY2(r.out.contains(stdout_has), qPrintable(r.out));
  QVERIFY2(r.err.contains(stderr_has), qPrintable(r.err));
  if (code != 0) {
    // A failure is said in one line per problem, each naming the program.
    QVERIFY2(r.err.trimmed().split('\n').first().startsWith("clusterscope: error: ") ||
                 r.err.contains(": cannot open file"),
             qPrintable(r.err));
  }
}

void TestCli::presetsModelsJson() {
  const Run r = run_cli({"presets", "models", "--json"});
  QCOMPARE(r.exit_code, 0);
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &error);
  QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
  QVERIFY(doc.isArray());
  QStringList names;
  for (const auto& v : doc.array()) {
    const QJsonObject m = v.toObject();
    names << m["name"].toString();
    QVERIFY2(!m["source"].toString().isEmpty(), qPrintable(m["name"].toString()));
  }
  QVERIFY(names.contains("llama2-70b"));
  QVERIFY(names.contains("gpt3-175b"));
  QVERIFY(names.contains("resnet18-cifar10"));
  for (const auto& v : doc.array()) {
    const QJsonObject m = v.toObject();
    if (m["name"] == "llama2-70b") {
      QCOMPARE(m["kv_heads"].toInt(), 8);
      QCOMPARE(m["gated_mlp"].toBool(), true);
    }
  }
}

void TestCli::describeClusterJson() {
  const Run r = run_cli({"describe", "dgx-h100-32", "--json"});
  QCOMPARE(r.exit_code, 0);
  const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
  const QJsonObject totals = o["totals"].toObject();
  QCOMPARE(totals["gpus"].toInt(), 32);
  QCOMPARE(totals["peak_tflops"].toObject()["bf16"].toDouble(), 32 * 989.4);
  QCOMPARE(totals["per_gpu_intra_node_bytes_per_s"].toDouble(), 450e9);
  QCOMPARE(totals["per_gpu_inter_node_bytes_per_s"].toDouble(), 50e9);
  QCOMPARE(totals["bisection_bytes_per_s"].toDouble(), 800e9);
  QCOMPARE(o["cluster"].toObject()["gpu"].toObject()["name"].toString(), QString("h100-sxm"));
}

void TestCli::describeInlineCluster() {
  const Run r = run_cli({"describe", "--gpu", "a100-80gb", "--nodes", "16", "--gpus-per-node", "8",
                         "--inter-link", "roce-200", "--json"});
  QCOMPARE(r.exit_code, 0);
  const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
  QCOMPARE(o["totals"].toObject()["gpus"].toInt(), 128);
  QCOMPARE(o["cluster"].toObject()["intra_node"].toObject()["name"].toString(), QString("nvlink3"));
  QCOMPARE(o["cluster"].toObject()["inter_node"].toObject()["name"].toString(), QString("roce-200"));

  // A preset with an override, and a cluster from a file.
  const Run bigger = run_cli({"describe", "dgx-h100-8", "--nodes", "2", "--json"});
  QCOMPARE(bigger.exit_code, 0);
  QCOMPARE(QJsonDocument::fromJson(bigger.out.toUtf8()).object()["totals"].toObject()["gpus"].toInt(), 16);

  QTemporaryDir dir;
  const QString file = write_file(dir, "c.json", R"({"name": "lab", "nodes": 2, "gpus_per_node": 4,
    "gpu": "l40s", "intra_node": "pcie4", "inter_node": "roce-100", "nics_per_node": 1})");
  const Run from_file = run_cli({"describe", file});
  QCOMPARE(from_file.exit_code, 0);
  QVERIFY2(from_file.out.contains("2 nodes x 4 GPUs = 8 x NVIDIA L40S 48GB"), qPrintable(from_file.out));
  QVERIFY(from_file.out.contains("1 x RoCE v2 100 GbE"));
}

void TestCli::validateReportsEveryProblem() {
  QTemporaryDir dir;
  const QString bad = write_file(dir, "cluster.json", R"({"name": "c", "nodes": 2, "gpus_per_node": 8,
    "gpu": "h100-sxm", "intra_node": "nvlink4",
    "inter_node": {"name": "ib", "type": "infiniband", "bandwidth_gbps": -1, "latency_us": 2},
    "price": 3})");
  const QString good = write_file(dir, "plan.json", R"({"kind": "parallel_plan", "dp": 8, "tp": 8})");
  const Run r = run_cli({"validate", good, bad});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.out.contains(good + ": valid parallel_plan"), qPrintable(r.out));
  QVERIFY2(r.err.contains(bad + ": /inter_node/bandwidth_gbps: must be between 0.001 and 10000000 (got -1)"), qPrintable(r.err));
  QVERIFY2(r.err.contains(bad + ": /price: unknown field"), qPrintable(r.err));
  QVERIFY(r.err.contains("clusterscope: error: 1 of 2 files are invalid"));

  const QString syntax = write_file(dir, "broken.json", "{\n \"nodes\": 2,,\n}");
  const Run s = run_cli({"validate", syntax});
  QCOMPARE(s.exit_code, 1);
  QVERIFY2(s.err.contains(syntax + ":2:13: invalid JSON"), qPrintable(s.err));
}

void TestCli::validateJsonReport() {
  QTemporaryDir dir;
  const QString bad = write_file(dir, "w.json", R"({"name": "m", "layers": 2, "hidden": 100, "heads": 3,
    "seq_len": 8, "vocab": 10})");
  const Run r = run_cli({"validate", "--json", bad, CS_SOURCE_DIR "/resources/presets/clusters.json"});
  QCOMPARE(r.exit_code, 1);
  const QJsonArray report = QJsonDocument::fromJson(r.out.toUtf8()).array();
  QCOMPARE(report.size(), 2);
  QCOMPARE(report[0].toObject()["valid"].toBool(), false);
  QCOMPARE(report[0].toObject()["errors"].toArray()[0].toString(),
           bad + ": /hidden: must be divisible by heads (3)");
  QCOMPARE(report[1].toObject()["valid"].toBool(), true);
  QVERIFY(report[1].toObject()["kinds"].toArray().size() >= 10);
}

// Installed, the binary reads the presets installed beside it.
void TestCli::installedBinaryFindsItsPresets() {
  QTemporaryDir prefix;
  QProcess install;
  install.start("cmake", {"--install", CS_BINARY_DIR, "--prefix", prefix.path()});
  QVERIFY(install.waitForFinished(120000));
  QVERIFY2(install.exitCode() == 0, install.readAllStandardError().constData());

  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.remove("CLUSTERSCOPE_PRESETS");
  p.setProcessEnvironment(env);
  p.start(prefix.filePath("bin/clusterscope"), {"presets", "links"});
  QVERIFY(p.waitForFinished(60000));
  QCOMPARE(p.exitCode(), 0);
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QVERIFY2(out.contains("Presets from " + prefix.filePath("share/clusterscope/presets")), qPrintable(out));
}

// The CLI runs on cluster nodes that have no Qt.
void TestCli::cliLinksNoQt() {
  QProcess ldd;
  ldd.start("ldd", {CS_BIN_DIR "/clusterscope"});
  QVERIFY(ldd.waitForFinished(30000));
  const QString libs = QString::fromUtf8(ldd.readAllStandardOutput());
  QVERIFY(!libs.isEmpty());
  QVERIFY2(!libs.contains("libQt"), qPrintable(libs));
}

// Standard output on a full disk: the command fails and says so (exit 0
// used to claim the listing was written).
void TestCli::outputThatCannotBeWrittenFails_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addRow("presets") << QStringList{"presets", "--json"};
  QTest::addRow("describe") << QStringList{"describe", "dgx-a100-8"};
}

void TestCli::outputThatCannotBeWrittenFails() {
  QFETCH(QStringList, args);
  QProcess p;
  p.setStandardOutputFile("/dev/full");
  p.start(CS_BIN_DIR "/clusterscope", args);
  QVERIFY(p.waitForFinished(60000));
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(QString::fromUtf8(p.readAllStandardError())
               .contains("clusterscope: error: the output could not be written to the standard "
                         "output"),
           "no error for a full disk");
}

// A device that never ends, and a file with a NUL byte in it (whatever
// followed the NUL went unread and the file passed as valid).
void TestCli::endlessOrBinaryJsonIsRefused() {
  Run r = run_cli({"validate", "/dev/zero"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("/dev/zero: more than 512 MiB: not a JSON document"), qPrintable(r.err));
  QTemporaryDir dir;
  const QString nul = write_file(dir, "nul.json", QByteArray("{\"kind\": \"link\"}\0garbage{{", 26));
  r = run_cli({"validate", nul});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(nul + ":1:17: invalid JSON: a NUL byte"), qPrintable(r.err));
}

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
