// `clusterscope plan` and `clusterscope search` as a user runs them: the
// documented --json keys, the readable breakdown, plan documents with flags
// over them, and the one-line errors that name the control to change.

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

#include "../named_pipe_writer.h"
#include "../process_run.h"

namespace {

using Run = cs::test::ProcessRun;
using cs::test::run_cli;

QJsonObject parse(const Run& r) {
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &error);
  if (error.error != QJsonParseError::NoError)
    qFatal("not JSON: %s\n%s", qPrintable(error.errorString()), qPrintable(r.out));
  return doc.object();
}

const QStringList kGpt3Plan = {"plan",
                               "--cluster",
                               "dgx-a100-1024",
                               "--model",
                               "gpt3-175b",
                               "--tp",
                               "8",
                               "--pp",
                               "8",
                               "--virtual-stages",
                               "3",
                               "--sequence-parallel",
                               "--recompute",
                               "selective",
                               "--global-batch",
                               "1536",
                               "--zero",
                               "1"};

}  // namespace

class TestPlanCli : public QObject {
  Q_OBJECT

 private slots:
  void planJsonKeys();
  void planText();
  void planErrors_data();
  void planErrors();
  void precisionACalibrationDidNotSweep_data();
  void precisionACalibrationDidNotSweep();
  void seedZeroExample_data();
  void seedZeroExample();
  void planDocument();
  void documentsOnNamedPipes_data();
  void documentsOnNamedPipes();
  void brokenRulesNameThePlanFile();
  void brokenRulesSayFlagsChangedThePlanFile_data();
  void brokenRulesSayFlagsChangedThePlanFile();
  void sharesOfAPeakNoDeviceReachesAreRefused_data();
  void sharesOfAPeakNoDeviceReachesAreRefused();
  void planDoesNotFit();
  void planHelpListsFlags();
  void searchJson();
  void searchNamesWhatServingPlansTake_data();
  void searchNamesWhatServingPlansTake();
  void searchText();
  void searchClusterSizes();
  void searchErrors_data();
  void searchErrors();
  void searchInterrupted();
  void planWritesItsTimeline();
};

