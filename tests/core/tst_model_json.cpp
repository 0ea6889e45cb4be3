// The domain model's JSON form: round trips, every validation rule with the
// message a user sees, kind detection, and parameter counts against published
// exact figures.

#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/presets.h"

using nlohmann::json;

namespace {

const cs::PresetCatalog& catalog() {
  static const cs::PresetCatalog c = [] {
    auto loaded = cs::PresetCatalog::load(CS_SOURCE_DIR "/resources/presets");
    if (!loaded) qFatal("%s", loaded.message().c_str());
    return std::move(loaded).value();
  }();
  return c;
}

// Reads `text` as the given kind and returns the error text ("" on success).
QString read_error(const QString& kind, const std::string& text) {
  const json j = json::parse(text);
  const std::string doc = kind.toStdString() + ".json";
  auto message = [](const auto& r) { return r ? QString() : QString::fromStdString(r.message()); };
  if (kind == "cluster") return message(cs::cluster_from_json(j, doc, &catalog()));
  if (kind == "gpu") return message(cs::gpu_from_json(j, doc));
  if (kind == "link") return message(cs::link_from_json(j, doc));
  if (kind == "workload") return message(cs::workload_from_json(j, doc));
  if (kind == "parallel") return message(cs::parallel_plan_from_json(j, doc));
  if (kind == "precision") return message(cs::precision_plan_from_json(j, doc));
  if (kind == "plan") return message(cs::plan_from_json(j, doc, &catalog()));
  qFatal("unknown kind");
}

const char* kGoodCluster = R"({"name": "c", "nodes": 2, "gpus_per_node": 8, "gpu": "h100-sxm",
  "intra_node": "nvlink4", "inter_node": "ib-ndr"})";

}  // namespace

class TestModelJson : public QObject {
  Q_OBJECT

 private slots:
  void presetsRoundTrip_data();
  void presetsRoundTrip();
  void coldLinkRoundTrip();
  void displayNameDefaultsToName();
  void optimizerBySizeRoundTrip();
  void planRoundTrip();
  void planWithoutDpFillsTheCluster_data();
  void planWithoutDpFillsTheCluster();
  void validationErrors_data();
  void validationErrors();
  void refusedValueRaisesNoRelation();
  void longKeysAndNamesAreCutInMessages_data();
  void longKeysAndNamesAreCutInMessages();
  void validDocuments_data();
  void validDocuments();
  void detectKind_data();
  void detectKind();
  void parameterCount_data();
  void parameterCount();
  void precisionDefaults();
  void clusterTotals();
  void nicShareIsCappedByTheHostLink_data();
  void nicShareIsCappedByTheHostLink();
  void readJsonFileErrors();
  void writeJsonFileRoundTrip();
  void writeJsonFileWholeOrNotAtAll();
  void validateFileLists();
};

// Every preset written with to_json reads back to the same JSON.
void TestModelJson::presetsRoundTrip_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("name");
  for (const auto& g : catalog().gpus()) QTest::addRow("gpu %s", g.name.c_str()) << "gpu" << QString::fromStdString(g.name);
  for (const auto& l : catalog().links()) QTest::addRow("link %s", l.name.c_str()) << "link" << QString::fromStdString(l.name);
  for (const auto& m : catalog().models()) QTest::addRow("model %s", m.name.c_str()) << "workload" << QString::fromStdString(m.name);
  for (const auto& c : catalog().clusters()) QTest::addRow("cluster %s", c.name.c_str()) << "cluster" << QString::fromStdString(c.name);
}

void TestModelJson::presetsRoundTrip() {
  QFETCH(QString, kind);
  QFETCH(QString, name);
  const std::string n = name.toStdString();
  json first;
  json second;
  if (kind == "gpu") {
    first = cs::to_json(*catalog().find_gpu(n));
    auto back = cs::gpu_from_json(first, "round trip");
    QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
    second = cs::to_json(*back);
  } else if (kind == "link") {
    first = cs::to_json(*catalog().find_link(n));
    auto back = cs::link_from_json(first, "round trip");
    QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
    second = cs::to_json(*back);
  } else if (kind == "workload") {
    first = cs::to_json(*catalog().find_model(n));
    auto back = cs::workload_from_json(first, "round trip");
    QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
    second = cs::to_json(*back);
  } else {
    first = cs::to_json(*catalog().cluster(n));
    auto back = cs::cluster_from_json(first, "round trip", nullptr);  // self-contained
    QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
    second = cs::to_json(*back);
  }
  QCOMPARE(QString::fromStdString(second.dump()), QString::fromStdString(first.dump()));
  // LLaMA trains without dropout, GPT with it; a document that says nothing has it.
  if (kind == "workload" && first.contains("dropout")) {
    QCOMPARE(first["dropout"].get<bool>(), !name.startsWith("llama"));
  }
}

// A calibrated CPU-engine link keeps its cold figures through JSON; a link
// without them writes none.
// A preset without a display name is shown by its name: describe printed
// "8 x " with nothing after it.
void TestModelJson::displayNameDefaultsToName() {
  const auto gpu = cs::gpu_from_json(
      nlohmann::json::parse(
          R"({"kind":"gpu","name":"my-gpu","memory_gib":80,)"
          R"("memory_bandwidth_gb_s":3000,"peak_tflops":{"fp32":60},"source":"x"})"),
      "gpus.json");
  QVERIFY2(gpu, gpu ? "" : gpu.message().c_str());
  QCOMPARE(QString::fromStdString(gpu->display_name), QString("my-gpu"));
  const auto link = cs::link_from_json(
      nlohmann::json::parse(R"({"kind":"link","name":"my-link","type":"infiniband",)"
                            R"("bandwidth_gbps":400,"latency_us":5,"source":"x"})"),
      "links.json");
  QVERIFY2(link, link ? "" : link.message().c_str());
  QCOMPARE(QString::fromStdString(link->display_name), QString("my-link"));
}

void TestModelJson::coldLinkRoundTrip() {
  cs::Link l = *catalog().find_link("nvlink4");
  QVERIFY(!cs::to_json(l).contains("cold_bandwidth_gbps"));
  l.cold_bandwidth = 2.2e9;
  l.cold_latency = 30e-6;
  const json j = cs::to_json(l);
  auto back = cs::link_from_json(j, "round trip");
  QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
  QCOMPARE(back->cold_bandwidth, 2.2e9);
  QVERIFY(std::abs(back->cold_latency / 30e-6 - 1) < 1e-12);
  QCOMPARE(QString::fromStdString(cs::to_json(*back).dump()), QString::fromStdString(j.dump()));

  // ... and its cold bandwidth by message size.
  QVERIFY(!j.contains("cold_by_size"));
  l.cold_by_size = {{3.47e6, 4.5e9}, {19.6e6, 3.4e9}};
  const json with_sizes = cs::to_json(l);
  auto sized = cs::link_from_json(with_sizes, "round trip");
  QVERIFY2(sized.ok(), sized.ok() ? "" : sized.message().c_str());
  QCOMPARE(sized->cold_by_size.size(), std::size_t{2});
  QCOMPARE(sized->cold_by_size[1].bytes, 19.6e6);
  QVERIFY(std::abs(sized->cold_by_size[1].bandwidth / 3.4e9 - 1) < 1e-12);
  QCOMPARE(QString::fromStdString(cs::to_json(*sized).dump()),
           QString::fromStdString(with_sizes.dump()));
}

