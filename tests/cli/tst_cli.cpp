// The `clusterscope` binary as a user runs it: exit status, output, JSON, and
// the one-line errors on bad input.

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include "../process_run.h"

namespace {

using Run = cs::test::ProcessRun;
using cs::test::run_cli;

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
  void countsPastAnInt_data();
  void countsPastAnInt();
  void presetsModelsJson();
  void presetsOfCpuEngineRanks();
  void presetsListedWhenAUserFileIsBroken();
  void presetsSayWhatAUserFileReplaces();
  void describeClusterJson();
  void describeInlineCluster();
  void noPowerKnown_data();
  void noPowerKnown();
  void validateReportsEveryProblem();
  void validateJsonReport();
  void installedBinaryFindsItsPresets();
  void cliLinksNoQt();
  void outputThatCannotBeWrittenFails_data();
  void outputThatCannotBeWrittenFails();
  void endlessOrBinaryJsonIsRefused();
  void calcSeedExamples_data();
  void calcSeedExamples();
  void calcText();
  void standardInputDocuments_data();
  void standardInputDocuments();
  void jsonErrorOnStandardOutput_data();
  void jsonErrorOnStandardOutput();
  void jsonErrorAfterAReport();
  void referenceIsCurrent();
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
  QTest::addRow("unknown command")
      << QStringList{"plna", "--json"} << 2 << ""
      << "clusterscope: error: unknown command \"plna\": the commands are presets, validate";
  QTest::addRow("unknown command with --help") << QStringList{"bogus", "--help"} << 2 << ""
                                               << "unknown command \"bogus\"";
  QTest::addRow("unknown trace command")
      << QStringList{"trace", "verify", "x.db"} << 2 << ""
      << "unknown command \"trace verify\": the trace commands are info, stats, compare";
  QTest::addRow("unknown option") << QStringList{"presets", "--colour"} << 2 << ""
                                  << "clusterscope: error:";
  QTest::addRow("bad preset kind") << QStringList{"presets", "gadgets"} << 2 << ""
                                   << "gadgets not in {gpus,links,models,clusters}";
  // An empty value was read as the option not given: a whole calibration
  // ran, or the default model trained.
  QTest::addRow("empty --from-store")
      << QStringList{"calibrate", "--no-save", "--from-store", ""} << 2 << ""
      << "clusterscope: error: --from-store: an empty value";
  QTest::addRow("empty --plan") << QStringList{"run", "--plan", "", "--steps", "1"} << 2 << ""
                                << "clusterscope: error: --plan: an empty value";
  QTest::addRow("empty store") << QStringList{"trace", "stats", ""} << 2 << ""
                               << "clusterscope: error: store: an empty value";
  QTest::addRow("presets gpus") << QStringList{"presets", "gpus"} << 0 << "h100-sxm" << "";
  QTest::addRow("presets clusters") << QStringList{"presets", "clusters"} << 0 << "this-machine" << "";
  QTest::addRow("presets clusters json")
      << QStringList{"presets", "clusters", "--json"} << 0 << "\"name\": \"this-machine\"" << "";
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
  // The engines train on this machine's CPUs; the planner needs them calibrated.
  QTest::addRow("plan for this machine")
      << QStringList{"plan", "--cluster", "this-machine", "--model", "gpt2-small"} << 1 << ""
      << "are planned for once calibrated: `clusterscope calibrate --ranks N`, then the cluster "
         "calibrated-<host>-cpuN";
  QTest::addRow("describe missing file") << QStringList{"describe", "/nonexistent/c.json"} << 1 << ""
                                         << "/nonexistent/c.json: cannot open file";
  QTest::addRow("unknown gpu inline") << QStringList{"describe", "--gpu", "h300"} << 1 << ""
                                      << "unknown GPU preset \"h300\"";
  QTest::addRow("negative nodes") << QStringList{"describe", "--gpu", "h100-sxm", "--nodes", "-3"} << 2
                                  << "" << "--nodes";
  // A whole number reads in decimal, as its range check reads it: "010" was
  // octal (8 nodes) and "0x10" hex.
  QTest::addRow("nodes with a leading zero")
      << QStringList{"describe", "--gpu", "h100-sxm", "--nodes", "010"} << 0 << "10 nodes x 8 GPUs"
      << "";
  QTest::addRow("nodes in hex") << QStringList{"describe", "--gpu", "h100-sxm", "--nodes", "0x10"}
                                << 2 << ""
                                << "--nodes: must be a whole number in decimal digits (got 0x10)";
  QTest::addRow("tp with a fraction")
      << QStringList{"plan", "--cluster", "dgx-a100-64", "--model", "gpt3-13b", "--tp", "8.0"} << 2
      << ""
      << "--tp: must be a whole number in decimal digits (got 8.0)";
  QTest::addRow("batch with a leading zero")
      << QStringList{"plan", "--cluster", "dgx-a100-64",    "--model", "gpt3-13b",
                     "--tp", "8",         "--global-batch", "0128",    "--json"}
      << 0 << "\"global_batch\": 128"
      << "";
  QTest::addRow("run threads past the worker's")
      << QStringList{"run", "--threads", "100000", "--steps", "1"} << 2 << ""
      << "--threads: must be between 1 and 4096 (got 100000)";
  // Fewer than one token: "1 step, 6.15 ms ... compute 0.00 FLOP". The
  // flag is named, by its field's rule (it said "command line:
  // /training_tokens: ...", a field the user never typed).
  QTest::addRow("plan tokens below one")
      << QStringList{"plan",       "--cluster", "dgx-h100-8", "--model",
                     "gpt2-small", "--tokens",  "1e-300"}
      << 2 << ""
      << "clusterscope: error: --tokens: must be 0 (none) or at least 1 (got 1e-300)";
  QTest::addRow("plan tokens past the bound")
      << QStringList{"plan", "--cluster", "dgx-h100-8", "--model", "gpt2-small", "--tokens", "1e19"}
      << 2 << ""
      << "clusterscope: error: --tokens: must be between 0 and 1e+18 (got 1e19)";
  QTest::addRow("validate missing file") << QStringList{"validate", "/nonexistent.json"} << 1 << ""
                                         << "/nonexistent.json: cannot open file";
  // The GPU check profiles its PyTorch program against this plan
  // (scripts/gpu-check.sh): it must stay a plan the planner reads.
  QTest::addRow("the GPU check's plan of its PyTorch program")
      << QStringList{"validate", CS_SOURCE_DIR "/scripts/gpu/torch_ddp_smoke.plan.json"} << 0
      << "torch_ddp_smoke.plan.json: valid plan"
      << "";
  QTest::addRow("calc alone") << QStringList{"calc"} << 2 << "" << "A subcommand is required";
  QTest::addRow("calc one device") << QStringList{"calc", "communication", "-N", "1"} << 0
                                   << "one device exchanges nothing" << "";
  // Small S: the ring's 2(N-1) latencies make it the slower ("0.5x faster here").
  QTest::addRow("calc ring faster")
      << QStringList{"calc", "communication"} << 0 << "(under 2*S whatever N is), 4.3x faster here."
      << "";
  QTest::addRow("calc ring slower")
      << QStringList{"calc", "communication", "-S", "0.001"} << 0
      << "(under 2*S whatever N is), yet it is 2.0x slower here: its 2(N-1) latencies outweigh the "
         "bytes it saves."
      << "";
  QTest::addRow("calc no devices") << QStringList{"calc", "communication", "-N", "0"} << 2 << ""
                                   << "--devices";
  QTest::addRow("calc empty range")
      << QStringList{"calc", "quantize", "--min", "1", "--max", "1"} << 2 << ""
      << "--min must be below --max (got 1 and 1)";
  QTest::addRow("calc range narrower than a float")
      << QStringList{"calc", "quantize", "--min", "0", "--max", "1e-39"} << 2 << ""
      << "are closer than the smallest normal float32 (1.2e-38)";
  QTest::addRow("calc bound subnormal")
      << QStringList{"calc", "quantize", "--min", "0", "--max", "1e-320"} << 2 << ""
      << "--max: must be 0 or at least 2.2250738585072014e-308 in size (got 1e-320)";
  // The bound in full: "at least 2.2e-308 (got 2.2e-308)" refused the value it named.
  QTest::addRow("calc latency below the smallest normal")
      << QStringList{"calc", "communication", "-L", "2.2e-308"} << 2 << ""
      << "--latency: must be 0 or at least 2.2250738585072014e-308 (got 2.2e-308)";
  // Where 0 is refused too, the rule says so ("must be 0 or ..." offered it).
  QTest::addRow("calc bandwidth subnormal")
      << QStringList{"calc", "communication", "-B", "1e-310"} << 2 << ""
      << "--bandwidth: must be between 0.001 and 1000000 (got 1e-310)";
  QTest::addRow("calc batch subnormal")
      << QStringList{"calc", "flops", "--batch", "1e-310"} << 2 << ""
      << "--batch: must be at least 2.2250738585072014e-308 and <= 1000000 (got 1e-310)";
  QTest::addRow("calc article INT4")
      << QStringList{"calc", "quantize", "--bits", "4"} << 2 << ""
      << "--bits 4: the articles' integers are INT8; give --integers unsigned, signed or "
         "symmetric for other widths";
  // Half a sample a batch: "batch 0.5, 500000 iterations".
  QTest::addRow("calc half a sample") << QStringList{"calc", "flops", "--batch", "0.5"} << 2 << ""
                                      << "--batch: must be a whole number (got 0.5)";
  QTest::addRow("calc part of an iteration")
      << QStringList{"calc", "flops", "--iterations", "2.5"} << 2 << ""
      << "--iterations: must be a whole number (got 2.5)";
  QTest::addRow("calc value nan") << QStringList{"calc", "quantize", "-x", "nan"} << 2 << ""
                                  << "--value: is not a number (got \"nan\")";
  QTest::addRow("calc value inf") << QStringList{"calc", "quantize", "-x", "inf"} << 2 << ""
                                  << "--value: must be a finite number (got inf)";
  // No options: the article's own example, as the other two calculators.
  QTest::addRow("calc flops of nothing")
      << QStringList{"calc", "flops"} << 0 << "batch 256, 980 iterations (5 epochs of 50000 samples"
      << "";
  QTest::addRow("calc flops of a transformer")
      << QStringList{"calc", "flops", "--model", "gpt2-small"} << 1 << ""
      << "gpt2-small is a transformer: its training FLOPs per step (and 6PD) are in `clusterscope plan";
  QTest::addRow("calc flops, iterations uncounted")
      << QStringList{"calc", "flops", "--forward-flops", "1e9"} << 1 << ""
      << "give --iterations, or --samples";
  QTest::addRow("calc flops, iterations and epochs")
      << QStringList{"calc", "flops", "--forward-flops", "1e9", "--iterations", "9", "--epochs", "2"}
      << 2 << "" << "--epochs excludes --iterations";
  // Values that made the figures inf or nan, or a number of 66 digits.
  QTest::addRow("calc range near the largest double")
      << QStringList{"calc", "quantize", "--min", "-1e308", "--max", "1e308"} << 2 << ""
      << "--min: must be between -1000000000 and 1000000000 (got -1e308)";
  QTest::addRow("calc bandwidth near zero")
      << QStringList{"calc", "communication", "-S", "1e300", "-B", "1e-300"} << 2 << ""
      << "--megabytes: must be > 0 and <= 1000000000 (got 1e300)";
  QTest::addRow("calc forward FLOPs past any model")
      << QStringList{"calc", "flops", "--forward-flops", "1e300", "--iterations", "1"} << 2 << ""
      << "--forward-flops: must be > 0 and <= 1e+15 (got 1e300)";
  QTest::addRow("calc flops at its bounds")
      << QStringList{"calc", "flops", "--forward-flops", "1e15", "--batch", "1", "--samples",
                     "1e12", "--epochs", "1e4"}
      << 0 << "= 30.0 QFLOP" << "";
  // A part of a pass shorter than one sample: "0 iterations ... = 0.00 FLOP".
  QTest::addRow("calc flops of no sample")
      << QStringList{"calc", "flops", "--epochs", "1e-300"} << 2 << ""
      << "--epochs 1e-300 of 50000 samples trains on no sample: give at least 2e-05 (one sample)";
  QTest::addRow("calc flops of one sample")
      << QStringList{"calc", "flops", "--epochs", "2e-05"} << 0 << "(2e-05 epochs of 50000 samples"
      << "";
  QTest::addRow("calc flops, unknown model")
      << QStringList{"calc", "flops", "--model", "resnet18-cifar"} << 1 << ""
      << "did you mean \"resnet18-cifar10\"?";
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

void TestCli::countsPastAnInt_data() {
  QTest::addColumn<QStringList>("args");  // the flag is the last
  QTest::addColumn<QString>("rule");
  const QString positive = "must be > 0 and <= 2147483647";
  const QString non_negative = "must be between 0 and 2147483647";
  for (const char* flag :
       {"--steps", "--ranks", "--dp", "--tp", "--pp", "--virtual-stages", "--micro-batch",
        "--global-batch", "--slurm-nodes", "--slurm-cpus-per-task"})
    QTest::addRow("run %s", flag) << QStringList{"run", flag} << positive;
  for (const char* flag : {"--global-batch", "--top", "--node-counts"}) {
    QTest::addRow("search %s", flag)
        << QStringList{"search", "--cluster", "dgx-h100-8", "--model", "gpt2-small", flag}
        << positive;
  }
  QTest::addRow("trace stats --threads")
      << QStringList{"trace", "stats", "/nonexistent.db", "--threads"} << non_negative;
  QTest::addRow("trace compare --threads")
      << QStringList{"trace", "compare", "/nonexistent.db", "/nonexistent.db", "--threads"}
      << non_negative;
  QTest::addRow("trace export --rank")
      << QStringList{"trace", "export", "/nonexistent.db", "-o", "/nonexistent.json", "--rank"}
      << non_negative;
  QTest::addRow("calibrate --nics")
      << QStringList{"calibrate", "--nccl-tests", "/nonexistent.log", "--nics"} << positive;
}

// A count past what its int holds said its range on the planner's flags
// (plan --tp), and "Could not convert: --steps = 100000000000" on these.
void TestCli::countsPastAnInt() {
  QFETCH(QStringList, args);
  QFETCH(QString, rule);
  const QString flag = args.last();
  const Run r = run_cli(args << "100000000000");
  QVERIFY2(r.exit_code == 2, qPrintable(QString("exit %1\n%2").arg(r.exit_code).arg(r.err)));
  QVERIFY2(r.err.contains(flag + ": " + rule + " (got 100000000000)"), qPrintable(r.err));
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

// A GPU of no known power (a calibrated CPU's, whose TDP is 0): describe
// and plan say nothing of power and energy, as of a missing price; they
// read "Power: 0.00 W" and "0 kWh".
void TestCli::noPowerKnown_data() {
  QTest::addColumn<int>("watts");
  QTest::addRow("none known") << 0;
  QTest::addRow("known") << 300;
}

void TestCli::noPowerKnown() {
  QFETCH(int, watts);
  QTemporaryDir dir;
  const QString cluster = write_file(
      dir, "c.json",
      QByteArray(R"({"kind": "cluster", "name": "cpu-box", "nodes": 1, "gpus_per_node": 2,
        "intra_node": "pcie4", "gpu": {"name": "box-cpu", "display_name": "a calibrated CPU",
        "memory_gib": 16, "memory_bandwidth_gb_s": 20, "peak_tflops": {"fp32": 0.1},
        "tdp_watts": )") +
          QByteArray::number(watts) + "}}");
  const Run described = run_cli({"describe", cluster});
  QVERIFY2(described.exit_code == 0, qPrintable(described.err));
  QCOMPARE(described.out.contains("Power:"), watts > 0);
  QVERIFY2(!described.out.contains("0.00 W"), qPrintable(described.out));
  const Run planned = run_cli({"plan", "--cluster", cluster, "--model", "gpt2-small", "--precision",
                               "fp32", "--tokens", "1e6"});
  QVERIFY2(planned.exit_code == 0, qPrintable(planned.err));
  QVERIFY2(planned.out.contains("Training run: "), qPrintable(planned.out));
  QCOMPARE(planned.out.contains(" kWh"), watts > 0);
}

void TestCli::describeInlineCluster() {
  const Run r = run_cli({"describe", "--gpu", "a100-80gb", "--nodes", "16", "--gpus-per-node", "8",
                         "--inter-link", "roce-200", "--json"});
  QCOMPARE(r.exit_code, 0);
  const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
  QCOMPARE(o["totals"].toObject()["gpus"].toInt(), 128);
  QCOMPARE(o["cluster"].toObject()["intra_node"].toObject()["name"].toString(), QString("nvlink3"));
  QCOMPARE(o["cluster"].toObject()["inter_node"].toObject()["name"].toString(), QString("roce-200"));

  // A PCIe card's GPUs talk over its PCIe generation: the H100 PCIe's is 5.
  const Run pcie = run_cli({"describe", "--gpu", "h100-pcie", "--nodes", "1", "--gpus-per-node",
                            "4", "--json"});
  QCOMPARE(pcie.exit_code, 0);
  QCOMPARE(QJsonDocument::fromJson(pcie.out.toUtf8())
               .object()["cluster"]
               .toObject()["intra_node"]
               .toObject()["name"]
               .toString(),
           QString("pcie5"));

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
  // A file without a display name is titled by its name (it read " (lab)").
  QVERIFY2(from_file.out.startsWith("lab\n"), qPrintable(from_file.out));
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

  // A plan that reads well but that the planner refuses is not valid: what
  // `plan --plan` says, said here (it said "valid plan").
  const QString refused = write_file(dir, "refused.json", R"([
    {"cluster": "dgx-h100-8", "workload": "llama2-7b", "parallel": {"dp": 16}},
    {"cluster": "dgx-a100-8", "workload": "llama2-7b", "parallel": {"dp": 8},
     "precision": {"compute": "fp8"}}])");
  const Run p = run_cli({"validate", refused});
  QCOMPARE(p.exit_code, 1);
  QVERIFY2(p.err.contains(refused + ": /0/parallel/dp: dp x tp x pp = 16 x 1 x 1 = 16 GPUs"),
           qPrintable(p.err));
  QVERIFY2(p.err.contains(refused + ": /1/precision"), qPrintable(p.err));
  QVERIFY(!p.out.contains("valid"));

  // A global batch that is not a multiple hides none of the rules that need
  // the model, and no problem is said twice.
  const QString rules = write_file(dir, "rules.json", R"({"cluster": "dgx-h100-8",
    "workload": "llama2-7b", "parallel": {"tp": 3, "dp": 1, "global_batch": 7, "micro_batch": 2}})");
  const Run all = run_cli({"validate", rules});
  QCOMPARE(all.exit_code, 1);
  QVERIFY2(all.err.contains(rules + ": /parallel/global_batch: must be a multiple"), qPrintable(all.err));
  QVERIFY2(all.err.contains(rules + ": /parallel/tp: must divide the 32 attention heads"),
           qPrintable(all.err));
  QCOMPARE(all.err.count("/parallel/global_batch"), 1);

  // A key given twice: nlohmann kept the last, silently.
  const QString twice = write_file(dir, "twice.json",
                                   "{\"kind\": \"parallel_plan\",\n \"tp\": 2, \"dp\": 1, \"tp\": 4}");
  const Run t = run_cli({"validate", twice});
  QCOMPARE(t.exit_code, 1);
  QVERIFY2(t.err.contains(twice + ":2:20: invalid JSON: \"tp\" is given twice in one object"),
           qPrintable(t.err));

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

  // A valid plan that does not fit in GPU memory says so, and stays valid
  // (LLaMA-2 70B unsharded on 8 GPUs read "valid plan" alone).
  const QString big = write_file(dir, "big.json",
                                 R"({"cluster": "dgx-h100-8", "workload": "llama2-70b",
                                     "parallel": {"dp": 8}})");
  const QString fits =
      write_file(dir, "fits.json", R"({"cluster": "dgx-h100-8", "workload": "gpt2-small"})");
  const Run plans = run_cli({"validate", "--json", big, fits});
  QCOMPARE(plans.exit_code, 0);
  const QJsonArray checked = QJsonDocument::fromJson(plans.out.toUtf8()).array();
  QCOMPARE(checked[0].toObject()["valid"].toBool(), true);
  const QJsonObject too_big = checked[0].toObject()["does_not_fit"].toArray()[0].toObject();
  QVERIFY(too_big["per_gpu_bytes"].toDouble() > 1e12);
  QVERIFY(too_big["capacity_bytes"].toDouble() < 1e11);
  QVERIFY(!checked[1].toObject().contains("does_not_fit"));
  const Run text = run_cli({"validate", big});
  QVERIFY2(text.out.contains(big +
                             ": valid plan\n  but it does not fit in GPU memory: 1.14 TiB per GPU"),
           qPrintable(text.out));
}