void TestPlanCli::planJsonKeys() {
  const Run r = run_cli(kGpt3Plan + QStringList{"--json"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QJsonObject o = parse(r);
  QCOMPARE(o["valid"].toBool(), true);
  QCOMPARE(o["gpus"].toInt(), 1024);
  const QJsonObject memory = o["memory"].toObject();
  double sum = 0;
  for (const char* part :
       {"weights_bytes", "gradients_bytes", "optimizer_state_bytes", "activations_bytes",
        "activation_workspace_bytes", "communication_buffers_bytes", "framework_reserve_bytes",
        "fragmentation_bytes"}) {
    QVERIFY2(memory.contains(part), part);
    sum += memory[part].toDouble();
  }
  QVERIFY(std::fabs(sum / memory["per_gpu_bytes"].toDouble() - 1) < 1e-9);
  QVERIFY(memory["fits"].toBool());
  QCOMPARE(memory["capacity_bytes"].toDouble(), 80.0 * 1024 * 1024 * 1024);
  const QJsonObject time = o["time"].toObject();
  double parts = 0;
  for (const char* part :
       {"forward_seconds", "backward_seconds", "recompute_seconds", "optimizer_seconds",
        "tp_communication_seconds", "pp_communication_seconds", "pipeline_bubble_seconds",
        "dp_communication_seconds", "zero_gather_seconds", "collective_wait_seconds"}) {
    QVERIFY2(time.contains(part), part);
    parts += time[part].toDouble();
  }
  QVERIFY(std::fabs(parts / time["step_seconds"].toDouble() - 1) < 1e-9);
  const QJsonObject th = o["throughput"].toObject();
  QVERIFY(th["tokens_per_second"].toDouble() > 0);
  QVERIFY(th["model_tflops_per_gpu"].toDouble() > 0);
  QVERIFY(th["mfu"].toDouble() > 0.2 && th["mfu"].toDouble() < 0.8);
  QVERIFY(o["training"].toObject()["gpu_hours"].toDouble() > 0);
  QVERIFY(o["seed_communication"].toObject()["simple_seconds"].toDouble() > 0);
  QCOMPARE(o["plan"].toObject()["parallel"].toObject()["dp"].toInt(), 16);  // 1024 / (8 x 8)
  QVERIFY(o["training"].toObject()["flops_6pd"].toDouble() > 0);
  // A model with no tokens to train on has no training run: null, where
  // zeros read "0 days, $0"; an inference plan has no 6PD.
  const Run untrained = run_cli({"plan", "--cluster", "dgx-a100-64", "--model", "gpt2-xl",
                                 "--precision", "fp16", "--micro-batch", "4", "--json"});
  QVERIFY2(untrained.exit_code == 0, qPrintable(untrained.err));
  QVERIFY2(parse(untrained)["training"].isNull(), qPrintable(untrained.out));
  const Run serving = run_cli({"plan", "--cluster", "dgx-a100-64", "--model", "gpt3-175b", "--tp",
                               "8", "--pp", "8", "--precision", "int8", "--json"});
  QVERIFY2(serving.exit_code == 0, qPrintable(serving.err));
  const QJsonObject passes = parse(serving)["training"].toObject();
  QVERIFY2(passes["steps"].toDouble() > 0 && passes["flops_6pd"].isNull(), qPrintable(serving.out));
  // A generic model has no tokens to multiply: no 6PD, where it read 0.
  const Run resnet = run_cli({"plan", "--cluster", "dgx-a100-8", "--model", "resnet50", "--json"});
  QVERIFY2(resnet.exit_code == 0, qPrintable(resnet.err));
  const QJsonObject epochs = parse(resnet)["training"].toObject();
  QVERIFY2(epochs["steps"].toDouble() > 0 && epochs["flops_6pd"].isNull(), qPrintable(resnet.out));
  // Nor a rate of tokens: the key held its images' rate.
  const QJsonObject images = parse(resnet)["throughput"].toObject();
  QVERIFY2(images["tokens_per_second"].isNull() && images["samples_per_second"].toDouble() > 0,
           qPrintable(resnet.out));
  const QJsonObject tokens = parse(serving)["throughput"].toObject();
  QCOMPARE(tokens["tokens_per_second"].toDouble(),
           tokens["samples_per_second"].toDouble() * 2048);  // GPT-3's sequence
}

void TestPlanCli::planText() {
  // Another GPU in a preset's nodes: the preset's price was its own GPU's
  // (an A100 price on H100s costed the run 40 % low). It is left out, and
  // said; --price gives the new one.
  const QStringList swapped = {"plan",     "--cluster", "dgx-a100-8", "--gpu",
                               "h100-sxm", "--model",   "llama2-7b",  "--tp",
                               "8",        "--tokens",  "1e10",       "--json"};
  const Run no_price = run_cli(swapped);
  QVERIFY2(no_price.exit_code == 0, qPrintable(no_price.err));
  QCOMPARE(parse(no_price)["training"].toObject()["cost_usd"].toDouble(), 0.0);
  QVERIFY2(
      no_price.err.contains("--gpu h100-sxm replaces the a100-80gb of dgx-a100-8, whose price"),
      qPrintable(no_price.err));
  const Run priced = run_cli(swapped + QStringList{"--price", "3"});
  const QJsonObject training = parse(priced)["training"].toObject();
  QCOMPARE(training["cost_usd"].toDouble(), 3 * training["gpu_hours"].toDouble());
  QVERIFY2(!priced.err.contains("replaces"), qPrintable(priced.err));

  const Run r = run_cli(kGpt3Plan);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  for (const char* text :
       {"GPT-3 175B on DGX A100 pod, 128 nodes (1024 GPUs)", "dp 16 x tp 8 x pp 8",
        "Memory per GPU", "fits", "Step time", "pipeline bubble", "Throughput", "MFU",
        "Training run", "GPU-hours", "T = S*N/B + L*(N-1)", "ring all-reduce"}) {
    QVERIFY2(r.out.contains(text), qPrintable(QString(text) + "\n" + r.out));
  }
  // The seed article's line gives S in the decimal bytes B is in (it gave
  // GiB beside GB/s, so that its sum could not be redone), and the
  // planner's own figure beside its flat rings: the one the step uses.
  const Run xl = run_cli({"plan", "--cluster", "dgx-a100-64", "--nodes", "4", "--model", "gpt2-xl",
                          "--precision", "fp16", "--micro-batch", "4"});
  QVERIFY2(xl.exit_code == 0, qPrintable(xl.err));
  QVERIFY2(xl.out.contains("S = 3.12 GB (2.90 GiB), N = 32, B = 25.0 GB/s"), qPrintable(xl.out));
  const QRegularExpressionMatch reduction =
      QRegularExpression("data-parallel reduction (\\S+ \\S+) in").match(xl.out);
  QVERIFY2(reduction.hasMatch(), qPrintable(xl.out));
  QVERIFY2(xl.out.contains("the planner's data-parallel all-reduce (by link tier, bucketed) " +
                           reduction.captured(1)),
           qPrintable(xl.out));
  // With ZeRO-3 it says what the planner's figure holds: not one all-reduce.
  const Run zero3 = run_cli({"plan", "--cluster", "dgx-a100-64", "--model", "gpt2-xl",
                             "--precision", "fp16", "--micro-batch", "4", "--zero", "3"});
  QVERIFY2(zero3.exit_code == 0, qPrintable(zero3.err));
  QVERIFY2(zero3.out.contains("the planner's reduce-scatter of every micro-batch's gradients and "
                              "the weights' all-gathers, forward and backward (by link tier, "
                              "bucketed) "),
           qPrintable(zero3.out));
  // ... and its gathers hide behind forward as well (it read "data-parallel
  // reduction ... hidden behind backward").
  QVERIFY2(zero3.out.contains(QRegularExpression(
               "\n  data-parallel gathers and reductions \\S+ \\S+ in \\d+ buckets, \\S+ \\S+ "
               "hidden behind forward and backward\n")),
           qPrintable(zero3.out));
  // --dropout over a preset: LLaMA-2 7B's unfused activations with dropout
  // keep its masks and the dropped scores, twice those without (97.6 against
  // 48.6 GiB); a value other than on or off is refused.
  auto activations = [](const Run& run) {
    return QJsonDocument::fromJson(run.out.toUtf8())["memory"]["activations_bytes"].toDouble() /
           (1 << 30);
  };
  const QStringList llama = {
      "plan", "--cluster", "dgx-h100-8", "--model", "llama2-7b", "--no-flash-attention", "--json"};
  const Run without = run_cli(llama);
  const Run with = run_cli(llama + QStringList{"--dropout", "on"});
  // Neither fits one H100 without ZeRO (exit status 4), both estimated.
  QVERIFY2(without.exit_code == 4 && with.exit_code == 4, qPrintable(without.err + with.err));
  QVERIFY2(std::fabs(activations(without) - 48.61) < 0.01, qPrintable(without.out.left(400)));
  QVERIFY2(std::fabs(activations(with) - 97.63) < 0.01, qPrintable(with.out.left(400)));
  const Run bad =
      run_cli({"plan", "--cluster", "dgx-h100-8", "--model", "llama2-7b", "--dropout", "maybe"});
  QVERIFY2(bad.exit_code == 2 && bad.err.contains("--dropout: must be on or off (got maybe)"),
           qPrintable(bad.err));
  // One step is said so ("1 steps").
  const Run one =
      run_cli({"plan", "--cluster", "dgx-h100-8", "--model", "gpt2-small", "--tokens", "1000"});
  QVERIFY2(one.exit_code == 0, qPrintable(one.err));
  QVERIFY2(one.out.contains("Training run: 1 step, "), qPrintable(one.out));
  QVERIFY2(one.out.contains(" GPUs, 1 micro-batch per replica per step"), qPrintable(one.out));
  // MFU and HFU say which peak they are of: an FP8 plan's is twice the
  // 16-bit one, so its MFU reads low beside a faster step. Fused causal
  // attention puts hardware FLOPs below model FLOPs, and the line says why.
  const Run fp8 = run_cli({"plan", "--cluster", "dgx-h100-64", "--model", "llama2-70b", "--tp", "8",
                           "--pp", "4", "--zero", "1", "--global-batch", "64",
                           "--sequence-parallel", "--precision", "fp8"});
  QVERIFY2(fp8.exit_code == 0, qPrintable(fp8.err));
  QVERIFY2(fp8.out.contains("(both of the fp8 dense peak, 1978.9 TFLOP/s per GPU; hardware FLOPs "
                            "below model FLOPs: fused causal attention computes half"),
           qPrintable(fp8.out));
  const Run unfused = run_cli({"plan", "--cluster", "dgx-h100-64", "--model", "llama2-70b", "--tp",
                               "8", "--pp", "4", "--zero", "1", "--global-batch", "64",
                               "--no-flash-attention", "--recompute", "full"});
  QVERIFY2(unfused.exit_code == 0, qPrintable(unfused.err));
  QVERIFY2(unfused.out.contains("(both of the bf16 dense peak, 989.4 TFLOP/s per GPU)\n"),
           qPrintable(unfused.out));
  // INT4 weights compute at INT8's rate, an integer rate in OP/s.
  const Run int4 =
      run_cli({"plan", "--cluster", "dgx-h100-8", "--model", "llama2-7b", "--precision", "int4"});
  QVERIFY2(int4.exit_code == 0, qPrintable(int4.err));
  QVERIFY2(int4.out.contains("(both of the int8 dense peak, 1978.9 TOP/s per GPU"),
           qPrintable(int4.out));
  // A generic model has no tokens: its throughput is in samples alone (it
  // read "123 ktokens/s, 123 ksamples/s" for ResNet-18's images), and one
  // bucket is said so ("in 1 buckets").
  const Run images = run_cli({"plan", "--cluster", "dgx-a100-8", "--model", "resnet18-cifar10",
                              "--global-batch", "256", "--micro-batch", "32"});
  QVERIFY2(images.exit_code == 0, qPrintable(images.err));
  QVERIFY2(images.out.contains(QRegularExpression("\nThroughput: \\S+ \\S*samples/s\n")),
           qPrintable(images.out));
  QVERIFY2(!images.out.contains("tokens/s"), qPrintable(images.out));
  QVERIFY2(images.out.contains(" in 1 bucket, "), qPrintable(images.out));
  QVERIFY2(
      r.out.contains(QRegularExpression("\nThroughput: \\S+ \\S*tokens/s, \\S+ \\S*samples/s\n")),
      qPrintable(r.out));
  // An inference plan passes the tokens forward once: no training run, no
  // 6PD (training's forward and backward).
  const Run serving = run_cli({"plan", "--cluster", "dgx-a100-64", "--model", "gpt3-175b", "--tp",
                               "8", "--pp", "8", "--precision", "int8"});
  QVERIFY2(serving.exit_code == 0, qPrintable(serving.err));
  QVERIFY2(serving.out.contains("The workload's tokens, one forward pass each: "),
           qPrintable(serving.out));
  QVERIFY2(!serving.out.contains("Training run") && !serving.out.contains("6PD"),
           qPrintable(serving.out));
  // Its 8 stages hold different shares (the first the embedding): the
  // saving is the most loaded GPU's, said so (it read "per GPU").
  QVERIFY2(serving.out.contains(QRegularExpression(
               "; saves \\S+ \\S+ of weights on the most loaded GPU against bf16\n")),
           qPrintable(serving.out));
  // The worked example's figures in significant digits, as `calc quantize`
  // gives them (six decimals read 0.005098 and an error of 0.0008).
  QVERIFY2(serving.out.contains("scale 0.00509804, zero point -30; 0.3 -> 29 -> 0.300784 "
                                "(error 0.000784314)"),
           qPrintable(serving.out));
}

// A calibration of the CPU engine that swept fp32 alone (calibrate
// --precisions fp32) gives no bf16 rate; the engine computes in bf16 all the
// same. plan and search said "has no bf16 path", as of a V100, and named no
// way to the rate; they say the calibration left it out, and how to measure
// it. A precision the engine has no path for is said as before.
void TestPlanCli::precisionACalibrationDidNotSweep_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("stderr_has");
  const QStringList plan = {"plan", "--cluster", "calibrated-box-cpu2", "--model", "gpt2-small",
                            "--dp", "2"};
  QTest::addRow("plan, bf16 taken when none is given")
      << plan << 2
      << "--precision: the CPU-engine rank (1 of 2 on box) was calibrated without bf16, the "
         "precision a plan takes when none is given: give one it has (fp32, tf32), or calibrate "
         "again with --precisions bf16 to measure it";
  QTest::addRow("plan, bf16 asked for")
      << plan + QStringList{"--precision", "bf16"} << 1
      << "/precision/compute: CPU-engine rank (1 of 2 on box) was calibrated without bf16 (its "
         "preset gives no bf16 rate): calibrate again with --precisions bf16 to measure it";
  QTest::addRow("search, bf16 asked for")
      << QStringList{"search",         "--cluster", "calibrated-box-cpu2", "--model", "gpt2-small",
                     "--global-batch", "4",         "--precision",         "bf16"}
      << 1
      << "search: the CPU-engine rank (1 of 2 on box) was calibrated without bf16 (its preset "
         "gives no bf16 rate): calibrate again with --precisions bf16 to measure it";
  QTest::addRow("plan, fp16, which the engine does not run")
      << plan + QStringList{"--precision", "fp16"} << 1
      << "/precision/compute: CPU-engine rank (1 of 2 on box) has no fp16 path";
  QTest::addRow("plan, fp32, calibrated") << plan + QStringList{"--precision", "fp32"} << 0 << "";
}

void TestPlanCli::precisionACalibrationDidNotSweep() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, stderr_has);
  QTemporaryDir presets;
  QVERIFY(presets.isValid());
  QFile file(presets.filePath("calibrated-box-cpu.json"));
  QVERIFY(file.open(QIODevice::WriteOnly));
  // What `clusterscope calibrate --ranks 2 --precisions fp32` saves, in short.
  file.write(R"json([{"kind": "gpu", "name": "calibrated-box-cpu2",
    "display_name": "CPU-engine rank (1 of 2 on box)", "vendor": "CPU", "architecture": "cpu",
    "memory_gib": 8, "memory_bandwidth_gb_s": 16,
    "peak_tflops": {"fp32": 0.03, "tf32": 0.03, "bf16": 0, "fp16": 0, "fp8": 0, "int8": 0},
    "source": "clusterscope calibrate on box"},
   {"kind": "cluster", "name": "calibrated-box-cpu2",
    "display_name": "This machine, CPU engine, 2 ranks (calibrated)", "nodes": 1,
    "gpus_per_node": 2, "gpu": "calibrated-box-cpu2", "intra_node": "pcie4",
    "source": "clusterscope calibrate on box"}])json");
  file.close();
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("CLUSTERSCOPE_USER_PRESETS", presets.path());
  const Run r = run_cli(args, {{}, env});
  QVERIFY2(r.exit_code == code, qPrintable(QString::number(r.exit_code) + ": " + r.err));
  QVERIFY2(r.err.contains(stderr_has), qPrintable(r.err));
  if (code != 0) QVERIFY2(!r.err.contains(" has no bf16 path"), qPrintable(r.err));
}