// A calibrated CPU rank keeps its optimizer's cost by parameter count.
void TestModelJson::optimizerBySizeRoundTrip() {
  cs::GpuSpec g = *catalog().find_gpu("h100-sxm");
  g.efficiency.loops.optimizer_ns = 1.2;
  g.efficiency.loops.optimizer_by_size = {{65536, 2.5}, {4194304, 1.2}};
  const json j = cs::to_json(g);
  auto back = cs::gpu_from_json(j, "round trip");
  QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
  const auto& points = back->efficiency.loops.optimizer_by_size;
  QCOMPARE(points.size(), std::size_t{2});
  QCOMPARE(points[1].parameters, 4194304.0);
  QCOMPARE(points[1].ns, 1.2);
  QCOMPARE(QString::fromStdString(cs::to_json(*back).dump()), QString::fromStdString(j.dump()));
}

void TestModelJson::planWithoutDpFillsTheCluster_data() {
  QTest::addColumn<QString>("parallel");  // "" for no parallel section
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("global_batch");
  QTest::addRow("no parallel section") << "" << 64 << 64;
  QTest::addRow("tp and pp given") << R"("parallel": {"tp": 8, "pp": 2},)" << 4 << 4;
  QTest::addRow("micro-batch and accumulation")
      << R"("parallel": {"tp": 8, "micro_batch": 2, "gradient_accumulation": 4},)" << 8 << 64;
  QTest::addRow("dp given") << R"("parallel": {"dp": 2, "tp": 8},)" << 2 << 2;
  QTest::addRow("tp not dividing the GPUs") << R"("parallel": {"tp": 3},)" << 1 << 1;
  // A whole number written as a real is the reader's 8, not a degree of 1
  // (dp filled 64, and the plan needed 512 GPUs).
  QTest::addRow("tp written 8.0") << R"("parallel": {"tp": 8.0},)" << 8 << 8;
}

// dp left out of a plan document fills the cluster, as `clusterscope plan`
// does without --dp: the same inputs planned 1 GPU of 64 from a file.
void TestModelJson::planWithoutDpFillsTheCluster() {
  QFETCH(QString, parallel);
  QFETCH(int, dp);
  QFETCH(int, global_batch);
  const json j = json::parse(QStringLiteral(R"({"kind": "plan", "cluster": "dgx-h100-64", %1
    "workload": "llama2-7b"})")
                                 .arg(parallel)
                                 .toStdString());
  auto plan = cs::plan_from_json(j, "plan.json", &catalog(), cs::ParallelRules::leave_to_caller);
  QVERIFY2(plan.ok(), plan.ok() ? "" : plan.message().c_str());
  QCOMPARE(plan->parallel.dp, dp);
  QCOMPARE(plan->parallel.global_batch, global_batch);
}

void TestModelJson::planRoundTrip() {
  const json j = json::parse(R"({"kind": "plan", "cluster": "dgx-h100-64", "workload": "llama2-70b",
    "parallel": {"dp": 2, "tp": 8, "pp": 4, "virtual_stages": 2, "sequence_parallel": true,
                 "zero_stage": 1, "micro_batch": 1, "global_batch": 64, "recompute": "selective"},
    "precision": {"compute": "fp8", "fp8": {"format": "hybrid", "amax_history": 16}}})");
  auto plan = cs::plan_from_json(j, "plan.json", &catalog());
  QVERIFY2(plan.ok(), plan.ok() ? "" : plan.message().c_str());
  QCOMPARE(plan->parallel.schedule, cs::PipelineSchedule::interleaved);
  QCOMPARE(plan->parallel.gradient_accumulation(), 32);
  QCOMPARE(plan->parallel.world_size(), 64);
  QCOMPARE(plan->precision.fp8.amax_history, 16);
  QCOMPARE(plan->workload.transformer.kv_heads, 8);
  QCOMPARE(plan->cluster.total_gpus(), 64);

  const json written = cs::to_json(*plan);
  auto again = cs::plan_from_json(written, "written", nullptr);  // needs no presets
  QVERIFY2(again.ok(), again.ok() ? "" : again.message().c_str());
  QCOMPARE(QString::fromStdString(cs::to_json(*again).dump()), QString::fromStdString(written.dump()));
  QVERIFY(again->parallel.async_tp_allreduce);  // Megatron's default when unsaid

  cs::Plan blocking = *plan;
  blocking.parallel.async_tp_allreduce = false;
  auto back = cs::plan_from_json(cs::to_json(blocking), "blocking", nullptr);
  QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
  QVERIFY(!back->parallel.async_tp_allreduce);
  QVERIFY(again->parallel.vocab_parallel);  // Megatron's default when unsaid

  cs::Plan whole = *plan;
  whole.parallel.vocab_parallel = false;
  auto read = cs::plan_from_json(cs::to_json(whole), "whole", nullptr);
  QVERIFY2(read.ok(), read.ok() ? "" : read.message().c_str());
  QVERIFY(!read->parallel.vocab_parallel);
}