// A calibrated CPU-engine rank's memory rate times its GEMMs' operands
// only, and 1e6 GB/s says none showed: the list printed "1.00 PB/s".
void TestCli::presetsOfCpuEngineRanks() {
  QTemporaryDir dir;
  QFile f(dir.filePath("calibrated.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  const char* rank = R"({"kind": "gpu", "name": "%1", "display_name": "CPU-engine rank",
    "memory_gib": 8, "memory_bandwidth_gb_s": %2, "peak_tflops": {"fp32": 0.2}, "source": "test",
    "efficiency": {"gemm_max": 1, "loops": {"norm_ns": 1.5, "activation_ns": 2}}})";
  f.write(("[" + QString(rank).arg("rank-no-operands").arg(1e6) + ", " +
           QString(rank).arg("rank-operands").arg(29.2) + "]")
              .toUtf8());
  f.close();
  cs::test::ProcessOptions options;
  options.env.insert("CLUSTERSCOPE_USER_PRESETS", dir.path());
  const Run r = run_cli({"presets", "gpus"}, options);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QStringList lines = r.out.split('\n');
  const QString none = lines.filter(QRegularExpression("^rank-no-operands ")).value(0);
  const QString some = lines.filter(QRegularExpression("^rank-operands ")).value(0);
  QVERIFY2(none.contains(QRegularExpression("GiB +- +0\\.2 ")), qPrintable(none));
  QVERIFY2(some.contains(QRegularExpression("GiB +29\\.2 GB/s \\* +0\\.2 ")), qPrintable(some));
  QVERIFY2(!r.out.contains("PB/s"), qPrintable(r.out));
  QVERIFY2(r.out.contains("* CPU-engine presets: the rate their GEMMs' operands move at (- none "
                          "showed)"),
           qPrintable(r.out));
  // The datasheet presets say nothing of it.
  QVERIFY(!run_cli({"presets", "gpus"}).out.contains("CPU-engine presets"));
}

// A user preset file that does not read stops the commands that use the
// presets, naming it; `presets`, the command to look into them with, lists
// the shipped ones under a warning naming it (it stopped too).
void TestCli::presetsListedWhenAUserFileIsBroken() {
  QTemporaryDir dir;
  const QString bad = write_file(dir, "mine.json", "[{");
  cs::test::ProcessOptions options;
  options.env.insert("CLUSTERSCOPE_USER_PRESETS", dir.path());
  const Run listed = run_cli({"presets", "gpus"}, options);
  QVERIFY2(listed.exit_code == 0, qPrintable(listed.err));
  QVERIFY(listed.out.contains("h100-sxm"));
  QVERIFY2(listed.err.startsWith("clusterscope: warning: " + bad + ":1:2: invalid JSON") &&
               listed.err.contains("(the shipped presets are listed without them)"),
           qPrintable(listed.err));
  const Run used = run_cli({"describe", "dgx-a100-8"}, options);
  QCOMPARE(used.exit_code, 1);
  QVERIFY2(used.err.startsWith("clusterscope: error: " + bad + ":1:2: invalid JSON"),
           qPrintable(used.err));
}

// A user's GPU of a shipped name stands in every cluster of that GPU: the
// listing said only "and mine.json", and the datasheet's 80 GiB H100 was
// 94 GiB with nothing to tell why.
void TestCli::presetsSayWhatAUserFileReplaces() {
  QTemporaryDir dir;
  const QString mine = write_file(dir, "mine.json", R"([
    {"kind": "gpu", "name": "h100-sxm", "memory_gib": 94, "memory_bandwidth_gb_s": 3000,
     "peak_tflops": {"fp32": 60, "bf16": 900}, "source": "measured here"},
    {"kind": "link", "name": "nvlink4", "type": "nvlink", "bandwidth_gbps": 3000,
     "latency_us": 2, "source": "nccl-tests here"}])");
  const QString own = write_file(dir, "own.json", R"({"kind": "link", "name": "my-link",
    "type": "pcie", "bandwidth_gbps": 100, "latency_us": 2, "source": "mine"})");
  cs::test::ProcessOptions options;
  options.env.insert("CLUSTERSCOPE_USER_PRESETS", dir.path());
  const Run r = run_cli({"presets", "gpus"}, options);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(
      r.out.contains("  and " + mine + ", in place of the shipped gpu h100-sxm, link nvlink4\n"),
      qPrintable(r.out));
  QVERIFY2(r.out.contains("  and " + own + "\n"), qPrintable(r.out));
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

// A device that never ends (it was read to 512 MiB, a gigabyte of memory,
// before it was refused; given as --cluster, it was "an unknown preset"),
// and a file with a NUL byte in it (whatever followed the NUL went unread
// and the file passed as valid).
void TestCli::endlessOrBinaryJsonIsRefused() {
  Run r = run_cli({"validate", "/dev/zero"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("/dev/zero: is a character device, not a JSON file"), qPrintable(r.err));
  r = run_cli({"plan", "--cluster", "/dev/zero", "--model", "gpt2-small"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("/dev/zero: is a character device, not a JSON file"), qPrintable(r.err));
  QTemporaryDir dir;
  // A list of a million entries that are no documents: the first twenty
  // problems and a count (each was printed: gigabytes for a large file).
  QByteArray many = "[";
  for (int i = 0; i < 1000000; ++i)
    many += "1,";
  many += "1]";
  const QString list = write_file(dir, "many.json", many);
  r = run_cli({"validate", list});
  QCOMPARE(r.exit_code, 1);
  QCOMPARE(r.err.count(": must be an object"), 20);
  QVERIFY2(r.err.contains(list + ": ... and 999981 more invalid documents of the list (1000001 "
                                 "of 1000001)"),
           qPrintable(r.err.right(500)));
  const QString nul = write_file(dir, "nul.json", QByteArray("{\"kind\": \"link\"}\0garbage{{", 26));
  r = run_cli({"validate", nul});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(nul + ":1:17: invalid JSON: a NUL byte"), qPrintable(r.err));
  // UTF-16 (it was "a binary file?"), and a stray byte the parser quotes,
  // said in valid UTF-8 (it was echoed raw).
  const QByteArray utf16 = QByteArray("\xFF\xFE{\0}\0", 6);
  const QString wide = write_file(dir, "wide.json", utf16);
  r = run_cli({"validate", wide});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(wide + ": invalid JSON: UTF-16 text; save it as UTF-8"),
           qPrintable(r.err));
  const QString stray = write_file(dir, "stray.json", QByteArray("{\"kind\": \"Cust\xFF"));
  QProcess p;  // the bytes as written, not decoded
  p.start(CS_BIN_DIR "/clusterscope", {"validate", stray});
  QVERIFY(p.waitForFinished(30000));
  const QByteArray said = p.readAllStandardError();
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(said.contains("Cust\xEF\xBF\xBD") && !said.contains('\xFF'), said.constData());
}


// The seed articles' worked examples, reproduced headless: `calc` with no
// options is the article's example; each row checks one figure of --json.
void TestCli::calcSeedExamples_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QString>("key");  // a JSON pointer into the output
  QTest::addColumn<double>("expected");
  // S = 100 MB, N = 8, B = 10 GB/s, L = 0.1 ms: S*N/B + L*(N-1) = 0.08 + 0.0007.
  QTest::addRow("simple, 10 GB/s") << QStringList{"communication"} << "/simple_seconds" << 0.0807;
  // 2 x 7/8 x 0.01 + 2 x 7 x 1e-4 = 0.0175 + 0.0014.
  QTest::addRow("ring, 10 GB/s") << QStringList{"communication"} << "/ring_seconds" << 0.0189;
  QTest::addRow("simple, 1 GB/s") << QStringList{"communication", "-B", "1"} << "/simple_seconds"
                                  << 0.8007;
  QTest::addRow("ring, 1 GB/s") << QStringList{"communication", "-B", "1"} << "/ring_seconds" << 0.1764;
  QTest::addRow("ring sends 2(N-1)/N S") << QStringList{"communication"}
                                         << "/ring_bytes_sent_per_device" << 1.75e8;
  // [-0.5, 0.8] in INT8: s = 1.3/255, z = 98, 0.3 -> 157, clamped to 127.
  QTest::addRow("scale") << QStringList{"quantize"} << "/scale" << 1.3 / 255;
  QTest::addRow("zero point") << QStringList{"quantize"} << "/zero_point" << 98.0;
  QTest::addRow("0.3 unclamped") << QStringList{"quantize"} << "/values/0/unclamped" << 157.0;
  QTest::addRow("0.3 clamped") << QStringList{"quantize"} << "/values/0/q" << 127.0;
  QTest::addRow("unsigned keeps 157") << QStringList{"quantize", "--integers", "unsigned"}
                                      << "/values/0/q" << 157.0;
  QTest::addRow("unsigned back") << QStringList{"quantize", "--integers", "unsigned"}
                                 << "/values/0/dequantized" << 59 * 1.3 / 255;
  QTest::addRow("signed zero point") << QStringList{"quantize", "--integers", "signed"}
                                     << "/zero_point" << -30.0;
  QTest::addRow("signed 0.3") << QStringList{"quantize", "--integers", "signed"} << "/values/0/q"
                              << 29.0;
  // Symmetric (absmax): [-0.8, 0.8] for [-0.5, 0.8], s = 0.8/127, z = 0:
  // 0.3 -> round(47.6) = 48; -0.8 stays in range at -127.
  QTest::addRow("symmetric scale")
      << QStringList{"quantize", "--integers", "symmetric"} << "/scale" << 0.8 / 127;
  QTest::addRow("symmetric zero point")
      << QStringList{"quantize", "--integers", "symmetric"} << "/zero_point" << 0.0;
  QTest::addRow("symmetric 0.3") << QStringList{"quantize", "--integers", "symmetric"}
                                 << "/values/0/q" << 48.0;
  QTest::addRow("symmetric lowest")
      << QStringList{"quantize", "--integers", "symmetric", "-x", "-0.8"} << "/values/0/q"
      << -127.0;
  QTest::addRow("INT4 levels") << QStringList{"quantize", "--integers", "unsigned", "--bits", "4"}
                               << "/scale" << 1.3 / 15;
  QTest::addRow("range widened to 0") << QStringList{"quantize", "--min", "0.2", "--max", "0.8"}
                                      << "/range_quantized/0" << 0.0;
  QTest::addRow("widened range's scale") << QStringList{"quantize", "--min", "0.2", "--max", "0.8"}
                                         << "/scale" << 0.8 / 255;
  // ResNet-18 on CIFAR-10, batch 256, 5 epochs: ceil(50000/256) = 196 a
  // pass, 980 in all, the last of each pass 80 images; 75,046,912 forward
  // FLOPs x 3 x 50 000 x 5 (x 3 x 256 x 980 counted 880 images too many).
  QTest::addRow("iterations") << QStringList{"flops", "--model", "resnet18-cifar10"} << "/iterations"
                              << 980.0;
  // 2.5 epochs of 1000 samples in batches of 256: two passes of 4, then
  // 500 samples in 2 ("2.5 iterations" of 100 samples it said).
  QTest::addRow("part of an epoch")
      << QStringList{"flops", "--samples", "1000", "--batch", "256", "--epochs", "2.5"}
      << "/iterations" << 10.0;
  // 1.1 - 1 is 0.10000000000000009 in a double: 11 iterations, not 12.
  QTest::addRow("a tenth of an epoch")
      << QStringList{"flops", "--samples", "10", "--batch", "1", "--epochs", "1.1"} << "/iterations"
      << 11.0;
  QTest::addRow("part of an epoch's samples")
      << QStringList{"flops", "--samples", "1000", "--batch", "256", "--epochs", "2.5"}
      << "/samples_trained" << 2500.0;
  QTest::addRow("training FLOPs") << QStringList{"flops", "--model", "resnet18-cifar10"}
                                  << "/training_flops" << 75046912.0 * 3 * 50000 * 5;
  QTest::addRow("partial last batch") << QStringList{"flops", "--forward-flops", "1e9", "--samples",
                                                     "1000", "--epochs", "2", "--batch", "300"}
                                      << "/training_flops" << 6e12;
  QTest::addRow("the article's x2") << QStringList{"flops", "--model", "resnet18-cifar10"}
                                    << "/article_training_flops" << 75046912.0 * 2 * 256 * 980;
  QTest::addRow("batch given") << QStringList{"flops", "--model", "resnet18-cifar10", "--batch", "128"}
                               << "/iterations" << 5.0 * 391;
  QTest::addRow("given figures") << QStringList{"flops", "--forward-flops", "1e9", "--batch", "10",
                                                "--iterations", "100"}
                                 << "/training_flops" << 3e12;
}