void TestPlanCli::planErrors_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("stderr_has");
  const QStringList base = {"plan", "--cluster", "dgx-a100-64", "--model", "gpt3-175b"};
  QTest::addRow("tp not dividing heads")
      << base + QStringList{"--tp", "5", "--pp", "8"} << 1
      << "/parallel/tp: must divide the 96 attention heads of GPT-3 175B (got 5)";
  QTest::addRow("pp not dividing layers") << base + QStringList{"--tp", "8", "--pp", "7"} << 1
                                          << "/parallel/pp: must divide the 96 layers";
  QTest::addRow("fp8 on A100") << base + QStringList{"--tp", "8", "--pp", "8", "--precision", "fp8"}
                               << 1 << "/precision/compute: NVIDIA A100 SXM4 80GB has no fp8 path";
  QTest::addRow("global batch") << base +
                                       QStringList{"--tp", "8", "--pp", "4", "--global-batch", "3"}
                                << 1
                                << "/parallel/global_batch: must be a multiple of dp x micro_batch";
  QTest::addRow("tp across nodes") << base + QStringList{"--tp", "16", "--pp", "4"} << 1
                                   << "tensor parallelism must stay inside a node";
  // bf16, taken when no precision is given, on a GPU without it: the rule
  // named /precision/compute, which no one gave.
  QTest::addRow("V100 without a precision")
      << QStringList{"plan", "--gpu", "v100-sxm2-32gb", "--nodes", "1", "--model", "gpt2-small"}
      << 2
      << "--precision: the NVIDIA V100 SXM2 32GB has no bf16 path, the precision a plan takes "
         "when none is given: give one it has (fp32, fp16)";
  QTest::addRow("unknown precision")
      << base + QStringList{"--precision", "fp6"} << 2 << "--precision";
  // A rule between two fields, broken by a flag: named by the model and the
  // flags over it (it read "command line: /hidden: ...").
  QTest::addRow("hidden not divisible by heads")
      << QStringList{"plan", "--cluster", "dgx-a100-64", "--model", "gpt3-1.3b", "--hidden", "100"}
      << 1 << "gpt3-1.3b with --hidden 100: /hidden: must be divisible by heads (16)";
  QTest::addRow("custom model's heads")
      << QStringList{"plan",     "--cluster", "dgx-a100-64", "--layers", "2",
                     "--hidden", "100",       "--heads",     "3",        "--seq",
                     "64",       "--vocab",   "1000"}
      << 1
      << "the model of --layers 2 --hidden 100 --heads 3 --seq 64 --vocab 1000: /hidden: must be "
         "divisible by heads (3)";
  QTest::addRow("no cluster") << QStringList{"plan", "--model", "gpt3-175b"} << 1
                              << "no cluster given";
  QTest::addRow("no model") << QStringList{"plan", "--cluster", "dgx-a100-64"} << 1
                            << "no model given";
  QTest::addRow("missing plan file") << QStringList{"plan", "--plan", "/nonexistent/plan.json"} << 1
                                     << "/nonexistent/plan.json: cannot open file";
  QTest::addRow("flash both ways")
      << base + QStringList{"--tp", "8", "--flash-attention", "--no-flash-attention"} << 2
      << "contradict";
  QTest::addRow("gated MLP without its size")
      << QStringList{"plan", "--cluster", "dgx-h100-8", "--layers", "32", "--hidden", "4096",
                     "--heads", "32", "--seq", "4096", "--vocab", "32000", "--gated-mlp"}
      << 1 << "--gated-mlp needs --ffn";
  // The preset's key/value heads, which the user never set, are named as such.
  QTest::addRow("heads the preset's key/value heads do not divide")
      << QStringList{"plan", "--cluster", "dgx-h100-8", "--model", "llama2-70b", "--heads", "7"}
      << 1
      << "--heads 7: LLaMA-2 70B has 8 key/value heads (grouped-query attention), which must "
         "divide the heads: give --kv-heads too";
  QTest::addRow("tp 0") << base + QStringList{"--tp", "0"} << 2 << "--tp: must be > 0 and <= 2147483647 (got 0)";
  QTest::addRow("sequence past an int")
      << QStringList{"plan",      "--cluster", "dgx-h100-8", "--model",
                     "llama2-7b", "--seq",     "99999999999"}
      << 2 << "--seq: must be between 1 and 16777216 (got 99999999999)";
  QTest::addRow("tp not a number") << base + QStringList{"--tp", "two"} << 2
                                   << "--tp: must be a whole number in decimal digits (got two)";
  QTest::addRow("zero 5") << base + QStringList{"--zero", "5"} << 2
                          << "--zero: must be between 0 and 3 (got 5)";
  // The cluster document's rule, said of the flag (a price past it read
  // "command line: /price_per_gpu_hour: ...").
  QTest::addRow("negative price") << base + QStringList{"--price", "-1"} << 2
                                  << "--price: must be between 0 and 1000000 (got -1)";
  QTest::addRow("price past the bound") << base + QStringList{"--price", "1e300"} << 2
                                        << "--price: must be between 0 and 1000000 (got 1e300)";
  // Counts whose products pass an int: refused, where they divided by zero
  // (SIGFPE) or printed negative batches.
  QTest::addRow("micro-batch past an int")
      << QStringList{"plan", "--cluster", "dgx-a100-8", "--model", "gpt2-small", "--micro-batch",
                     "1073741824"}
      << 1 << "dp x micro-batch = 8 x 1073741824 = 8589934592 sequences per step: more than 2147483647";
  QTest::addRow("a folder as the model")
      << QStringList{"plan", "--cluster", "dgx-a100-8", "--model", CS_SOURCE_DIR "/docs"} << 1
      << CS_SOURCE_DIR "/docs: is a folder, not a JSON file";
  QTest::addRow("nodes past a cluster")
      << QStringList{"plan", "--gpu", "h100-sxm", "--nodes", "2147483647", "--model", "gpt2-small"}
      << 2 << "--nodes: must be between 1 and 1048576 (got 2147483647)";
}

void TestPlanCli::planErrors() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, stderr_has);
  const Run r = run_cli(args);
  QVERIFY2(r.exit_code == code,
           qPrintable(QString("exit %1\n%2%3").arg(r.exit_code).arg(r.out, r.err)));
  QVERIFY2(r.err.contains(stderr_has), qPrintable(r.err));
  QVERIFY2(r.err.startsWith("clusterscope: error: ") || r.err.contains(": cannot open file"),
           qPrintable(r.err));
}