void TestModelJson::validationErrors_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("expected");  // one whole line of the error

  // Clusters
  QTest::addRow("negative bandwidth")
      << "cluster"
      << R"({"name": "c", "nodes": 2, "gpus_per_node": 8, "gpu": "h100-sxm", "intra_node": "nvlink4",
            "inter_node": {"name": "ib", "type": "infiniband", "bandwidth_gbps": -1, "latency_us": 2}})"
      << "cluster.json: /inter_node/bandwidth_gbps: must be between 0.001 and 10000000 (got -1)";
  QTest::addRow("zero nodes") << "cluster"
      << R"({"name": "c", "nodes": 0, "gpus_per_node": 8, "gpu": "h100-sxm", "intra_node": "nvlink4"})"
      << "cluster.json: /nodes: must be between 1 and 1048576 (got 0)";
  QTest::addRow("fractional nodes") << "cluster"
      << R"({"name": "c", "nodes": 1.5, "gpus_per_node": 8, "gpu": "h100-sxm", "intra_node": "nvlink4"})"
      << "cluster.json: /nodes: must be an integer";
  QTest::addRow("gpu missing") << "cluster"
      << R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "intra_node": "nvlink4"})"
      << "cluster.json: /gpu: is required";
  QTest::addRow("gpu with no gpus") << "cluster"
      << R"({"name": "c", "nodes": 1, "gpus_per_node": 0, "gpu": "h100-sxm"})"
      << "cluster.json: /gpu: must be absent when gpus_per_node is 0";
  QTest::addRow("inter-node link missing") << "cluster"
      << R"({"name": "c", "nodes": 4, "gpus_per_node": 8, "gpu": "h100-sxm", "intra_node": "nvlink4"})"
      << "cluster.json: /inter_node: is required";
  QTest::addRow("intra-node link missing") << "cluster"
      << R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "gpu": "h100-sxm"})"
      << "cluster.json: /intra_node: is required";
  QTest::addRow("unknown gpu preset") << "cluster"
      << R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "gpu": "h10-sxm", "intra_node": "nvlink4"})"
      << "cluster.json: /gpu: unknown GPU preset \"h10-sxm\": did you mean \"h100-sxm\"?";
  QTest::addRow("unknown field") << "cluster"
      << R"({"name": "c", "nodse": 1, "gpus_per_node": 1, "gpu": "h100-sxm"})"
      << "cluster.json: /nodse: unknown field (did you mean \"nodes\"?)";
  QTest::addRow("not an object") << "cluster" << R"([1, 2])" << "cluster.json: /: must be an object";
  QTest::addRow("wrong kind") << "cluster"
      << R"({"kind": "gpu", "name": "c", "nodes": 1, "gpus_per_node": 0})"
      << "cluster.json: /kind: must be \"cluster\"";
  // A node of 2^31 - 1 NICs (any count was taken) is none a cluster has.
  QTest::addRow("NICs past any node's")
      << "cluster"
      << R"({"name": "c", "nodes": 2, "gpus_per_node": 8, "gpu": "h100-sxm", "intra_node": "nvlink4",
            "inter_node": "ib-ndr", "nics_per_node": 2147483647})"
      << "cluster.json: /nics_per_node: must be between 1 and 1024 (got 2147483647)";
  QTest::addRow("negative price") << "cluster"
      << R"({"name": "c", "nodes": 1, "gpus_per_node": 1, "gpu": "h100-sxm", "price_per_gpu_hour": -2})"
      << "cluster.json: /price_per_gpu_hour: must be between 0 and 1000000 (got -2)";

  // GPUs
  QTest::addRow("gpu peak missing") << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000})"
      << "gpu.json: /peak_tflops: is required";
  QTest::addRow("gpu fp32 peak zero") << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 0}})"
      << "gpu.json: /peak_tflops/fp32: must be between 1e-06 and 1000000 (got 0)";
  QTest::addRow("optimizer points out of order") << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"loops": {"optimizer_ns": 1, "optimizer_by_size": [
              {"parameters": 4194304, "ns": 1.2}, {"parameters": 65536, "ns": 2.5}]}}})"
      << "gpu.json: /efficiency/loops/optimizer_by_size/1/parameters: must be larger than the point "
         "before it (points in increasing parameter count)";
  QTest::addRow("optimizer point without ns") << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"loops": {"optimizer_by_size": [{"parameters": 65536}]}}})"
      << "gpu.json: /efficiency/loops/optimizer_by_size/0/ns: is required";
  QTest::addRow("optimizer points not a list") << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"loops": {"optimizer_by_size": 2.5}}})"
      << "gpu.json: /efficiency/loops/optimizer_by_size: must be an array of {\"parameters\", \"ns\"} points";
  QTest::addRow("gpu unknown precision") << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1, "fp6": 3}})"
      << "gpu.json: /peak_tflops/fp6: unknown field (did you mean \"fp16\"?)";
  QTest::addRow("gpu efficiency above one")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"gemm_max": 1.5}})"
      << "gpu.json: /efficiency/gemm_max: must be between 1e-06 and 1 (got 1.5)";
  QTest::addRow("gpu host link negative")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "host_link_gbps": -504})"
      << "gpu.json: /host_link_gbps: must be between 0 and 10000000 (got -504)";
  QTest::addRow("gpu overlap above one")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"gemm_memory_overlap": 2}})"
      << "gpu.json: /efficiency/gemm_memory_overlap: must be between 0 and 1 (got 2)";
  QTest::addRow("attention measured in an unknown precision")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"loops": {"attention_gflops": 50, "attention_precision": "fp64"}}})"
      << "gpu.json: /efficiency/loops/attention_precision: must be one of fp32, tf32, bf16, fp16, "
         "fp8, int8 or int4 (got \"fp64\")";
  QTest::addRow("gpu name empty") << "gpu"
      << R"({"name": "", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1}})"
      << "gpu.json: /name: must not be empty";
  // Display names are printed as they are: an escape code reached the
  // terminal raw, a newline split plan's first line.
  QTest::addRow("gpu display name with an escape code")
      << "gpu"
      << R"({"name": "g", "display_name": "G\u001b[31m", "memory_gib": 80,
            "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1}})"
      << "gpu.json: /display_name: must not hold control characters (a newline, a tab, an escape "
         "code)";
  QTest::addRow("link display name with a newline")
      << "link"
      << R"({"name": "l", "display_name": "L\nsecond line", "type": "pcie", "bandwidth_gbps": 100,
            "latency_us": 1})"
      << "link.json: /display_name: must not hold control characters (a newline, a tab, an escape "
         "code)";
  QTest::addRow("cluster display name with a carriage return")
      << "cluster"
      << R"({"name": "c", "display_name": "C\r", "nodes": 1, "gpus_per_node": 1, "gpu": "h100-sxm"})"
      << "cluster.json: /display_name: must not hold control characters (a newline, a tab, an "
         "escape code)";
  QTest::addRow("workload display name with a bell")
      << "workload"
      << R"({"name": "m", "display_name": "M\u0007", "layers": 2, "hidden": 64, "heads": 2,
            "seq_len": 8, "vocab": 10})"
      << "workload.json: /display_name: must not hold control characters (a newline, a tab, an "
         "escape code)";
  // A 20 MB plan name took 613 MB in the app's lists: names are bounded.
  QTest::addRow("gpu display name past the bound")
      << "gpu"
      << R"({"name": "g", "display_name": ")" + QString(4097, 'x') +
             R"(", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1}})"
      << "gpu.json: /display_name: must be at most 4096 characters long (it holds 4097)";
  QTest::addRow("workload name past the bound, in characters")
      << "workload"
      << R"({"name": ")" + QString(4097, QChar(0x00e9)) +
             R"(", "layers": 2, "hidden": 64, "heads": 2, "seq_len": 8, "vocab": 10})"
      << "workload.json: /name: must be at most 4096 characters long (it holds 4097)";
  QTest::addRow("gpu memory as text") << "gpu"
      << R"({"name": "g", "memory_gib": "80", "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1}})"
      << "gpu.json: /memory_gib: must be a number";

  // Links
  QTest::addRow("link type") << "link"
      << R"({"name": "l", "type": "fibre", "bandwidth_gbps": 100, "latency_us": 1})"
      << "link.json: /type: must be one of nvlink, pcie, infiniband, roce, ethernet, infinity_fabric "
         "or shared_memory (got \"fibre\")";
  QTest::addRow("link latency missing") << "link"
      << R"({"name": "l", "type": "pcie", "bandwidth_gbps": 100})"
      << "link.json: /latency_us: is required";
  QTest::addRow("link efficiency zero")
      << "link"
      << R"({"name": "l", "type": "pcie", "bandwidth_gbps": 100, "latency_us": 1, "efficiency": 0})"
      << "link.json: /efficiency: must be between 1e-06 and 1 (got 0)";
  QTest::addRow("link cold bandwidth negative") << "link"
      << R"({"name": "l", "type": "shared_memory", "bandwidth_gbps": 40, "latency_us": 6,
            "cold_bandwidth_gbps": -18, "cold_latency_us": 30})"
      << "link.json: /cold_bandwidth_gbps: must be between 0 and 10000000 (got -18)";
  QTest::addRow("link cold sizes decreasing") << "link"
      << R"({"name": "l", "type": "shared_memory", "bandwidth_gbps": 40, "latency_us": 6,
            "cold_bandwidth_gbps": 18, "cold_latency_us": 30,
            "cold_by_size": [{"bytes": 4e6, "bandwidth_gbps": 30},
                             {"bytes": 1e6, "bandwidth_gbps": 36}]})"
      << "link.json: /cold_by_size/1/bytes: must be larger than the point before it (points in "
         "increasing size)";
  QTest::addRow("link cold size without bandwidth") << "link"
      << R"({"name": "l", "type": "shared_memory", "bandwidth_gbps": 40, "latency_us": 6,
            "cold_by_size": [{"bytes": 4e6}]})"
      << "link.json: /cold_by_size/0/bandwidth_gbps: is required";
  // Figures no device has: they used to print "inf days" and "-nan %".
  QTest::addRow("gpu memory 1e30")
      << "gpu"
      << R"({"name": "g", "memory_gib": 1e30, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1}})"
      << "gpu.json: /memory_gib: must be between 0.0009765625 and 1000000 (got 1e+30)";
  QTest::addRow("gpu bf16 peak subnormal") << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000,
            "peak_tflops": {"fp32": 1, "bf16": 1e-310}})"
      << "gpu.json: /peak_tflops/bf16: must be 0 (none) or at least 1e-06 (got 1e-310)";
  // Shares of a peak the planner divides by: 1e-300 took "inf days" to train.
  QTest::addRow("gpu gemm efficiency tiny")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"gemm_max": 1e-300}})"
      << "gpu.json: /efficiency/gemm_max: must be between 1e-06 and 1 (got 1e-300)";
  QTest::addRow("gpu memory efficiency tiny")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"memory_max": 2.3e-308}})"
      << "gpu.json: /efficiency/memory_max: must be between 1e-06 and 1 (got 2.3e-308)";
  QTest::addRow("gpu bf16 efficiency tiny")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"gemm_max_by_precision": {"bf16": 1e-7}}})"
      << "gpu.json: /efficiency/gemm_max_by_precision/bf16: must be 0 (none) or at least 1e-06 "
         "(got 1e-07)";
  QTest::addRow("gpu core share tiny")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"core_share": 1e-300}})"
      << "gpu.json: /efficiency/core_share: must be between 1e-06 and 1 (got 1e-300)";
  QTest::addRow("gpu collective core share tiny")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"collective_core_share": 1e-9}})"
      << "gpu.json: /efficiency/collective_core_share: must be between 1e-06 and 1 (got 1e-09)";
  QTest::addRow("attention rate tiny")
      << "gpu"
      << R"({"name": "g", "memory_gib": 80, "memory_bandwidth_gb_s": 2000, "peak_tflops": {"fp32": 1},
            "efficiency": {"loops": {"attention_gflops": 50, "attention_backward_gflops": 2.3e-308}}})"
      << "gpu.json: /efficiency/loops/attention_backward_gflops: must be 0 (none) or at least "
         "1e-06 "
         "(got 2.3e-308)";
  QTest::addRow("link efficiency tiny")
      << "link"
      << R"({"name": "l", "type": "infiniband", "bandwidth_gbps": 400, "latency_us": 5,
            "efficiency": 2.3e-308})"
      << "link.json: /efficiency: must be between 1e-06 and 1 (got 2.3e-308)";
  // A subnormal where 0 is allowed, any figure: the documents say it is refused.
  QTest::addRow("link latency subnormal")
      << "link"
      << R"({"name": "l", "type": "infiniband", "bandwidth_gbps": 400, "latency_us": 1e-310})"
      << "link.json: /latency_us: must be 0 or at least 2.2250738585072014e-308 (got 1e-310)";
  QTest::addRow("loss scale subnormal") << "precision"
                                        << R"({"compute": "fp16", "initial_loss_scale": 1e-310})"
                                        << "precision.json: /initial_loss_scale: must be at least "
                                           "2.2250738585072014e-308 and <= 1e+38 (got 1e-310)";
  // A float's scale: 1e300 is infinity to the GEMMs it scales.
  QTest::addRow("loss scale past a float") << "precision"
                                           << R"({"compute": "fp16", "initial_loss_scale": 1e300})"
                                           << "precision.json: /initial_loss_scale: must be > 0 "
                                              "and <= 1e+38 (got 1e+300)";
  QTest::addRow("link bandwidth subnormal") << "link"
      << R"({"name": "l", "type": "infiniband", "bandwidth_gbps": 1e-300, "latency_us": 6})"
      << "link.json: /bandwidth_gbps: must be between 0.001 and 10000000 (got 1e-300)";
  QTest::addRow("link latency of a day") << "link"
      << R"({"name": "l", "type": "infiniband", "bandwidth_gbps": 400, "latency_us": 8.64e10})"
      << "link.json: /latency_us: must be between 0 and 10000000 (got 86400000000)";

  // Workloads
  // A count below one: "1 step, 0.00 FLOP" to train 1e-300 tokens.
  QTest::addRow("training tokens below one")
      << "workload"
      << R"({"name": "m", "layers": 2, "hidden": 64, "heads": 2, "seq_len": 8, "vocab": 10,
            "training_tokens": 1e-300})"
      << "workload.json: /training_tokens: must be 0 (none) or at least 1 (got 1e-300)";
  QTest::addRow("dataset samples below one")
      << "workload"
      << R"({"name": "cnn", "type": "generic", "parameters": 1e6, "forward_flops_per_sample": 1e9,
            "dataset_samples": 0.5})"
      << "workload.json: /dataset_samples: must be 0 (none) or at least 1 (got 0.5)";
  QTest::addRow("sequence past the bound") << "workload"
      << R"({"name": "m", "layers": 2, "hidden": 64, "heads": 2, "seq_len": 2147483647, "vocab": 10})"
      << "workload.json: /seq_len: must be between 1 and 16777216 (got 2147483647)";
  QTest::addRow("hidden not divisible") << "workload"
      << R"({"name": "m", "layers": 2, "hidden": 100, "heads": 3, "seq_len": 8, "vocab": 10})"
      << "workload.json: /hidden: must be divisible by heads (3)";
  QTest::addRow("kv heads not dividing") << "workload"
      << R"({"name": "m", "layers": 2, "hidden": 96, "heads": 12, "kv_heads": 5, "seq_len": 8, "vocab": 10})"
      << "workload.json: /kv_heads: must divide heads (12)";
  QTest::addRow("gated mlp needs ffn") << "workload"
      << R"({"name": "m", "layers": 2, "hidden": 96, "heads": 12, "gated_mlp": true, "seq_len": 8, "vocab": 10})"
      << "workload.json: /ffn_hidden: is required";
  QTest::addRow("layers missing") << "workload"
      << R"({"name": "m", "hidden": 96, "heads": 12, "seq_len": 8, "vocab": 10})"
      << "workload.json: /layers: is required";
  QTest::addRow("generic needs parameters") << "workload"
      << R"({"name": "cnn", "type": "generic", "forward_flops_per_sample": 1e9})"
      << "workload.json: /parameters: is required";
  QTest::addRow("transformer fields on generic") << "workload"
      << R"({"name": "cnn", "type": "generic", "parameters": 1e6, "forward_flops_per_sample": 1e9, "layers": 3})"
      << "workload.json: /layers: unknown field";
  QTest::addRow("bad optimizer") << "workload"
      << R"({"name": "m", "layers": 2, "hidden": 96, "heads": 12, "seq_len": 8, "vocab": 10, "optimizer": "lion"})"
      << "workload.json: /optimizer: must be one of adamw, adam, sgd or sgd_momentum (got \"lion\")";

  // Parallel plans
  QTest::addRow("global batch not a multiple") << "parallel"
      << R"({"dp": 4, "micro_batch": 2, "global_batch": 12})"
      << "parallel.json: /global_batch: must be a multiple of dp x micro_batch = 8 (got 12)";
  QTest::addRow("zero stage 4") << "parallel" << R"({"zero_stage": 4})"
      << "parallel.json: /zero_stage: must be between 0 and 3 (got 4)";
  QTest::addRow("sequence parallel without tp") << "parallel" << R"({"sequence_parallel": true})"
      << "parallel.json: /sequence_parallel: needs tp >= 2 (it splits the tensor-parallel group's "
         "layer norms and dropouts)";
  QTest::addRow("virtual stages with 1f1b") << "parallel"
      << R"({"pp": 4, "virtual_stages": 2, "schedule": "1f1b"})"
      << "parallel.json: /virtual_stages: must be 1 unless the schedule is interleaved";
  QTest::addRow("interleaved without pp")
      << "parallel"
      << R"({"virtual_stages": 2})"
      << "parallel.json: /virtual_stages: the interleaved schedule (2 chunks per pipeline rank) "
         "needs pp >= 2 (got 1)";
  QTest::addRow("accumulation disagrees") << "parallel"
      << R"({"dp": 2, "micro_batch": 1, "global_batch": 8, "gradient_accumulation": 3})"
      << "parallel.json: /gradient_accumulation: must equal global_batch / (dp x micro_batch) = 4";
  // The articles' DeepSpeed configuration: 32 sequences are no accumulation
  // of 4 per GPU on 32 GPUs (it read "= 0", 32 / 128 cut to an int).
  QTest::addRow("accumulation of no whole global batch")
      << "parallel"
      << R"({"dp": 32, "micro_batch": 4, "global_batch": 32, "gradient_accumulation": 2})"
      << "parallel.json: /global_batch: must equal dp x micro_batch x gradient_accumulation = "
         "32 x 4 x 2 = 256 (got 32)";
  QTest::addRow("recompute name") << "parallel" << R"({"recompute": "some"})"
      << "parallel.json: /recompute: must be one of none, selective or full (got \"some\")";
  QTest::addRow("tp zero") << "parallel" << R"({"tp": 0})" << "parallel.json: /tp: must be >= 1 (got 0)";
  QTest::addRow("vocab_parallel not a boolean") << "parallel" << R"({"tp": 2, "vocab_parallel": "no"})"
      << "parallel.json: /vocab_parallel: must be true or false";
  // Products past an int: they divided by zero (SIGFPE) before.
  QTest::addRow("dp x micro_batch past an int") << "parallel"
      << R"({"dp": 65536, "micro_batch": 65536, "global_batch": 1})"
      << "parallel.json: /global_batch: must be a multiple of dp x micro_batch = 4294967296 (got 1)";
  QTest::addRow("accumulation past an int") << "parallel"
      << R"({"dp": 65536, "micro_batch": 65536, "gradient_accumulation": 2})"
      << "parallel.json: /global_batch: gradient_accumulation x dp x micro_batch = 8589934592: "
         "more than 2147483647";
  QTest::addRow("nodes past a cluster") << "cluster"
      << R"({"name": "c", "nodes": 2097152, "gpus_per_node": 1024, "gpu": "h100-sxm",
            "intra_node": "nvlink4", "inter_node": "ib-ndr"})"
      << "cluster.json: /nodes: must be between 1 and 1048576 (got 2097152)";

  // Precision plans
  QTest::addRow("compute fp12") << "precision" << R"({"compute": "fp12"})"
      << "precision.json: /compute: must be one of fp32, tf32, bf16, fp16, fp8, int8 or int4 (got \"fp12\")";
  QTest::addRow("fp8 options on bf16") << "precision"
      << R"({"compute": "bf16", "fp8": {"format": "e4m3"}})"
      << "precision.json: /fp8: applies only when compute is fp8";
  QTest::addRow("int8 training") << "precision" << R"({"compute": "int8", "inference": false})"
      << "precision.json: /inference: must be true: int8 and int4 plans are for inference only";
  QTest::addRow("fp8 format") << "precision" << R"({"compute": "fp8", "fp8": {"format": "e6m1"}})"
      << "precision.json: /fp8/format: must be one of e4m3 or hybrid (got \"e6m1\")";

  // Plans: problems point into the nested documents.
  QTest::addRow("plan nested tp") << "plan"
      << R"({"cluster": "dgx-h100-8", "workload": "llama2-7b", "parallel": {"tp": -2}})"
      << "plan.json: /parallel/tp: must be >= 1 (got -2)";
  QTest::addRow("plan unknown model") << "plan"
      << R"({"cluster": "dgx-h100-8", "workload": "llama-7b", "parallel": {}})"
      << "plan.json: /workload: unknown model preset \"llama-7b\": did you mean \"llama2-7b\"?";
  QTest::addRow("plan unknown cluster") << "plan"
      << R"({"cluster": "dgx-h100-9", "workload": "llama2-7b", "parallel": {}})"
      << "plan.json: /cluster: unknown cluster preset \"dgx-h100-9\": did you mean \"dgx-h100-8\"?";
  // A bound is printed so that it reads back as itself: 1/1024 printed as
  // 0.000976562 refused the value it named.
  QTest::addRow("bucket below 1/1024 MiB")
      << "parallel"
      << R"({"bucket_mib": 0.000976562})"
      << "parallel.json: /bucket_mib: must be between 0.0009765625 and 1048576 (got 0.000976562)";
  QTest::addRow("plan precision string") << "plan"
      << R"({"cluster": "dgx-h100-8", "workload": "llama2-7b", "precision": "fp64"})"
      << "plan.json: /precision: must be one of fp32, tf32, bf16, fp16, fp8, int8 or int4";
}