void TestCli::calcSeedExamples() {
  QFETCH(QStringList, args);
  QFETCH(QString, key);
  QFETCH(double, expected);
  const Run r = run_cli(QStringList{"calc"} + args + QStringList{"--json"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QJsonValue v = QJsonDocument::fromJson(r.out.toUtf8()).object();
  for (const QString& part : key.split('/', Qt::SkipEmptyParts))
    v = v.isArray() ? v.toArray().at(part.toInt()) : v.toObject().value(part);
  QVERIFY2(v.isDouble(), qPrintable(key + " in " + r.out));
  QVERIFY2(std::fabs(v.toDouble() - expected) <= 1e-9 * std::max(1.0, std::fabs(expected)),
           qPrintable(QString("%1 = %2, expected %3").arg(key).arg(v.toDouble(), 0, 'g', 12)
                          .arg(expected, 0, 'g', 12)));
}

// What a user reads: the figures, the clamping and why it happens.
void TestCli::calcText() {
  Run r = run_cli({"calc", "communication"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("S*N/B + L*(N-1)          80.7 ms"), qPrintable(r.out));
  QVERIFY2(r.out.contains("2(N-1)/N*S/B + 2(N-1)*L  18.9 ms"), qPrintable(r.out));
  QVERIFY2(r.out.contains("a ring sends 175 MB per device"), qPrintable(r.out));
  r = run_cli({"calc", "quantize"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("zero point z = round(-min/s) = 98"), qPrintable(r.out));
  QVERIFY2(r.out.contains("scale s = (max - min)/(2^8 - 1) = 0.00509804"), qPrintable(r.out));
  QVERIFY2(r.out.contains("0.3             157  127"), qPrintable(r.out));
  QVERIFY2(r.out.contains("clamped"), qPrintable(r.out));
  QVERIFY2(r.out.contains("stored as a signed int8 the values above 0.147843 overflow"), qPrintable(r.out));
  r = run_cli({"calc", "quantize", "--min", "0.2", "--max", "0.8", "--integers", "signed"});
  QVERIFY2(r.out.contains("INT8 of [0.2, 0.8], widened to [0, 0.8] so that 0 stays exact"), qPrintable(r.out));
  QVERIFY2(r.out.contains("zero point z = round(-min/s) - 128 = -128"), qPrintable(r.out));
  // A narrow range's scale in significant digits: six decimals gave 0.000008
  // (and errors of 0.000000).
  r = run_cli({"calc", "quantize", "--min", "0", "--max", "0.002", "-x", "0.001"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("= 7.84314e-06\n"), qPrintable(r.out));
  QVERIFY2(r.out.contains("0.000996078"), qPrintable(r.out));  // 128 clamped to 127: x' = 127 s
  r = run_cli({"calc", "flops", "--model", "resnet18-cifar10"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("batch 256, 980 iterations (5 epochs of 50000 samples"), qPrintable(r.out));
  QVERIFY2(r.out.contains("= 56.3 TFLOP"), qPrintable(r.out));
  QVERIFY2(r.out.contains("The articles' forward x 2 (forward + backward) x batch x iterations "
                           "gives 37.7 TFLOP"),
           qPrintable(r.out));
  QVERIFY2(r.out.contains("the last, partial batch of each epoch counts as a full one"),
           qPrintable(r.out));
  // One of each, said as one ("1 iterations", "1 samples").
  r = run_cli({"calc", "flops", "--forward-flops", "1e9", "--iterations", "1"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("batch 256, 1 iteration\n"), qPrintable(r.out));
  r = run_cli({"calc", "flops", "--forward-flops", "1e9", "--samples", "1", "--batch", "1"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("batch 1, 1 iteration (1 epoch of 1 sample, "), qPrintable(r.out));
}
void TestCli::standardInputDocuments_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QByteArray>("input");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("stdout_has");
  QTest::addColumn<QString>("stderr_has");
  const QByteArray cluster = R"({"name": "lab", "nodes": 2, "gpus_per_node": 4,
    "gpu": "l40s", "intra_node": "pcie4", "inter_node": "roce-100", "nics_per_node": 1})";
  const QByteArray plan =
      R"({"cluster": "dgx-h100-8", "workload": "llama2-7b", "parallel": {"dp": 8}})";
  QTest::addRow("validate") << QStringList{"validate", "-"} << cluster << 0
                            << "standard input: valid cluster"
                            << "";
  QTest::addRow("validate with a file")
      << QStringList{"validate", "-", "FILE"} << cluster << 0 << "standard input: valid cluster"
      << "";
  QTest::addRow("validate syntax error")
      << QStringList{"validate", "-"} << QByteArray("{\n \"nodes\": 2,,\n}") << 1 << ""
      << "standard input:2:13: invalid JSON";
  QTest::addRow("validate field error")
      << QStringList{"validate", "-"}
      << QByteArray(R"({"kind": "cluster", "name": "c", "nodes": 0})") << 1 << ""
      << "standard input: /nodes: must be";
  QTest::addRow("describe") << QStringList{"describe", "-"} << cluster << 0
                            << "2 nodes x 4 GPUs = 8 x NVIDIA L40S 48GB"
                            << "";
  // Estimated; it does not fit (exit status 4).
  QTest::addRow("plan --plan") << QStringList{"plan", "--plan", "-"} << plan << 4 << "LLaMA-2 7B"
                               << "";
  QTest::addRow("plan --cluster") << QStringList{"plan", "--cluster", "-", "--model", "gpt2-small"}
                                  << cluster << 0 << "lab"
                                  << "";
  QTest::addRow("plan --plan broken")
      << QStringList{"plan", "--plan", "-"} << QByteArray("{\"cluster\": ") << 1 << ""
      << "standard input:1:12: invalid JSON";
  QTest::addRow("plan --model workload error")
      << QStringList{"plan", "--cluster", "dgx-h100-8", "--model", "-"}
      << QByteArray(R"({"name": "m", "layers": 0})") << 1 << ""
      << "standard input: /layers";
  QTest::addRow("twice: --plan and --cluster")
      << QStringList{"plan", "--plan", "-", "--cluster", "-"} << plan << 2 << ""
      << "--cluster -: standard input is read for --plan already, and it can be read once";
  QTest::addRow("twice: --cluster and --model")
      << QStringList{"plan", "--cluster", "-", "--model", "-"} << cluster << 2 << ""
      << "--model -: standard input is read for --cluster already";
  QTest::addRow("twice: validate") << QStringList{"validate", "-", "-"} << cluster << 2 << ""
                                   << "validate: - (standard input) is named more than once";
  // An nccl-tests log as every document ("-: cannot open").
  QFile log(QStringLiteral(CS_DATA_DIR "/nccl-tests/all_reduce_perf_1x8_h100.log"));
  QVERIFY(log.open(QIODevice::ReadOnly));
  const QByteArray nccl = log.readAll();
  const QStringList calibrate{"calibrate", "--link-name",  "nvl-lab",    "--link-type", "nvlink",
                              "--no-save", "--collective", "all_reduce", "--nccl-tests"};
  QTest::addRow("calibrate --nccl-tests")
      << calibrate + QStringList{"-"} << nccl << 0
      << "standard input: all_reduce, 8 ranks on 1 host, 18 sizes"
      << "";
  QTest::addRow("twice: --nccl-tests") << calibrate + QStringList{"-", "-"} << nccl << 2 << ""
                                       << "--nccl-tests -: standard input is read for "
                                          "--nccl-tests already";
}

// "-" reads the JSON document from standard input, once; errors name it
// "standard input" as they name a file.
void TestCli::standardInputDocuments() {
  QFETCH(QStringList, args);
  QFETCH(QByteArray, input);
  QFETCH(int, code);
  QFETCH(QString, stdout_has);
  QFETCH(QString, stderr_has);
  QTemporaryDir dir;
  const QString file = write_file(dir, "p.json", R"({"kind": "parallel_plan", "dp": 8, "tp": 8})");
  args.replaceInStrings("FILE", file);
  cs::test::ProcessOptions options;
  options.input = input;
  const Run r = run_cli(args, options);
  QVERIFY2(r.exit_code == code, qPrintable(QString::number(r.exit_code) + "\n" + r.err));
  QVERIFY2(r.out.contains(stdout_has), qPrintable(r.out));
  QVERIFY2(r.err.contains(stderr_has), qPrintable(r.err));
  // A usage error comes before any result.
  if (code == 2) QVERIFY2(r.out.isEmpty(), qPrintable(r.out));
  if (args.contains(file))
    QVERIFY2(r.out.contains(file + ": valid parallel_plan"), qPrintable(r.out));
}

void TestCli::jsonErrorOnStandardOutput_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("message");  // on stderr, and in the JSON's "error"
  QTest::addRow("plan of an unknown model")
      << QStringList{"plan", "--cluster", "dgx-h100-8", "--model", "llama9", "--json"} << 1
      << "unknown model preset";
  QTest::addRow("trace info of a missing file")
      << QStringList{"trace", "info", "/nonexistent/run.db", "--json"} << 1
      << "/nonexistent/run.db";
  QTest::addRow("usage error of a recognised command")
      << QStringList{"plan", "--json", "--tp", "0"} << 2 << "--tp: must be > 0";
  QTest::addRow("standard input twice") << QStringList{"validate", "-", "-", "--json"} << 2
                                        << "validate: - (standard input) is named more than once";
  QTest::addRow("an option given twice")
      << QStringList{"plan", "--cluster", "dgx-h100-8", "--model", "gpt2-small",
                     "--tp", "2",         "--tp",       "4",       "--json"}
      << 2 << "--tp is given 2 times: give it once";
}

// Under --json, a failure is a JSON object on stdout too (a script parsing
// stdout got nothing); the text stays on stderr.
void TestCli::jsonErrorOnStandardOutput() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, message);
  cs::test::ProcessOptions options;
  options.input = "{}";
  const Run r = run_cli(args, options);
  QCOMPARE(r.exit_code, code);
  QVERIFY2(r.err.contains("clusterscope: error: " + message), qPrintable(r.err));
  QJsonParseError parse{};
  const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8(), &parse).object();
  QVERIFY2(parse.error == QJsonParseError::NoError, qPrintable(r.out));
  QCOMPARE(j.size(), 2);
  QCOMPARE(j["exit_code"].toInt(), code);
  const QString error = j["error"].toString();
  QVERIFY2(!error.isEmpty() && error.contains(message), qPrintable(r.out));
  QVERIFY2(r.err.contains(error), qPrintable(r.err + "\n" + error));
  // Without --json, stdout stays empty.
  QStringList text_args = args;
  text_args.removeAll("--json");
  const Run text = run_cli(text_args, options);
  QCOMPARE(text.exit_code, code);
  QVERIFY2(text.out.isEmpty(), qPrintable(text.out));
}

// A plan that cannot run prints its own report (with "problems") before it
// fails: stdout stays that one document, with no error object after it.
void TestCli::jsonErrorAfterAReport() {
  const Run r =
      run_cli({"plan", "--cluster", "dgx-h100-8", "--model", "llama2-7b", "--tp", "3", "--json"});
  QCOMPARE(r.exit_code, 1);
  QJsonParseError parse{};
  const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8(), &parse).object();
  QVERIFY2(parse.error == QJsonParseError::NoError, qPrintable(r.out));
  QCOMPARE(j["valid"].toBool(true), false);
  QVERIFY(!j.contains("error"));
  QVERIFY2(r.err.contains("clusterscope: error: the plan cannot run"), qPrintable(r.err));
}

// docs/cli.md holds every command's --help as the program prints it: an
// option added, renamed or dropped without the reference fails here (the
// docs named a `--per-rank` that never existed, and left 30 options out).
void TestCli::referenceIsCurrent() {
  QFile file(CS_SOURCE_DIR "/docs/cli.md");
  QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
  const QString text = QString::fromUtf8(file.readAll());
  const QRegularExpression section(
      "^## clusterscope([^\n]*)\n\n```\n(.*?)```$",
      QRegularExpression::MultilineOption | QRegularExpression::DotMatchesEverythingOption);
  int sections = 0;
  for (auto m = section.globalMatch(text); m.hasNext();) {
    const QRegularExpressionMatch one = m.next();
    const QStringList command = one.captured(1).split(' ', Qt::SkipEmptyParts);
    const Run r = run_cli(command + QStringList{"--help"});
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(r.out == one.captured(2),
             qPrintable("docs/cli.md: `clusterscope " + command.join(' ') +
                        " --help` differs from the program; run scripts/cli-reference.sh "
                        "build/bin/clusterscope > docs/cli.md\n" +
                        r.out));
    ++sections;
  }
  // Every command has its section (the reference lists them by hand).
  QCOMPARE(sections, 21);
}

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