// docs/planner.md's answer to the first seed article's "32 GPUs, 32 times
// less memory": ZeRO shards the model states only, and ZeRO-3 adds its
// gather buffers back (the page read 13.8 GiB after they were counted).
void TestPlanCli::seedZeroExample_data() {
  QTest::addColumn<QString>("zero");
  QTest::addColumn<QString>("memory");
  QTest::addRow("ZeRO 0") << "0"
                          << "37.3 GiB";
  QTest::addRow("ZeRO 1") << "1"
                          << "19.6 GiB";
  QTest::addRow("ZeRO 2") << "2"
                          << "16.7 GiB";
  QTest::addRow("ZeRO 3") << "3"
                          << "14.3 GiB";
}

void TestPlanCli::seedZeroExample() {
  QFETCH(QString, zero);
  QFETCH(QString, memory);
  const Run r = run_cli({"plan", "--cluster", "dgx-a100-64", "--nodes", "4", "--model", "gpt2-xl",
                         "--precision", "fp16", "--micro-batch", "4", "--zero", zero});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("Memory per GPU (stage 0, the most loaded): " + memory + " of 80.0 GiB"),
           qPrintable(r.out));
  QVERIFY2(r.out.contains(QRegularExpression("\nactivations +10\\.8 GiB")), qPrintable(r.out));
}

// A document on a named pipe is read as a file, and said to wait for its
// writer, however it is named: one in the working folder (`mkfifo model`)
// was taken for a preset name ("unknown model preset") by --model and
// --cluster, where ./model, <(...) and --plan read it.
void TestPlanCli::documentsOnNamedPipes_data() {
  QTest::addColumn<QString>("flag");
  QTest::addColumn<QByteArray>("document");
  QTest::addColumn<QString>("shown");  // in the estimate's first line
  QTest::addRow("--model") << "--model"
                           << QByteArray(R"({"kind": "workload", "name": "pipe-gpt", "layers": 12,
    "hidden": 768, "heads": 12, "seq_len": 1024, "vocab": 50257})")
                           << "pipe-gpt on ";
  QTest::addRow("--cluster") << "--cluster"
                             << QByteArray(R"({"kind": "cluster", "name": "pipe-box", "nodes": 1,
    "gpus_per_node": 8, "gpu": "a100-80gb", "intra_node": "nvlink3"})")
                             << " on pipe-box";
  QTest::addRow("--plan") << "--plan"
                          << QByteArray(R"({"cluster": "dgx-a100-8", "workload": "gpt2-small",
    "parallel": {"dp": 8}})")
                          << "GPT-2 124M on ";
}

void TestPlanCli::documentsOnNamedPipes() {
  QFETCH(QString, flag);
  QFETCH(QByteArray, document);
  QFETCH(QString, shown);
  QTemporaryDir dir;
  cs::test::NamedPipeWriter pipe(dir.filePath("doc"), document);
  QVERIFY(pipe.made());
  QStringList args = {"plan", flag, "doc"};
  if (flag == "--model")
    args << "--cluster"
         << "dgx-a100-8";
  if (flag == "--cluster")
    args << "--model"
         << "gpt2-small";
  cs::test::ProcessOptions in_dir;
  in_dir.dir = dir.path();
  const Run r = run_cli(args, in_dir);
  pipe.finish();
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("clusterscope: " + flag +
                          ": reading doc, a named pipe: waiting for a program to write to it"),
           qPrintable(r.err));
  QVERIFY2(r.out.section('\n', 0, 0).contains(shown), qPrintable(r.out));
}

void TestPlanCli::planDocument() {
  QTemporaryDir dir;
  QFile file(dir.filePath("plan.json"));
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(R"({"kind": "plan", "cluster": "dgx-h100-64", "workload": "llama2-70b",
    "parallel": {"dp": 2, "tp": 8, "pp": 4, "virtual_stages": 2, "sequence_parallel": true,
                 "zero_stage": 1, "micro_batch": 1, "global_batch": 64, "recompute": "selective"},
    "precision": {"compute": "fp8"}})");
  file.close();
  const Run r = run_cli({"plan", "--plan", file.fileName(), "--json"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QJsonObject o = parse(r);
  QCOMPARE(o["gpus"].toInt(), 64);
  QCOMPARE(o["micro_batches"].toInt(), 32);
  QCOMPARE(o["plan"].toObject()["precision"].toObject()["compute"].toString(), QString("fp8"));
  // A document without dp fills its cluster, and the cluster flags put
  // over it: 8 x 8 on 64 GPUs, 1 x 8 on the one node --nodes 1 leaves.
  QFile free_dp(dir.filePath("free-dp.json"));
  QVERIFY(free_dp.open(QIODevice::WriteOnly));
  free_dp.write(R"({"cluster": "dgx-h100-64", "workload": "llama2-7b", "parallel": {"tp": 8}})");
  free_dp.close();
  for (const auto& [nodes, dp] : {std::pair{QString(), 8}, std::pair{QString("1"), 1}}) {
    QStringList args = {"plan", "--plan", free_dp.fileName(), "--json"};
    if (!nodes.isEmpty()) args << "--nodes" << nodes;
    const Run filled = run_cli(args);
    QVERIFY2(filled.exit_code == 0, qPrintable(filled.err));
    QCOMPARE(parse(filled)["plan"].toObject()["parallel"].toObject()["dp"].toInt(), dp);
  }
  // Flags go over the document: tp 4 leaves dp 4 to fill the 64 GPUs.
  const Run over = run_cli({"plan", "--plan", file.fileName(), "--tp", "4", "--json"});
  QVERIFY2(over.exit_code == 0, qPrintable(over.err));
  const QJsonObject p = parse(over)["plan"].toObject()["parallel"].toObject();
  QCOMPARE(p["tp"].toInt(), 4);
  QCOMPARE(p["dp"].toInt(), 4);
  QCOMPARE(p["global_batch"].toInt(), 64);
  // Cluster and model flags alone change the document's cluster and model
  // (they were dropped without a word unless --cluster or --model was given).
  const Run changed =
      run_cli({"plan", "--plan", file.fileName(), "--json", "--price", "100", "--nodes", "16",
               "--inter-link", "roce-400", "--tokens", "1e9", "--kv-heads", "16"});
  QVERIFY2(changed.exit_code == 0, qPrintable(changed.err));
  const QJsonObject cluster = parse(changed)["plan"].toObject()["cluster"].toObject();
  QCOMPARE(cluster["nodes"].toInt(), 16);
  QCOMPARE(cluster["price_per_gpu_hour"].toDouble(), 100.0);
  QVERIFY2(cluster["display_name"].toString().endsWith(
               "changed by --nodes 16 --inter-link roce-400 --price 100"),
           qPrintable(cluster["display_name"].toString()));
  const QJsonObject model = parse(changed)["plan"].toObject()["workload"].toObject();
  QCOMPARE(model["kv_heads"].toInt(), 16);
  QCOMPARE(model["training_tokens"].toDouble(), 1e9);
  QCOMPARE(parse(changed)["gpus"].toInt(), 64);
  // The plan keeps its GPUs: over a plan of 32 of the 64, --tp 8 (its own)
  // keeps dp 2, and --pp 4 leaves dp 1. Filling the cluster, --tp 8 had
  // doubled dp to 4.
  QFile half(dir.filePath("half.json"));
  QVERIFY(half.open(QIODevice::WriteOnly));
  half.write(R"({"kind": "plan", "cluster": "dgx-h100-64", "workload": "llama2-70b",
    "parallel": {"dp": 2, "tp": 8, "pp": 2, "micro_batch": 1, "global_batch": 64}})");
  half.close();
  for (const auto& [flags, want_dp] :
       {std::pair{QStringList{"--tp", "8"}, 2}, std::pair{QStringList{"--pp", "4"}, 1},
        std::pair{QStringList{"--tp", "4", "--pp", "2"}, 4},
        std::pair{QStringList{"--tp", "8", "--dp", "4"}, 4}}) {
    const Run kept = run_cli(QStringList{"plan", "--plan", half.fileName(), "--json"} + flags);
    // Estimated, whether it fits (0) or not (4).
    QVERIFY2(kept.exit_code == 0 || kept.exit_code == 4, qPrintable(kept.err));
    QCOMPARE(parse(kept)["plan"].toObject()["parallel"].toObject()["dp"].toInt(), want_dp);
  }
  const Run uneven = run_cli({"plan", "--plan", half.fileName(), "--pp", "5"});
  QCOMPARE(uneven.exit_code, 1);
  QVERIFY2(uneven.err.contains("half.json runs on 32 GPUs (tp 8 x pp 2 x dp 2), which tp 8 x pp 5 "
                               "does not divide: give --dp"),
           qPrintable(uneven.err));
  // A document without a global batch takes dp x micro-batch after the flags
  // (--dp 8 asked for a batch of 1, the file's own dp 1's, and was refused).
  QFile no_batch(dir.filePath("no-batch.json"));
  QVERIFY(no_batch.open(QIODevice::WriteOnly));
  no_batch.write(R"({"cluster": "dgx-h100-64", "workload": "llama2-13b",
    "parallel": {"tp": 4, "pp": 2}})");
  no_batch.close();
  const Run batch = run_cli({"plan", "--plan", no_batch.fileName(), "--dp", "8", "--json"});
  QVERIFY2(batch.exit_code == 0, qPrintable(batch.err));
  QCOMPARE(parse(batch)["plan"].toObject()["parallel"].toObject()["global_batch"].toInt(), 8);
  // ... times its gradient accumulation, which `validate` read and `plan`
  // dropped (8 micro-batches ran as 1; with interleaving, plan then refused
  // what validate called valid).
  QFile accumulating(dir.filePath("accumulating.json"));
  QVERIFY(accumulating.open(QIODevice::WriteOnly));
  accumulating.write(R"({"cluster": "dgx-a100-64", "workload": "gpt3-13b", "precision": "bf16",
    "parallel": {"dp": 4, "tp": 4, "pp": 4, "virtual_stages": 2, "micro_batch": 2,
                 "gradient_accumulation": 8, "zero_stage": 1}})");
  accumulating.close();
  const Run valid = run_cli({"validate", accumulating.fileName()});
  QVERIFY2(valid.exit_code == 0, qPrintable(valid.out + valid.err));
  const Run accumulated = run_cli({"plan", "--plan", accumulating.fileName(), "--json"});
  QVERIFY2(accumulated.exit_code == 0, qPrintable(accumulated.err));
  QCOMPARE(parse(accumulated)["plan"].toObject()["parallel"].toObject()["global_batch"].toInt(), 64);
  const Run wider = run_cli({"plan", "--plan", accumulating.fileName(), "--micro-batch", "1", "--json"});
  QVERIFY2(wider.exit_code == 0, qPrintable(wider.err));
  QCOMPARE(parse(wider)["plan"].toObject()["parallel"].toObject()["global_batch"].toInt(), 32);
  // Blocking tensor-parallel all-reduces expose backward's: more exposed
  // tensor-parallel time, the same compute.
  const Run blocking =
      run_cli({"plan", "--plan", file.fileName(), "--blocking-tp-allreduce", "--json"});
  QVERIFY2(blocking.exit_code == 0, qPrintable(blocking.err));
  const QJsonObject b = parse(blocking);
  QCOMPARE(b["plan"].toObject()["parallel"].toObject()["async_tp_allreduce"].toBool(true), false);
  QVERIFY(b["time"].toObject()["tp_communication_seconds"].toDouble() >
          o["time"].toObject()["tp_communication_seconds"].toDouble());
  QCOMPARE(b["time"].toObject()["backward_seconds"].toDouble(),
           o["time"].toObject()["backward_seconds"].toDouble());
  // The embedding and LM head whole on every rank: more weights per GPU.
  const Run whole = run_cli({"plan", "--plan", file.fileName(), "--whole-vocab", "--json"});
  QVERIFY2(whole.exit_code == 0, qPrintable(whole.err));
  const QJsonObject w = parse(whole);
  QCOMPARE(w["plan"].toObject()["parallel"].toObject()["vocab_parallel"].toBool(true), false);
  QVERIFY(w["memory"].toObject()["weights_bytes"].toDouble() >
          o["memory"].toObject()["weights_bytes"].toDouble());
  // An invalid document is refused with its file and pointer.
  QFile bad(dir.filePath("bad.json"));
  QVERIFY(bad.open(QIODevice::WriteOnly));
  bad.write(
      R"({"kind": "plan", "cluster": "dgx-h100-64", "workload": "llama2-70b", "parallel": {"tp": 0}})");
  bad.close();
  const Run refused = run_cli({"plan", "--plan", bad.fileName()});
  QCOMPARE(refused.exit_code, 1);
  QVERIFY2(refused.err.contains("bad.json: /parallel/tp: must be >= 1"), qPrintable(refused.err));
}