void TestModelJson::validationErrors() {
  QFETCH(QString, kind);
  QFETCH(QString, text);
  QFETCH(QString, expected);
  const QString error = read_error(kind, text.toStdString());
  QVERIFY2(!error.isEmpty(), "the document was accepted");
  bool found = false;
  for (const QString& line : error.split('\n')) {
    // Unknown preset messages go on to list the known names.
    if (line == expected || line.startsWith(expected + " (known:")) found = true;
  }
  QVERIFY2(found, qPrintable("expected line: " + expected + "\ngot:\n" + error));
}

// A value refused is not then held against the others at its default: a
// global batch past 32 bits also read "must be a multiple of dp x
// micro_batch = 2 (got 1)".
void TestModelJson::refusedValueRaisesNoRelation() {
  const QString error =
      read_error("parallel", R"({"dp": 2, "micro_batch": 1, "global_batch": 1152921504606846976})");
  QVERIFY2(error.contains("parallel.json: /global_batch: must fit in a 32-bit integer"),
           qPrintable(error));
  QVERIFY2(!error.contains("multiple of"), qPrintable(error));
  // ... nor a GPU count past the range taken for 0 ("/gpu: must be absent
  // when gpus_per_node is 0").
  const QString gpus = read_error(
      "cluster",
      R"({"name": "c", "nodes": 1, "gpus_per_node": 100000000, "gpu": "h100-sxm", "intra_node": "nvlink4"})");
  QVERIFY2(gpus.contains("/gpus_per_node: must be between 0 and 1024 (got 100000000)"),
           qPrintable(gpus));
  QVERIFY2(!gpus.contains("/gpu:"), qPrintable(gpus));
}