// The rules a plan file breaks name the file, as validate names it: plan
// listed them without saying which document broke them.
void TestPlanCli::brokenRulesNameThePlanFile() {
  QTemporaryDir dir;
  const QString path = dir.filePath("tp_heads.json");
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(R"({"kind":"plan","cluster":"dgx-h100-32","workload":"gpt2-small",
    "parallel":{"dp":1,"tp":5,"pp":1,"micro_batch":1},"precision":"bf16"})");
  file.close();
  const Run r = run_cli({"plan", "--plan", path});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("clusterscope: error: the plan of " + path + " cannot run (") &&
               r.err.contains("\n  " + path + ": /parallel/tp: must divide the 12 attention heads"),
           qPrintable(r.err));
  const Run validate = run_cli({"validate", path});
  QVERIFY2(validate.err.contains(path + ": /parallel/tp: must divide the 12 attention heads") ||
               validate.out.contains(path + ": /parallel/tp: must divide the 12 attention heads"),
           qPrintable(validate.out + validate.err));
}

// A rule broken by a flag over a plan file was laid at the file's door:
// "plan.json: /cluster/gpus_per_node: the cluster has no GPU to plan for"
// of a file whose cluster has 8 GPUs a node.
void TestPlanCli::brokenRulesSayFlagsChangedThePlanFile_data() {
  QTest::addColumn<QStringList>("flags");
  QTest::addColumn<QString>("problem");
  QTest::addRow("cluster flag") << QStringList{"--gpus-per-node", "0"}
                                << "/cluster/gpus_per_node: the cluster has no GPU to plan for";
  QTest::addRow("model flag") << QStringList{"--heads", "5", "--hidden", "640"}
                              << "/parallel/tp: must divide the 5 attention heads";
  QTest::addRow("plan flag") << QStringList{"--tp", "8", "--dp", "1"}
                             << "/parallel/tp: must divide the 12 attention heads";
}

void TestPlanCli::brokenRulesSayFlagsChangedThePlanFile() {
  QFETCH(QStringList, flags);
  QFETCH(QString, problem);
  QTemporaryDir dir;
  const QString path = dir.filePath("plan.json");
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(R"({"kind":"plan","cluster":"dgx-h100-8","workload":"gpt2-small",
    "parallel":{"dp":4,"tp":2,"pp":1,"micro_batch":1},"precision":"bf16"})");
  file.close();
  QCOMPARE(run_cli({"plan", "--plan", path}).exit_code, 0);  // the file alone runs
  const Run r = run_cli(QStringList{"plan", "--plan", path} + flags);
  QCOMPARE(r.exit_code, 1);
  const QString where = path + " with the flags over it";
  QVERIFY2(r.err.contains("clusterscope: error: the plan of " + where + " cannot run (") &&
               r.err.contains("\n  " + where + ": " + problem),
           qPrintable(r.err));
}

// A share of a peak the planner divides by: a GPU's or a link's efficiency
// of 2.3e-308 passed, and plan printed "inf days, inf T GPU-hours, -nan kWh".
void TestPlanCli::sharesOfAPeakNoDeviceReachesAreRefused_data() {
  QTest::addColumn<QString>("gpu_efficiency");
  QTest::addColumn<QString>("link_efficiency");
  QTest::addColumn<QString>("refused");
  QTest::addRow("bf16 GEMMs") << R"("gemm_max_by_precision": {"bf16": 2.3e-308})"
                              << "0.8"
                              << "/cluster/gpu/efficiency/gemm_max_by_precision/bf16: must be 0 "
                                 "(none) or at least 1e-06 (got 2.3e-308)";
  QTest::addRow("memory") << R"("memory_max": 2.3e-308)"
                          << "0.8"
                          << "/cluster/gpu/efficiency/memory_max: must be between 1e-06 and 1 "
                             "(got 2.3e-308)";
  // A measured rate divides the same way (unfused attention's).
  QTest::addRow("attention rate") << R"("loops": {"attention_gflops": 2.3e-308})"
                                  << "0.8"
                                  << "/cluster/gpu/efficiency/loops/attention_gflops: must be 0 "
                                     "(none) or at least 1e-06 (got 2.3e-308)";
  QTest::addRow("link") << R"("gemm_max": 0.5)"
                        << "2.3e-308"
                        << "/cluster/intra_node/efficiency: must be between 1e-06 and 1 (got "
                           "2.3e-308)";
}

void TestPlanCli::sharesOfAPeakNoDeviceReachesAreRefused() {
  QFETCH(QString, gpu_efficiency);
  QFETCH(QString, link_efficiency);
  QFETCH(QString, refused);
  QTemporaryDir dir;
  const QString path = dir.filePath("plan.json");
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(QString(R"({"kind": "plan", "workload": "llama2-7b", "precision": "bf16",
    "cluster": {"name": "c", "nodes": 1, "gpus_per_node": 2,
      "gpu": {"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000,
              "peak_tflops": {"fp32": 60, "bf16": 900}, "efficiency": {%1}},
      "intra_node": {"name": "l", "type": "nvlink", "bandwidth_gbps": 3600, "latency_us": 1,
                     "efficiency": %2}}})")
                 .arg(gpu_efficiency, link_efficiency)
                 .toUtf8());
  file.close();
  const Run r = run_cli({"plan", "--plan", path});
  QVERIFY2(r.exit_code == 1,
           qPrintable(QString("exit %1\n%2%3").arg(r.exit_code).arg(r.out, r.err)));
  QVERIFY2(r.err.contains(path + ": " + refused), qPrintable(r.err));
  QVERIFY2(r.out.isEmpty(), qPrintable(r.out));
}

void TestPlanCli::planDoesNotFit() {
  const Run r =
      run_cli({"plan", "--cluster", "dgx-a100-8", "--model", "gpt3-175b", "--tp", "8", "--json"});
  // An estimate, with the shortfall said, and exit status 3: a script
  // learns the plan cannot run as it is (it exited 0). Not 3: an internal
  // error's.
  QCOMPARE(r.exit_code, 4);
  QVERIFY2(r.err.startsWith("clusterscope: the plan does not fit: needs "), qPrintable(r.err));
  QVERIFY(parse(r)["valid"].toBool());  // it breaks no rule
  const QJsonObject o = parse(r);
  QCOMPARE(o["memory"].toObject()["fits"].toBool(), false);
  QVERIFY(o["memory"].toObject()["headroom_bytes"].toDouble() < 0);
  const QJsonArray problems = o["problems"].toArray();
  QCOMPARE(problems.size(), 1);
  QCOMPARE(problems[0].toObject()["pointer"].toString(), QString("/parallel"));
  const Run text =
      run_cli({"plan", "--cluster", "dgx-a100-8", "--model", "gpt3-175b", "--tp", "8"});
  QVERIFY(text.out.contains("does NOT fit"));
}

void TestPlanCli::planHelpListsFlags() {
  const Run r = run_cli({"plan", "--help"});
  QCOMPARE(r.exit_code, 0);
  for (const char* flag :
       {"--tp", "--pp", "--dp", "--virtual-stages", "--sequence-parallel", "--zero",
        "--micro-batch", "--global-batch", "--recompute", "--precision", "--flash-attention",
        "--blocking-tp-allreduce", "--plan", "--json"}) {
    QVERIFY2(r.out.contains(flag), flag);
  }
}