// A key or a preset name of megabytes was echoed whole (a 100 MB key wrote
// 100 MB to stderr) and the unknown key's suggestion took seconds per
// megabyte: messages quote the first 80 characters, then "…", and no name
// that far in length from the key is compared with it. Cut between UTF-8
// characters (a two-byte one at the cut).
void TestModelJson::longKeysAndNamesAreCutInMessages_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("expected");
  const QString cluster =
      R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "gpu": "h100-sxm", "intra_node": "nvlink4", )";
  const QString x80(80, 'x');
  QTest::addRow("unknown key of 20 MB")
      << "cluster" << cluster + "\"" + QString(20'000'000, 'x') + "\": 1}"
      << "cluster.json: /" + x80 + "…: unknown field";
  QTest::addRow("unknown key, a character at the cut")
      << "cluster" << cluster + "\"" + QString(79, 'x') + "éé\": 1}"
      << "cluster.json: /" + QString(79, 'x') + "é…: unknown field";
  QTest::addRow("key of 80 characters, whole") << "cluster" << cluster + "\"" + x80 + "\": 1}"
                                               << "cluster.json: /" + x80 + ": unknown field";
  QTest::addRow("unknown GPU preset")
      << "cluster"
      << R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "intra_node": "nvlink4", "gpu": ")" +
             QString(100000, 'x') + "\"}"
      << "cluster.json: /gpu: unknown GPU preset \"" + x80 + "…\"";
  QTest::addRow("name with a slash")
      << "gpu"
      << "{\"name\": \"a/" + QString(100000, 'x') + "\"}"
      << "gpu.json: /name: must not hold \"/\" (\"a/" + QString(78, 'x') +
             "…\" would read as a file's path where a preset is named)";
}