void TestPlanCli::searchJson() {
  const Run r = run_cli({"search", "--cluster", "dgx-a100-64", "--model", "gpt3-175b",
                         "--global-batch", "64", "--top", "3", "--json"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QJsonObject o = parse(r);
  QCOMPARE(o["best"].toArray().size(), 3);
  QVERIFY(o["candidates"].toInt() > 100);
  QVERIFY(o["fitting"].toInt() > 0);
  QVERIFY(o["seconds"].toDouble() >= 0);
  QCOMPARE(o["objective"].toString(), QString("throughput"));
  const QJsonObject first = o["best"].toArray()[0].toObject();
  QVERIFY(first["estimate"].toObject()["memory"].toObject()["fits"].toBool());
  QCOMPARE(first["parallel"].toObject()["global_batch"].toInt(), 64);
  QVERIFY(!o["pareto_memory"].toArray().isEmpty());
  // Along the memory front each step up in memory buys throughput, to the
  // float precision plans rank at: GPT-3 175B on 1024 A100s kept a plan as
  // fast as the one before it but for the 14th digit, with 0.5 GiB more.
  const Run wide = run_cli({"search", "--cluster", "dgx-a100-1024", "--model", "gpt3-175b",
                            "--global-batch", "1536", "--json"});
  QVERIFY2(wide.exit_code == 0, qPrintable(wide.err));
  const QJsonArray front = parse(wide)["pareto_memory"].toArray();
  QVERIFY(front.size() >= 2);
  for (qsizetype i = 1; i < front.size(); ++i) {
    const auto tokens = [&](qsizetype k) {
      return static_cast<float>(front[k].toObject()["estimate"].toObject()["throughput"]
                                    .toObject()["tokens_per_second"].toDouble());
    };
    QVERIFY2(tokens(i) > tokens(i - 1), qPrintable(QString::number(i)));
  }
}

// Plans that serve (int8, int4: forward passes only) have no time to
// train: the table's column read "train" over the time to run the tokens
// forward. It reads "serve" for them, and --json has the figures under
// "serving" too (beside "training", which scripts read).
void TestPlanCli::searchNamesWhatServingPlansTake_data() {
  QTest::addColumn<QString>("precisions");
  QTest::addColumn<QString>("column");
  QTest::addRow("bf16") << "bf16"
                        << "train";
  QTest::addRow("int8") << "int8"
                        << "serve";
  QTest::addRow("int8,int4") << "int8,int4"
                             << "serve";
}

void TestPlanCli::searchNamesWhatServingPlansTake() {
  QFETCH(QString, precisions);
  QFETCH(QString, column);
  const QStringList args{"search",     "--cluster",      "dgx-h100-8", "--model",
                         "llama2-13b", "--global-batch", "64",         "--top",
                         "2",          "--precision",    precisions};
  const Run text = run_cli(args);
  QVERIFY2(text.exit_code == 0, qPrintable(text.err));
  const QStringList lines = text.out.split('\n');
  int headers = 0;
  for (const QString& line : lines) {
    if (!line.startsWith('#')) continue;
    ++headers;
    const QStringList cells = line.split(' ', Qt::SkipEmptyParts);
    QVERIFY2(cells.size() >= 2 && cells[cells.size() - 2] == column, qPrintable(line));
  }
  QVERIFY2(headers > 0, qPrintable(text.out));
  const Run json = run_cli(args + QStringList{"--json"});
  QVERIFY2(json.exit_code == 0, qPrintable(json.err));
  const QJsonArray best = parse(json)["best"].toArray();
  QVERIFY(!best.isEmpty());
  for (const QJsonValue& v : best) {
    const QJsonObject e = v.toObject()["estimate"].toObject();
    QVERIFY(e["training"].isObject());
    QCOMPARE(e["inference"].toBool(), column == "serve");
    QCOMPARE(e.contains("serving"), column == "serve");
    if (column == "serve") QCOMPARE(e["serving"].toObject(), e["training"].toObject());
  }
}

void TestPlanCli::searchText() {
  const Run r = run_cli({"search", "--cluster", "dgx-h100-32", "--model", "llama2-13b",
                         "--global-batch", "128", "--objective", "cost", "--top", "4"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY(r.out.contains("objective cost"));
  QVERIFY(r.out.contains("Pareto front"));
  // A workload with tokens to train on costs whole runs; one without is
  // ranked per token, and says so (it read "objective cost" alone).
  QVERIFY2(!r.out.contains("(per token"), qPrintable(r.out));
  const Run per_token = run_cli({"search", "--cluster", "dgx-h100-8", "--model", "gpt2-small",
                                 "--global-batch", "64", "--objective", "cost", "--top", "2"});
  QVERIFY2(per_token.exit_code == 0, qPrintable(per_token.err));
  QVERIFY2(per_token.out.contains("objective cost (per token: with no amount to train on given"),
           qPrintable(per_token.out));
  const QString last = r.out.trimmed().split('\n').last();
  QVERIFY2(last.startsWith("Evaluated ") && last.contains("candidate plans") &&
               last.contains(" in ") && last.contains("thread"),
           qPrintable(last));
  // fp16 at bf16's rate is not searched unless asked for: its rows repeated
  // bf16's figures and took half of the list.
  QVERIFY2(!r.out.contains(" fp16 "), qPrintable(r.out));
  QVERIFY(r.out.contains(" bf16 "));

  // Plans that may leave GPUs idle: the front against GPU count is printed
  // (it was in --json alone), from a plan on a few GPUs up to all 32.
  const Run idle = run_cli({"search", "--cluster", "dgx-h100-32", "--model", "llama2-13b",
                            "--global-batch", "128", "--any-gpu-count", "--top", "2"});
  QVERIFY2(idle.exit_code == 0, qPrintable(idle.err));
  QVERIFY2(idle.out.contains("Pareto front, throughput against GPU count:"), qPrintable(idle.out));
  // ... from the fewest GPUs up: its first plan leaves GPUs idle.
  const QString front = idle.out.section("against GPU count:", 1);
  QVERIFY2(front.contains(QRegularExpression("\n1 +\\d+/\\d+/\\d+")) &&
               !front.contains(QRegularExpression("\n1 +32/1/1 ")),
           qPrintable(front));
  QVERIFY2(!r.out.contains("against GPU count"), qPrintable(r.out));  // every plan on 32 GPUs

  // Several global batches: the list says each plan's.
  const Run batches = run_cli({"search", "--cluster", "dgx-h100-32", "--model", "llama2-13b",
                               "--global-batch", "128,512", "--top", "20"});
  QVERIFY2(batches.exit_code == 0, qPrintable(batches.err));
  const QStringList lines = batches.out.split('\n');
  const QString header = lines.value(lines.indexOf(QRegularExpression("^Best .*")) + 1);
  QVERIFY2(header.contains(QRegularExpression("mb +batch +recompute")), qPrintable(header));
  QVERIFY(batches.out.contains(QRegularExpression(" 128 +(none|selective|full) ")));
  QVERIFY(batches.out.contains(QRegularExpression(" 512 +(none|selective|full) ")));
  const Run asked = run_cli({"search", "--cluster", "dgx-h100-32", "--model", "llama2-13b",
                             "--global-batch", "128", "--precision", "fp16", "--top", "2"});
  QVERIFY2(asked.exit_code == 0 && asked.out.contains(" fp16 "), qPrintable(asked.out));
  QVERIFY2(!asked.out.contains("MFU is of each plan's own precision"), qPrintable(asked.out));
  // Plans of several precisions: their MFUs are of different peaks.
  const Run mixed = run_cli({"search", "--cluster", "dgx-h100-32", "--model", "llama2-13b",
                             "--global-batch", "128", "--precision", "bf16,fp8", "--top", "6"});
  QVERIFY2(mixed.exit_code == 0, qPrintable(mixed.err));
  QVERIFY2(mixed.out.contains(" fp8 ") && mixed.out.contains(" bf16 "), qPrintable(mixed.out));
  QVERIFY2(mixed.out.contains("MFU is of each plan's own precision's dense peak: compare plans "
                              "of different precisions by tokens/s"),
           qPrintable(mixed.out));
  // A generic model's throughput column is in samples (a ResNet has no tokens).
  const Run images = run_cli({"search", "--cluster", "dgx-a100-8", "--model", "resnet18-cifar10",
                              "--global-batch", "256", "--top", "2"});
  QVERIFY2(images.exit_code == 0, qPrintable(images.err));
  QVERIFY2(images.out.contains(QRegularExpression(" step +samples/s +MFU ")),
           qPrintable(images.out));
  QVERIFY2(!images.out.contains("tokens/s"), qPrintable(images.out));
}

void TestPlanCli::searchClusterSizes() {
  const Run r = run_cli({"search", "--cluster", "dgx-h100-256", "--model", "llama2-7b",
                         "--global-batch", "512", "--node-counts", "1,2,4,8,16,32", "--objective",
                         "gpus", "--max-days", "30", "--top", "1", "--json"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QJsonObject best = parse(r)["best"].toArray()[0].toObject();
  QVERIFY(best["estimate"].toObject()["training"].toObject()["days"].toDouble() <= 30);
  QVERIFY(best["nodes"].toInt() >= 2);
  // None fits: how far the smallest is from fitting (it said only "No plan
  // fits in GPU memory").
  const Run too_big = run_cli({"search", "--cluster", "h200-1", "--model", "llama2-70b",
                               "--global-batch", "8"});
  QVERIFY2(too_big.exit_code == 0, qPrintable(too_big.err));
  QVERIFY2(too_big.out.contains(QRegularExpression(
               "No plan fits in GPU memory: the smallest of the [0-9.,kM ]+ valid plans needs "
               "[0-9.]+ [KMGT]iB per GPU, the GPU has 140 GiB")),
           qPrintable(too_big.out));
  const QJsonObject too_big_json = parse(run_cli({"search", "--cluster", "h200-1", "--model",
                                                  "llama2-70b", "--global-batch", "8", "--json"}));
  QVERIFY(too_big_json["smallest_memory_bytes"].toDouble() >
          too_big_json["gpu_memory_bytes"].toDouble());
  QVERIFY(too_big_json["gpu_memory_bytes"].toDouble() > 100e9);
  // Plans that fit but none within the limit: said so, not "none fits".
  // The limit as given (0.001 read "0.0").
  const Run none = run_cli({"search", "--cluster", "dgx-h100-256", "--model", "llama2-7b",
                            "--global-batch", "512", "--node-counts", "1,2", "--max-days", "0.001"});
  QVERIFY2(none.exit_code == 0, qPrintable(none.err));
  // The largest cluster a file may hold: dp x micro-batch passed an int and
  // wrapped to 0, and the search divided by it (SIGFPE, the app's too).
  for (const QString& gpus_per_node : {QStringLiteral("1024"), QStringLiteral("8")}) {
    const Run huge = run_cli({"search", "--gpu", "h100-sxm", "--nodes", "1048576",
                              "--gpus-per-node", gpus_per_node, "--model", "llama2-7b",
                              "--global-batch", "1024", "--any-gpu-count", "--top", "1"});
    QVERIFY2(huge.exit_code == 0, qPrintable(huge.err));
    QVERIFY2(huge.out.contains("Best 1"), qPrintable(huge.out));
  }
  const Run no_split = run_cli({"search", "--gpu", "h100-sxm", "--nodes", "65536", "--gpus-per-node",
                                "1024", "--model", "llama2-7b", "--global-batch", "1024"});
  QVERIFY2(no_split.exit_code == 0, qPrintable(no_split.err));
  QVERIFY2(no_split.out.contains("No candidate plan: no global batch given divides over the "
                                 "cluster's 67.1 M GPUs (--any-gpu-count lets plans leave GPUs idle)"),
           qPrintable(no_split.out));
  // Over --node-counts, the GPU counts searched: it named the cluster's own 32.
  const Run no_split_nodes = run_cli({"search", "--cluster", "dgx-h100-32", "--model", "gpt2-small",
                                      "--global-batch", "4", "--node-counts", "64,128,256"});
  QVERIFY2(no_split_nodes.exit_code == 0, qPrintable(no_split_nodes.err));
  QVERIFY2(no_split_nodes.out.contains(
               "No candidate plan: no global batch given divides over the 512, 1024 or 2048 GPUs "
               "of 64, 128 or 256 nodes (--any-gpu-count lets plans leave GPUs idle)"),
           qPrintable(no_split_nodes.out));
  QVERIFY2(none.out.contains("No plan within the limits: ") &&
               none.out.contains(" fit in GPU memory, none within --max-days 0.001."),
           qPrintable(none.out));
}

void TestPlanCli::searchErrors_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("stderr_has");
  const QStringList base = {"search", "--cluster", "dgx-a100-8", "--model", "gpt3-13b"};
  // Usage errors exit 2, as a flag's own check does.
  QTest::addRow("no global batch") << base << 2 << "--global-batch is required";
  // A limit on the days to train, of a workload with nothing to train on,
  // kept every plan without a word.
  QTest::addRow("--max-days with nothing to train on")
      << QStringList{"search",         "--cluster", "dgx-h100-8", "--model", "gpt2-small",
                     "--global-batch", "64",        "--max-days", "1e-7"}
      << 2 << "--max-days: gpt2-small has no amount to train on";
  // A limit of no time at all kept every plan, as if none were given.
  QTest::addRow("--max-days 0") << base + QStringList{"--global-batch", "64", "--tokens", "1e9",
                                                      "--max-days",     "0"}
                                << 2 << "--max-days: must be > 0 (got 0)";
  QTest::addRow("bad objective") << base +
                                        QStringList{"--global-batch", "64", "--objective", "speed"}
                                 << 2 << "--objective must be";
  QTest::addRow("no GPU") << QStringList{"search",     "--cluster",      "laptop-cpu", "--model",
                                         "gpt2-small", "--global-batch", "8"}
                          << 1 << "has no GPU";
  // It named no way out; --nodes, on plan, takes ib-ndr between the nodes.
  QTest::addRow("cannot grow")
      << base + QStringList{"--global-batch", "64", "--node-counts", "4"} << 1
      << "search: the cluster \"dgx-a100-8\" has no link between nodes, so --node-counts cannot "
         "grow it past one node: give one with --inter-link (e.g. ib-ndr)";
  QTest::addRow("bad precision") << base + QStringList{"--global-batch", "64", "--precision", "fp6"}
                                 << 2 << "--precision: fp6 not in {fp32,tf32,bf16,fp16,fp8,int8,int4}";
  // Forward-only INT8 plans ranked first by tokens/s among training plans,
  // "train 42.7 days" a forward pass over the tokens.
  QTest::addRow("serving and training precisions")
      << QStringList{"search",         "--cluster", "dgx-h100-8",  "--model",  "llama2-7b",
                     "--global-batch", "64",        "--precision", "bf16,int8"}
      << 1
      << "search: int8 plans serve (forward passes only, no backward or optimizer) and bf16 "
         "plans train";
  // A precision the GPU has no path for (it said "No plan fits in GPU memory").
  QTest::addRow("fp8 on an A100") << base + QStringList{"--global-batch", "64", "--precision", "fp8"}
                                  << 1 << "has no fp8 path (its preset gives no fp8 rate";
  // Figures no device or model has: infinite, or past the documents' bounds.
  QTest::addRow("infinite price")
      << base + QStringList{"--global-batch", "64", "--price", "inf"} << 2
      << "--price: must be a finite number (got inf)";
  // The flag's range is the workload document's: one bound, one exit status.
  QTest::addRow("sequence past the bound")
      << QStringList{"search", "--cluster", "dgx-a100-8",     "--model", "gpt3-13b",
                     "--seq",  "16777217",  "--global-batch", "64"}
      << 2 << "--seq: must be between 1 and 16777216 (got 16777217)";
  // Where the micro-batch doubling overflowed and never ended, and where
  // the system refused the threads (an abort).
  QTest::addRow("micro-batch past a search")
      << base + QStringList{"--global-batch", "64", "--max-micro-batch", "1073741824"} << 2
      << "--max-micro-batch: must be between 1 and 1048576 (got 1073741824)";
  QTest::addRow("threads past a search")
      << base + QStringList{"--global-batch", "64", "--threads", "40000"} << 2
      << "--threads: must be between 0 and 4096 (got 40000)";
}

void TestPlanCli::searchErrors() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, stderr_has);
  const Run r = run_cli(args);
  QVERIFY2(r.exit_code == code,
           qPrintable(QString("exit %1\n%2%3").arg(r.exit_code).arg(r.out, r.err)));
  QVERIFY2(r.err.contains(stderr_has), qPrintable(r.err));
}

QTEST_GUILESS_MAIN(TestPlanCli)
// Ctrl-C or SIGTERM (a CI job's timeout) while a wide search lists its
// plans: it stops at once and fails, instead of exiting 0 with "no global
// batch given divides over the cluster's GPUs" after the listing (about 10 s).
void TestPlanCli::searchInterrupted() {
  QString nodes;
  for (int n = 1; n <= 128; ++n)
    nodes += (n > 1 ? "," : "") + QString::number(n);
  for (int sig : {SIGINT, SIGTERM}) {
    QProcess p;
    p.start(CS_BIN_DIR "/clusterscope",
            {"search", "--cluster", "dgx-h100-1024", "--model", "llama3-405b", "--global-batch",
             "512,1024,2048,4096,8192", "--node-counts", nodes, "--any-gpu-count",
             "--max-micro-batch", "1048576", "--threads", "1"});
    QVERIFY(p.waitForStarted());
    QTest::qWait(1000);
    ::kill(static_cast<pid_t>(p.processId()), sig);
    QVERIFY(p.waitForFinished(60000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 1);
    QVERIFY2(out.contains("Stopped early: evaluated"), qPrintable(out));
    QVERIFY2(!out.contains("No candidate plan"), qPrintable(out));
    QVERIFY2(err.contains("the search was stopped (interrupted)"), qPrintable(err));
  }
}

// The predicted step as a trace store, as the app draws it (only the app
// could): one rank per pipeline stage, whose stats read as GPU work.
void TestPlanCli::planWritesItsTimeline() {
  QTemporaryDir dir;
  const QString store = dir.filePath("predicted.db");
  const QStringList plan{"plan", "--cluster", "dgx-h100-32", "--model", "llama2-7b",
                         "--tp",   "2",       "--pp",        "4"};
  const Run r = run_cli(plan + QStringList{"--timeline", store, "--json"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QJsonObject o = parse(r);
  const QJsonObject timeline = o["timeline"].toObject();
  QCOMPARE(timeline["store"].toString(), store);
  QCOMPARE(timeline["stages"].toInt(), 4);
  QVERIFY(timeline["spans"].toInt() > 10);
  QVERIFY(timeline["step_seconds"].toDouble() > 0);

  const Run stats = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonArray ranks = parse(stats)["ranks"].toArray();
  QCOMPARE(ranks.size(), 4);
  for (const auto& rank : ranks) {
    const QJsonObject total = rank.toObject()["total"].toObject();
    QVERIFY2(total["compute_ns"].toDouble() > 0, qPrintable(QJsonDocument(total).toJson()));
  }
  QCOMPARE(ranks[0].toObject()["rank"].toInt(), 0);
  QCOMPARE(ranks[3].toObject()["rank"].toInt(), 24);  // stage 3's first rank: 3 x dp 4 x tp 2

  const Run text = run_cli(plan + QStringList{"--timeline", store});
  QVERIFY2(text.out.contains("Predicted timeline: " + store + " (4 stages, "), qPrintable(text.out));
  // Its folders made, as `run --out` makes them (it said "the folder ...
  // does not exist" after the estimate); under a file, refused by name.
  const QString deeper = dir.filePath("timelines/llama/predicted.db");
  const Run made = run_cli(plan + QStringList{"--timeline", deeper});
  QVERIFY2(made.exit_code == 0, qPrintable(made.err));
  QVERIFY2(made.out.contains("Predicted timeline: " + deeper + " (4 stages, "),
           qPrintable(made.out));
  const Run under_a_file = run_cli(plan + QStringList{"--timeline", store + "/x/p.db"});
  QCOMPARE(under_a_file.exit_code, 1);
  QVERIFY2(under_a_file.err.contains("clusterscope: error: " + store +
                                     "/x/p.db: cannot create its "
                                     "folder " +
                                     store + "/x (" + store + " is a file, not a folder)"),
           qPrintable(under_a_file.err));
  // Not over a file that is not a store.
  QFile notes(dir.filePath("notes.db"));
  QVERIFY(notes.open(QIODevice::WriteOnly));
  notes.write("mine\n");
  notes.close();
  const Run refused = run_cli(plan + QStringList{"--timeline", notes.fileName()});
  QCOMPARE(refused.exit_code, 1);
  QVERIFY2(refused.err.contains("is a file that is not a trace store"), qPrintable(refused.err));
  // Nor to standard output: "-" was written as a file named "-" in the working folder.
  cs::test::ProcessOptions in_dir;
  in_dir.dir = dir.path();
  const Run dash = run_cli(plan + QStringList{"--timeline", "-"}, in_dir);
  QCOMPARE(dash.exit_code, 1);
  QVERIFY2(dash.err.contains("clusterscope: error: -: a trace store is a SQLite file, which "
                             "standard output cannot hold: give a file name (./- for a file "
                             "named -)"),
           qPrintable(dash.err));
  QVERIFY(!QFile::exists(dir.filePath("-")));
  // Nor over a store of measurements: a run's was replaced by the prediction.
  const QString measured = dir.filePath("measured.db");
  QVERIFY(QFile::copy(CS_SOURCE_DIR "/tests/data/cpu/cpu-engine-dp2.db", measured));
  QFile::setPermissions(measured, QFile::ReadOwner | QFile::WriteOwner);
  const QByteArray before = [&] {
    QFile f(measured);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }();
  const Run kept = run_cli(plan + QStringList{"--timeline", measured});
  QCOMPARE(kept.exit_code, 1);
  QVERIFY2(
      kept.err.contains(measured + ": holds measurements (a trace store of source cpu-engine), "
                                   "not a predicted timeline; --timeline replaces only a "
                                   "timeline it wrote"),
      qPrintable(kept.err));
  QFile after(measured);
  QVERIFY(after.open(QIODevice::ReadOnly));
  QVERIFY(after.readAll() == before);

  // A step too long to draw still has its estimate: it was refused with the
  // timeline's error alone. The store before it is kept.
  const QStringList huge{"plan", "--cluster", "dgx-h100-8",     "--model",   "gpt2-small",
                         "--dp", "8",         "--global-batch", "1073741824"};
  const Run long_text = run_cli(huge + QStringList{"--timeline", store});
  QCOMPARE(long_text.exit_code, 1);
  QVERIFY2(long_text.out.contains("Step time"), qPrintable(long_text.out));
  QVERIFY2(long_text.err.contains("the predicted timeline was not written: ") &&
               long_text.err.contains("more than the 1000000 a predicted timeline holds") &&
               long_text.err.contains("(the estimate above stands)"),
           qPrintable(long_text.err));
  const Run long_json = run_cli(huge + QStringList{"--timeline", store, "--json"});
  QCOMPARE(long_json.exit_code, 1);
  const QJsonObject o_long = parse(long_json);
  QVERIFY(o_long["time"].toObject()["step_seconds"].toDouble() > 0);
  QVERIFY2(o_long["timeline"].toObject()["error"].toString().contains("more than the 1000000"),
           qPrintable(long_json.out));
  const Run still = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(still.exit_code == 0, qPrintable(still.err));
}

#include "tst_plan_cli.moc"