void TestModelJson::longKeysAndNamesAreCutInMessages() {
  QFETCH(QString, kind);
  QFETCH(QString, text);
  QFETCH(QString, expected);
  QElapsedTimer timer;
  timer.start();
  const QString error = read_error(kind, text.toStdString());
  // Unbounded, the 20 MB key took about 10 s of comparisons.
  QVERIFY2(timer.elapsed() < 3000, qPrintable(QString::number(timer.elapsed()) + " ms"));
  QVERIFY2(error.size() < 10000, qPrintable(error.left(300)));
  bool found = false;
  for (const QString& line : error.split('\n')) {
    if (line == expected || line.startsWith(expected + " (known:")) found = true;
  }
  QVERIFY2(found, qPrintable("expected line: " + expected + "\ngot:\n" + error.left(3000)));
}

void TestModelJson::validDocuments_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("text");
  QTest::addRow("cluster by presets") << "cluster" << kGoodCluster;
  QTest::addRow("cpu-only cluster") << "cluster" << R"({"name": "lap", "nodes": 1, "gpus_per_node": 0})";
  QTest::addRow("link measured cold too") << "link"
      << R"({"name": "l", "type": "shared_memory", "bandwidth_gbps": 40, "latency_us": 6,
            "cold_bandwidth_gbps": 18, "cold_latency_us": 30})";
  QTest::addRow("parallel from accumulation") << "parallel"
      << R"({"dp": 2, "micro_batch": 2, "gradient_accumulation": 4})";
  QTest::addRow("blocking tensor-parallel all-reduce") << "parallel"
      << R"({"tp": 2, "async_tp_allreduce": false})";
  QTest::addRow("embedding and head whole per rank") << "parallel"
      << R"({"tp": 2, "vocab_parallel": false})";
  QTest::addRow("precision fp16") << "precision" << R"({"compute": "fp16"})";
  QTest::addRow("int4 inference") << "precision"
      << R"({"compute": "int4", "quantization": {"symmetric": true}})";
  // The bound counts characters, not bytes: 4096 two-byte ones are read.
  QTest::addRow("name at the bound")
      << "link"
      << R"({"name": ")" + QString(4096, QChar(0x00e9)) +
             R"(", "type": "pcie", "bandwidth_gbps": 100, "latency_us": 1})";
  QTest::addRow("generic cnn") << "workload"
      << R"({"name": "cnn", "type": "generic", "parameters": 1e6, "forward_flops_per_sample": 2e9,
            "activation_bytes_per_sample": 1e7, "dataset_samples": 50000, "epochs": 3})";
}

void TestModelJson::validDocuments() {
  QFETCH(QString, kind);
  QFETCH(QString, text);
  const QString error = read_error(kind, text.toStdString());
  QVERIFY2(error.isEmpty(), qPrintable(error));
}

void TestModelJson::detectKind_data() {
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("kind");
  QTest::addRow("declared") << R"({"kind": "workload"})" << "workload";
  QTest::addRow("cluster") << kGoodCluster << "cluster";
  QTest::addRow("gpu") << R"({"name": "g", "peak_tflops": {}})" << "gpu";
  QTest::addRow("link") << R"({"name": "l", "bandwidth_gbps": 1})" << "link";
  QTest::addRow("transformer") << R"({"layers": 1})" << "workload";
  QTest::addRow("generic") << R"({"parameters": 1})" << "workload";
  QTest::addRow("parallel") << R"({"tp": 2})" << "parallel_plan";
  QTest::addRow("precision") << R"({"compute": "bf16"})" << "precision_plan";
  QTest::addRow("plan") << R"({"cluster": "x", "workload": "y"})" << "plan";
}

void TestModelJson::detectKind() {
  QFETCH(QString, text);
  QFETCH(QString, kind);
  auto k = cs::detect_kind(json::parse(text.toStdString()), "doc");
  QVERIFY(k.ok());
  QCOMPARE(QString::fromStdString(std::string(cs::to_string(*k))), kind);

  auto unknown = cs::detect_kind(json::parse(R"({"colour": "blue"})"), "doc.json");
  QVERIFY(!unknown.ok());
  QVERIFY(unknown.message().starts_with("doc.json: /: cannot tell what this document is"));
}

// Exact counts as the released checkpoints report them.
void TestModelJson::parameterCount_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<double>("parameters");
  // Hugging Face model cards / num_parameters() of the released weights.
  QTest::addRow("gpt2-small") << "gpt2-small" << 124439808.0;
  QTest::addRow("llama2-7b") << "llama2-7b" << 6738415616.0;
  QTest::addRow("llama2-70b") << "llama2-70b" << 68976648192.0;
  QTest::addRow("llama3-8b") << "llama3-8b" << 8030261248.0;
  // torchvision's documented counts.
  QTest::addRow("resnet18") << "resnet18" << 11689512.0;
  QTest::addRow("resnet50") << "resnet50" << 25557032.0;
}

void TestModelJson::parameterCount() {
  QFETCH(QString, model);
  QFETCH(double, parameters);
  const cs::Workload* w = catalog().find_model(model.toStdString());
  QVERIFY(w);
  QCOMPARE(cs::parameter_count(*w), parameters);
}

void TestModelJson::precisionDefaults() {
  auto fp16 = cs::PrecisionPlan::for_compute(cs::Precision::fp16);
  QCOMPARE(fp16.loss_scaling, cs::LossScaling::dynamic);
  QVERIFY(fp16.master_weights);
  auto fp32 = cs::PrecisionPlan::for_compute(cs::Precision::fp32);
  QVERIFY(!fp32.master_weights);
  QCOMPARE(fp32.gradients, cs::Precision::fp32);
  auto int8 = cs::PrecisionPlan::for_compute(cs::Precision::int8);
  QVERIFY(int8.inference);
  QCOMPARE(cs::bytes_per_element(cs::Precision::int4), 0.5);
  QCOMPARE(cs::precision_from_string("bf16"), std::optional(cs::Precision::bf16));
  QVERIFY(!cs::precision_from_string("fp64"));
}

void TestModelJson::clusterTotals() {
  auto c = catalog().cluster("dgx-h100-32");
  QVERIFY(c.ok());
  const cs::ClusterTotals t = cs::totals(*c);
  QCOMPARE(t.gpus, 32);
  QCOMPARE(t.peak.bf16, 32 * 989.4e12);
  QCOMPARE(t.gpu_memory_bytes, 32 * 79.65 * (1 << 30));  // 81559 MiB, as nvidia-smi has it
  QCOMPARE(t.per_gpu_intra_bandwidth, 450e9);            // NVLink 4 per direction
  QCOMPARE(t.per_gpu_inter_bandwidth, 50e9);             // one NDR port per GPU
  QCOMPARE(t.bisection_bandwidth, 2 * 8 * 50e9);         // half the nodes' NICs
  QCOMPARE(t.power_watts, 32 * 700.0);

  auto one = catalog().cluster("dgx-a100-8");
  QVERIFY(one.ok());
  QCOMPARE(cs::totals(*one).bisection_bandwidth, 4 * 300e9);  // NVSwitch, 4 GPUs each way
  QCOMPARE(cs::totals(*one).per_gpu_inter_bandwidth, 0.0);

  // No switch: each MI300X has a 64 GB/s link to each of its 7 peers (448
  // GB/s in all); a cut into 4 and 4 crosses 16 of those links.
  auto mesh = catalog().cluster("mi300x-8");
  QVERIFY(mesh.ok());
  QCOMPARE(mesh->intra_node.bandwidth, 448e9);
  QCOMPARE(cs::totals(*mesh).bisection_bandwidth, 4 * 4 * 64e9);
}

void TestModelJson::nicShareIsCappedByTheHostLink_data() {
  QTest::addColumn<int>("gpusPerNode");
  QTest::addColumn<double>("hostLinkGbps");  // -1: the preset's (PCIe 5.0 x16, 504)
  QTest::addColumn<double>("perGpu");        // bytes/s per direction
  QTest::addColumn<bool>("capped");
  // dgx-h100-32: 4 nodes, 8 NDR NICs (50 GB/s each) a node.
  QTest::addRow("8 GPUs, a NIC each") << 8 << -1.0 << 50e9 << false;
  QTest::addRow("4 GPUs, 2 NICs each, over PCIe 5") << 4 << -1.0 << 63e9 << true;
  QTest::addRow("2 GPUs, 4 NICs each, over PCIe 5") << 2 << -1.0 << 63e9 << true;
  QTest::addRow("2 GPUs, PCIe 6 carries 3 of the 4 NICs") << 2 << 1200.0 << 150e9 << true;
  QTest::addRow("2 GPUs, host link not known") << 2 << 0.0 << 200e9 << false;
}

// Every GPU's traffic to the NICs crosses its own PCIe link: 2 H100s of a
// node with 8 NDR NICs were given 200 GB/s each, 3 times what the link carries.
void TestModelJson::nicShareIsCappedByTheHostLink() {
  QFETCH(int, gpusPerNode);
  QFETCH(double, hostLinkGbps);
  QFETCH(double, perGpu);
  QFETCH(bool, capped);
  auto c = catalog().cluster("dgx-h100-32");
  QVERIFY(c.ok());
  QCOMPARE(cs::to_json(*c->gpu)["host_link_gbps"].get<double>(), 504.0);
  c->gpus_per_node = gpusPerNode;
  if (hostLinkGbps >= 0) c->gpu->host_link_bandwidth = hostLinkGbps * 1e9 / 8;
  QCOMPARE(cs::nic_share_capped_by_host_link(*c), capped);
  const cs::ClusterTotals t = cs::totals(*c);
  QCOMPARE(t.per_gpu_inter_bandwidth, perGpu);
  QCOMPARE(t.bisection_bandwidth, 2 * gpusPerNode * perGpu);  // half the nodes' GPUs' shares
}

void TestModelJson::readJsonFileErrors() {
  QTemporaryDir dir;
  const std::string missing = dir.filePath("missing.json").toStdString();
  auto r = cs::read_json_file(missing);
  QVERIFY(!r.ok());
  QCOMPARE(QString::fromStdString(r.message()),
           QString::fromStdString(missing + ": cannot open file: No such file or directory"));

  const std::string broken = dir.filePath("broken.json").toStdString();
  std::ofstream(broken) << "{\n  \"nodes\": 2,\n  \"gpu\": ]\n}\n";
  auto b = cs::read_json_file(broken);
  QVERIFY(!b.ok());
  QVERIFY2(b.message().starts_with(broken + ":3:10: invalid JSON: syntax error"), b.message().c_str());

  // A number past a double's range, named with its place (an "internal
  // error" naming no file before); a folder.
  const std::string huge = dir.filePath("huge.json").toStdString();
  std::ofstream(huge) << "{\n  \"nodes\": 1e309\n}\n";
  auto h = cs::read_json_file(huge);
  QVERIFY(!h.ok());
  QCOMPARE(QString::fromStdString(h.message()),
           QString::fromStdString(huge + ":2:12: invalid JSON: number overflow parsing '1e309' "
                                         "(beyond a double's range)"));
  auto folder = cs::read_json_file(dir.path().toStdString());
  QVERIFY(!folder.ok());
  QCOMPARE(QString::fromStdString(folder.message()),
           dir.path() + ": is a folder, not a JSON file");

  // Bytes that are all NUL (a file zeroed by a crash or a power cut, an
  // autosave say) were said to be UTF-16 text, to save as UTF-8; NULs that
  // only begin a file are a binary file's, and UTF-16 is still UTF-16.
  auto read_bytes = [&](const char* name, const std::string& bytes) {
    const std::string path = dir.filePath(name).toStdString();
    std::ofstream(path, std::ios::binary) << bytes;
    return std::pair{path, cs::read_json_file(path)};
  };
  const auto [zeroed, z] = read_bytes("zeroed.json", std::string(4096, '\0'));
  QVERIFY(!z.ok());
  QCOMPARE(QString::fromStdString(z.message()),
           QString::fromStdString(zeroed + ": invalid JSON: all 4096 bytes are NUL: the file is "
                                           "damaged (zeroed, as a crash or a power cut can leave "
                                           "a file)"));
  const auto [padded, p] = read_bytes("padded.json", std::string(2, '\0') + "{}");
  QVERIFY(!p.ok());
  QVERIFY2(p.message().starts_with(padded + ":1:1: invalid JSON: a NUL byte"), p.message().c_str());
  for (const std::string& wide : {std::string("{\0}\0", 4), std::string("\0{\0}", 4)}) {
    const auto [utf16, u] = read_bytes("utf16.json", wide);
    QVERIFY(!u.ok());
    QCOMPARE(QString::fromStdString(u.message()),
             QString::fromStdString(utf16 + ": invalid JSON: UTF-16 text; save it as UTF-8"));
  }
}

void TestModelJson::writeJsonFileRoundTrip() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("cluster.json").toStdString();
  const json written = cs::to_json(*catalog().cluster("dgx-a100-64"));
  QVERIFY(cs::write_json_file(path, written).ok());
  QVERIFY(!QFile::exists(QString::fromStdString(path + ".partial")));
  auto read = cs::read_json_file(path);
  QVERIFY(read.ok());
  QCOMPARE(QString::fromStdString(read->dump()), QString::fromStdString(written.dump()));

  auto refused = cs::write_json_file(dir.filePath("no/such/dir/x.json").toStdString(), written);
  QVERIFY(!refused.ok());
  QVERIFY(refused.message().find("cannot write") != std::string::npos);
  // ... and why (a read-only disk, a name too long said nothing more).
  QVERIFY2(refused.message().find("No such file or directory") != std::string::npos,
           refused.message().c_str());
  const std::string long_name = dir.filePath(QString(250, 'x')).toStdString();
  auto too_long = cs::write_json_file(long_name, written);
  QVERIFY2(!too_long.ok() && too_long.message().find("File name too long") != std::string::npos,
           too_long.message().c_str());
}

void TestModelJson::validateFileLists() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("list.json").toStdString();
  std::ofstream(path) << R"([{"kind": "parallel_plan", "tp": 2}, {"kind": "link", "name": "x"}])";
  auto r = cs::validate_file(path, &catalog());
  QVERIFY(!r.ok());
  QVERIFY2(r.message().find(path + ": /1/type: is required") != std::string::npos, r.message().c_str());
  QVERIFY2(r.message().find(path + ": /1/bandwidth_gbps: is required") != std::string::npos,
           r.message().c_str());

  for (const char* f : {"gpus.json", "links.json", "models.json", "clusters.json"}) {
    auto ok = cs::validate_file(std::string(CS_SOURCE_DIR "/resources/presets/") + f, &catalog());
    QVERIFY2(ok.ok(), ok.ok() ? "" : ok.message().c_str());
    QVERIFY(ok->size() >= 10);
  }
}


// A file is written beside its path and takes its place only once whole: a
// disk that fills mid-write (a file-size limit, every write past it failing
// with EFBIG) keeps the file that was there and leaves nothing beside it. A
// symbolic link is written through, and stays a link.
void TestModelJson::writeJsonFileWholeOrNotAtAll() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("cluster.json").toStdString();
  const json small = cs::to_json(*catalog().cluster("dgx-a100-8"));
  QVERIFY(cs::write_json_file(path, small).ok());
  const auto before = std::filesystem::file_size(path);

  json large = json::array();
  for (int i = 0; i < 64; ++i)
    large.push_back(small);
  rlimit saved{};
  QCOMPARE(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limit = saved;
  limit.rlim_cur = static_cast<rlim_t>(2 * before);
  QCOMPARE(setrlimit(RLIMIT_FSIZE, &limit), 0);
  const cs::Status full = cs::write_json_file(path, large);
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  QVERIFY(!full.ok());
  QVERIFY2(full.message().starts_with(path + ": cannot write"), full.message().c_str());
  QCOMPARE(std::filesystem::file_size(path), before);
  QCOMPARE(cs::read_json_file(path)->dump(), small.dump());
  QVERIFY(!std::filesystem::exists(path + ".partial"));

  // Through a symbolic link: a failed write keeps the target whole (it was
  // written in place, and a full disk left it cut short).
  const std::string link = dir.filePath("link.json").toStdString();
  std::filesystem::create_symlink(path, link);
  QCOMPARE(setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::signal(SIGXFSZ, SIG_IGN);
  const cs::Status full_through_link = cs::write_json_file(link, large);
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  QVERIFY(!full_through_link.ok());
  QCOMPARE(cs::read_json_file(path)->dump(), small.dump());
  QVERIFY(!std::filesystem::exists(path + ".partial"));
  QVERIFY(cs::write_json_file(link, large).ok());
  QVERIFY(std::filesystem::is_symlink(link));
  QCOMPARE(cs::read_json_file(path)->dump(), large.dump());
}

QTEST_GUILESS_MAIN(TestModelJson)
#include "tst_model_json.moc"
