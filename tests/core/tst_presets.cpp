// The preset catalog: the presets the product promises, their sources, the
// loader's refusals, where presets are found, and "this machine".

#include <QTemporaryDir>
#include <QtTest>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/host_probe.h"
#include "core/model_json.h"
#include "core/presets.h"

namespace {

const char* kPresetsDir = CS_SOURCE_DIR "/resources/presets";

cs::PresetCatalog load_catalog() {
  auto c = cs::PresetCatalog::load(kPresetsDir);
  if (!c) qFatal("%s", c.message().c_str());
  return std::move(c).value();
}

// A presets folder in `dir` with the real files, one of them replaced by `text`.
void copy_presets(const QTemporaryDir& dir, const QString& replace = {},
                  const std::string& text = {}) {
  for (const char* f : {"gpus.json", "links.json", "models.json", "clusters.json"}) {
    const QString target = dir.filePath(f);
    if (f == replace) {
      std::ofstream(target.toStdString()) << text;
    } else {
      QFile::copy(QString(kPresetsDir) + "/" + f, target);
    }
  }
}

}  // namespace

class TestPresets : public QObject {
  Q_OBJECT

 private slots:
  void promisedPresets_data();
  void promisedPresets();
  void everyPresetCitesASource();
  void clusterPresetsResolve();
  void loaderRefusals_data();
  void loaderRefusals();
  void findsPresetsFromEnvironment();
  void matchDevice_data();
  void matchDevice();
  void thisMachineWithoutGpu();
  void thisMachineWithGpus();
  void probeThisHost();
  void unknownNameMessage();
  void userPresetsMergeOverShipped();
  void userPresetsRefusals_data();
  void userPresetsRefusals();
  void userPresetsFolder();
  void userPresetsPathThatIsAFile();
  void calibratedGpuRoundTrip();
  void loadDefaultNamesBrokenUserFile();
};

void TestPresets::promisedPresets_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("name");
  for (const char* g :
       {"v100-sxm2-32gb", "a100-40gb", "a100-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm",
        "h100-pcie", "h200", "b200", "l40s", "rtx-4090", "mi300x"}) {
    QTest::addRow("gpu %s", g) << "gpu" << g;
  }
  for (const char* l : {"nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5", "ib-hdr", "ib-ndr",
                        "ib-xdr", "roce-100", "roce-200", "roce-400"}) {
    QTest::addRow("link %s", l) << "link" << l;
  }
  for (const char* m :
       {"gpt2-small",    "gpt2-medium",   "gpt2-large",  "gpt2-xl",          "gpt3-125m",
        "gpt3-1.3b",     "gpt3-13b",      "gpt3-175b",   "llama2-7b",        "llama2-13b",
        "llama2-70b",    "llama3-8b",     "llama3-70b",  "llama3-405b",      "bert-base",
        "bert-large",    "resnet18",      "resnet50",    "resnet18-cifar10", "megatron-22b",
        "megatron-175b", "megatron-530b", "megatron-1t", "megatron-1.7b",    "megatron-145.6b"}) {
    QTest::addRow("model %s", m) << "model" << m;
  }
  for (const char* c :
       {"dgx-a100-8", "dgx-a100-40gb-8", "dgx-a100-64", "dgx-a100-1024", "dgx-h100-8",
        "dgx-h100-32", "dgx-h100-256", "rtx4090-8-pcie", "laptop-cpu", "this-machine"}) {
    QTest::addRow("cluster %s", c) << "cluster" << c;
  }
}

void TestPresets::promisedPresets() {
  QFETCH(QString, kind);
  QFETCH(QString, name);
  const cs::PresetCatalog c = load_catalog();
  const std::string n = name.toStdString();
  if (kind == "gpu") QVERIFY(c.find_gpu(n));
  if (kind == "link") QVERIFY(c.find_link(n));
  if (kind == "model") QVERIFY(c.find_model(n));
  if (kind == "cluster") {
    auto cl = c.cluster(n);
    QVERIFY2(cl.ok(), cl.ok() ? "" : cl.message().c_str());
  }
}

void TestPresets::everyPresetCitesASource() {
  const cs::PresetCatalog c = load_catalog();
  for (const auto& g : c.gpus())
    QVERIFY2(!g.source.empty(), g.name.c_str());
  for (const auto& l : c.links())
    QVERIFY2(!l.source.empty(), l.name.c_str());
  for (const auto& m : c.models())
    QVERIFY2(!m.source.empty(), m.name.c_str());
  for (const auto& cl : c.clusters())
    QVERIFY2(!cl.source.empty(), cl.name.c_str());
}

void TestPresets::clusterPresetsResolve() {
  const cs::PresetCatalog c = load_catalog();
  auto pod = c.cluster("dgx-a100-280");  // the 530B run of Korthikanti et al.
  QVERIFY(pod.ok());
  QCOMPARE(pod->total_gpus(), 280);
  QCOMPARE(pod->gpu->name, std::string("a100-80gb"));
  QCOMPARE(pod->intra_node.name, std::string("nvlink3"));
  QCOMPARE(pod->inter_node->name, std::string("ib-hdr"));
  QCOMPARE(pod->nics_per_node, 8);

  auto laptop = c.cluster("laptop-cpu");
  QVERIFY(laptop.ok());
  QCOMPARE(laptop->gpus_per_node, 0);
  QVERIFY(!laptop->gpu);
}

void TestPresets::loaderRefusals_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("expected");
  QTest::addRow("no source")
      << "links.json"
      << R"([{"name": "x", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1}])"
      << "links.json [0]: /source: is required for a preset";
  QTest::addRow("duplicate")
      << "links.json"
      << R"([{"name": "x", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1, "source": "s"},
            {"name": "x", "type": "pcie", "bandwidth_gbps": 2, "latency_us": 1, "source": "s"}])"
      << "links.json [1]: /name: \"x\" is listed twice";
  QTest::addRow("not a list") << "gpus.json"
                              << R"({"name": "g"})"
                              << "gpus.json: /: must be a list of presets";
  QTest::addRow("broken json") << "models.json"
                               << "[{"
                               << "models.json:1:2: invalid JSON";
  QTest::addRow("reserved name")
      << "clusters.json"
      << R"([{"name": "this-machine", "nodes": 1, "gpus_per_node": 0, "source": "s"}])"
      << "clusters.json: \"this-machine\" is reserved for the detected machine";
}

void TestPresets::loaderRefusals() {
  QFETCH(QString, file);
  QFETCH(QString, text);
  QFETCH(QString, expected);
  QTemporaryDir dir;
  copy_presets(dir, file, text.toStdString());
  auto c = cs::PresetCatalog::load(dir.path().toStdString());
  QVERIFY(!c.ok());
  QVERIFY2(c.message().find(expected.toStdString()) != std::string::npos, c.message().c_str());
  QVERIFY2(c.message().starts_with(dir.path().toStdString()), "the message names the file");
}

void TestPresets::findsPresetsFromEnvironment() {
  QTemporaryDir dir;
  copy_presets(dir);
  const QByteArray old = qgetenv("CLUSTERSCOPE_PRESETS");
  qputenv("CLUSTERSCOPE_PRESETS", dir.path().toUtf8());
  auto found = cs::find_presets_dir();
  QVERIFY(found);
  QCOMPARE(QString::fromStdString(found->string()), dir.path());

  // A folder without presets is an error naming it: the user set it on purpose
  // (it used to be passed over silently for the presets in the source tree).
  qputenv("CLUSTERSCOPE_PRESETS", "/nonexistent");
  found = cs::find_presets_dir();
  QVERIFY(!found);
  QCOMPARE(QString::fromStdString(found.message()),
           QString("CLUSTERSCOPE_PRESETS is /nonexistent: not a presets folder (gpus.json and "
                   "clusters.json missing)"));
  auto catalog = cs::PresetCatalog::load_default();
  QVERIFY(!catalog);
  QVERIFY(catalog.message().starts_with("CLUSTERSCOPE_PRESETS is /nonexistent"));
  // Unset, the source tree's presets are found.
  qunsetenv("CLUSTERSCOPE_PRESETS");
  found = cs::find_presets_dir();
  QVERIFY(found);
  QCOMPARE(QString::fromStdString(found->string()), QString(kPresetsDir));
  qputenv("CLUSTERSCOPE_PRESETS", old);
}

void TestPresets::matchDevice_data() {
  QTest::addColumn<QString>("device");
  QTest::addColumn<QString>("preset");
  // Names as the CUDA driver reports them.
  QTest::addRow("H100 SXM") << "NVIDIA H100 80GB HBM3"
                            << "h100-sxm";
  QTest::addRow("H100 PCIe") << "NVIDIA H100 PCIe"
                             << "h100-pcie";
  QTest::addRow("H200") << "NVIDIA H200"
                        << "h200";
  QTest::addRow("A100 80GB") << "NVIDIA A100-SXM4-80GB"
                             << "a100-80gb";
  QTest::addRow("A100 40GB") << "NVIDIA A100-SXM4-40GB"
                             << "a100-40gb";
  // The PCIe boards: no NVLink switch, 250 / 300 W. "A100 80GB" alone took
  // the SXM4 board's preset, 2.6 times too fast a tensor-parallel step.
  QTest::addRow("A100 PCIe 40GB") << "NVIDIA A100-PCIE-40GB"
                                  << "a100-pcie-40gb";
  QTest::addRow("A100 PCIe 80GB") << "NVIDIA A100 80GB PCIe"
                                  << "a100-pcie-80gb";
  // The SXM4 boards by their board numbers, as some drivers name them
  // (PyTorch traces of Meta's A100s): no preset matched them.
  QTest::addRow("A100 PG509-200") << "NVIDIA A100-PG509-200"
                                  << "a100-40gb";
  QTest::addRow("A100 PG509-210") << "NVIDIA PG509-210"
                                  << "a100-80gb";
  QTest::addRow("A100 PG509-200, rank's device") << "NVIDIA A100-PG509-200 (GPU 0)"
                                                 << "a100-40gb";
  QTest::addRow("RTX 4090") << "NVIDIA GeForce RTX 4090"
                            << "rtx-4090";
  QTest::addRow("L40S") << "NVIDIA L40S"
                        << "l40s";
  QTest::addRow("unknown") << "NVIDIA T4"
                           << "";
  // A rank's device names its GPU too.
  QTest::addRow("H200, rank's device") << "NVIDIA H200 (GPU 0)"
                                       << "h200";
  // Other boards whose names hold a preset's: "H200" took the H200 NVL
  // (600 W, 16 % lower peaks), the GH200 and the RTX 4090 D; "H100 80GB
  // HBM3" a MIG slice of a seventh of the GPU.
  QTest::addRow("H200 NVL") << "NVIDIA H200 NVL"
                            << "h200-nvl";
  QTest::addRow("GH200") << "NVIDIA GH200 480GB"
                         << "";
  QTest::addRow("RTX 4090 D") << "NVIDIA GeForce RTX 4090 D"
                              << "";
  QTest::addRow("MIG slice") << "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
                             << "";
}

void TestPresets::matchDevice() {
  QFETCH(QString, device);
  QFETCH(QString, preset);
  const cs::PresetCatalog c = load_catalog();
  const cs::GpuSpec* g = c.match_device(device.toStdString());
  QCOMPARE(g ? QString::fromStdString(g->name) : QString(), preset);
}

void TestPresets::thisMachineWithoutGpu() {
  cs::HostInfo host;
  host.hostname = "laptop";
  host.cpu_cores = 8;
  host.memory_bytes = 16.0 * (1 << 30);
  host.gpu_status = "no GPU: the NVIDIA driver (libcuda.so.1) is not installed";
  const cs::Cluster c = cs::this_machine_cluster(host, load_catalog());
  QCOMPARE(c.name, std::string("this-machine"));
  QCOMPARE(c.gpus_per_node, 0);
  QVERIFY(!c.gpu);
  QCOMPARE(c.cpu_cores_per_node, 8);
  QVERIFY(c.source.find("no GPU") != std::string::npos);
}

void TestPresets::thisMachineWithGpus() {
  cs::HostInfo host;
  host.cpu_cores = 16;
  for (int i = 0; i < 2; ++i) {
    cs::GpuDevice d;
    d.index = i;
    d.name = "NVIDIA H200";
    d.memory_bytes = 143771.0 * (1 << 20);
    d.multiprocessors = 132;
    d.clock_hz = 1.98e9;
    host.gpus.push_back(d);
  }
  const cs::PresetCatalog catalog = load_catalog();
  cs::Cluster c = cs::this_machine_cluster(host, catalog);
  QCOMPARE(c.gpus_per_node, 2);
  QCOMPARE(c.gpu->name, std::string("h200"));
  QCOMPARE(c.gpu->peak.bf16, 989.4e12);                 // datasheet of the matched preset
  QCOMPARE(c.gpu->memory_bytes, 143771.0 * (1 << 20));  // the board's own memory
  QCOMPARE(c.intra_node.name, std::string("nvlink4"));

  host.gpus.resize(1);
  host.gpus[0].name = "NVIDIA T4";
  c = cs::this_machine_cluster(host, catalog);
  QCOMPARE(c.gpu->name, std::string("detected-gpu"));
  QCOMPARE(c.gpu->peak.fp32, 132 * 1.98e9 * 128);  // the FP32 floor
  QVERIFY(c.gpu->source.find("calibrate") != std::string::npos);
}

void TestPresets::probeThisHost() {
  const cs::HostInfo host = cs::probe_host();
  QVERIFY(host.cpu_cores > 0);
  QVERIFY(host.memory_bytes > 0);
  QVERIFY(!host.gpu_status.empty());
  if (host.gpus.empty()) {
    QVERIFY2(host.gpu_status.starts_with("no GPU: "), host.gpu_status.c_str());
  } else {
    QVERIFY(host.gpus.front().memory_bytes > 0);
  }
  auto c = load_catalog().cluster("this-machine");
  QVERIFY(c.ok());
  QCOMPARE(c->gpus_per_node, static_cast<int>(host.gpus.size()));
}

void TestPresets::unknownNameMessage() {
  const cs::PresetCatalog c = load_catalog();
  auto r = c.cluster("dgx-h100-31");
  QVERIFY(!r.ok());
  QVERIFY(r.message().starts_with(
      "unknown cluster preset \"dgx-h100-31\": did you mean \"dgx-h100-32\"?"));
  auto far = c.cluster("zzz");
  QVERIFY(far.message().find("did you mean") == std::string::npos);
  QVERIFY(far.message().find("this-machine") != std::string::npos);
}

namespace {

void write_file(const QString& path, const std::string& text) {
  std::ofstream(path.toStdString()) << text;
}

// A CPU-engine device as calibration writes it: every optional refinement set.
cs::GpuSpec calibrated_cpu_device() {
  cs::GpuSpec g;
  g.name = "calibrated-box-cpu2";
  g.display_name = "One of 2 CPU-engine ranks on box";
  g.vendor = "CPU";
  g.memory_bytes = 4.0 * 1024 * 1024 * 1024;
  g.memory_bandwidth = 9.5e9;
  g.peak.fp32 = 31.25e9;
  g.peak.bf16 = 12.5e9;
  g.efficiency.gemm_max = 1.0;
  g.efficiency.gemm_half_gflop = 0.0021;
  g.efficiency.memory_max = 1.0;
  g.efficiency.kernel_launch_us = 1.5;
  g.efficiency.gemm_max_by_precision.bf16 = 0.75;
  g.efficiency.host_dispatch_us = 0;
  g.efficiency.loops = {3.5, 5.25, 19.5, 21.25, 1.5, 8.5, 40.5, 1.75, 1.25};
  g.efficiency.loops.attention_precision = cs::Precision::bf16;
  g.efficiency.gemm_memory_overlap = 0.75;
  g.efficiency.overlap_slowdown = 0.375;
  g.efficiency.core_share = 0.5;
  g.efficiency.collective_core_share = 0.375;
  g.efficiency.shared_wait_in_transfer = 0.25;
  g.efficiency.shared_wait_in_tp_transfer = 0.4375;
  g.source = "clusterscope calibrate on box";
  return g;
}

}  // namespace

void TestPresets::userPresetsMergeOverShipped() {
  QTemporaryDir dir;
  // A GPU replacing a shipped one, a new link, and a cluster naming both
  // folders' presets (its file comes first in name order, the GPU's after).
  write_file(dir.filePath("b-gpu.json"),
             R"({"kind": "gpu", "name": "h100-sxm", "memory_gib": 80, "memory_bandwidth_gb_s": 3000,
                 "peak_tflops": {"fp32": 60, "bf16": 900}, "source": "measured here"})");
  write_file(dir.filePath("a-cluster.json"),
             R"([{"kind": "link", "name": "my-link", "type": "nvlink", "bandwidth_gbps": 1000,
                  "latency_us": 3, "source": "nccl-tests here"},
                 {"kind": "cluster", "name": "my-box", "nodes": 1, "gpus_per_node": 2,
                  "gpu": "a100-80gb", "intra_node": "my-link", "source": "mine"}])");
  write_file(dir.filePath("notes.txt"), "not a preset");
  // A run's plan saved in the folder is passed over, not a reason to refuse it.
  write_file(dir.filePath("run.plan.json"),
             R"({"cluster": "dgx-h100-1node", "workload": "llama2-7b",
                 "parallel": {"dp": 8, "micro_batch": 1, "global_batch": 64}})");
  // A folder named like a preset file is said to be one (it was passed over
  // without a word).
  QVERIFY(QDir(dir.path()).mkdir("gpus.json"));
  cs::PresetCatalog catalog = load_catalog();
  const std::size_t shipped_gpus = catalog.gpus().size();
  QVERIFY(catalog.load_user_presets(dir.path().toStdString()).ok());
  QCOMPARE(catalog.user_files().size(), std::size_t(2));
  QCOMPARE(catalog.skipped_user_files().size(), std::size_t(2));
  QVERIFY(catalog.skipped_user_files().front().find(
              "gpus.json: is a folder, not a preset file; passed over") != std::string::npos);
  QVERIFY(catalog.skipped_user_files().back().find("run.plan.json: holds plans, not presets") !=
          std::string::npos);
  QCOMPARE(catalog.gpus().size(), shipped_gpus);  // replaced, not added
  // Which says so, by file: the one that replaced it, not the other.
  QCOMPARE(catalog.replaced_by(dir.filePath("b-gpu.json").toStdString()),
           std::vector<std::string>{"gpu h100-sxm"});
  QVERIFY(catalog.replaced_by(dir.filePath("a-cluster.json").toStdString()).empty());
  // And by preset, for the app's lists: a new preset replaces nothing.
  QCOMPARE(catalog.replacement_file("gpu", "h100-sxm").string(),
           dir.filePath("b-gpu.json").toStdString());
  QVERIFY(catalog.replacement_file("gpu", "a100-80gb").empty());
  QVERIFY(catalog.replacement_file("link", "h100-sxm").empty());
  QVERIFY(catalog.replacement_file("link", "my-link").empty());
  QCOMPARE(catalog.find_gpu("h100-sxm")->source, std::string("measured here"));
  QCOMPARE(catalog.find_gpu("h100-sxm")->peak.bf16, 900e12);
  // ... in the shipped clusters of that GPU too (they kept the shipped one).
  auto pod = catalog.cluster("dgx-h100-8");
  QVERIFY(pod.ok());
  QCOMPARE(pod->gpu->source, std::string("measured here"));
  QCOMPARE(pod->gpu->peak.bf16, 900e12);
  auto cluster = catalog.cluster("my-box");
  QVERIFY2(cluster.ok(), cluster.ok() ? "" : cluster.message().c_str());
  QCOMPARE(cluster->gpu->name, std::string("a100-80gb"));
  QCOMPARE(cluster->intra_node.latency, 3e-6);
  // A missing folder adds nothing.
  QVERIFY(catalog.load_user_presets("/nonexistent/clusterscope").ok());
}

void TestPresets::userPresetsRefusals_data() {
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("expected");
  QTest::addRow("broken json") << "[{"
                               << "bad.json:1:2: invalid JSON";
  QTest::addRow("not a document") << "42"
                                  << "bad.json: /: must be a preset document or a list of them";
  QTest::addRow("bad field")
      << R"({"kind": "link", "name": "l", "type": "pcie", "bandwidth_gbps": -1, "latency_us": 1, "source": "s"})"
      << "bad.json: /bandwidth_gbps: must be between 0.001 and 10000000 (got -1)";
  QTest::addRow("no source")
      << R"([{"kind": "link", "name": "l", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1}])"
      << "bad.json [0]: /source: is required for a preset";
  QTest::addRow("reserved name")
      << R"({"kind": "cluster", "name": "this-machine", "nodes": 1, "gpus_per_node": 0, "source": "s"})"
      << "bad.json: /name: \"this-machine\" is reserved for the detected machine";
  QTest::addRow("unknown preset named")
      << R"({"kind": "cluster", "name": "c", "nodes": 1, "gpus_per_node": 1, "gpu": "h1000", "source": "s"})"
      << "bad.json: /gpu: unknown GPU preset \"h1000\"";
  QTest::addRow("a plan among presets")
      << R"([{"kind": "link", "name": "l2", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1, "source": "s"},
            {"kind": "parallel_plan", "dp": 2}])"
      << "bad.json [1]: a parallel_plan is not a preset";
  // Printed raw, a name's escape code recoloured the terminal and a
  // newline forged a line of the listing.
  QTest::addRow("escape code in a name")
      << R"({"kind": "link", "name": "red\u001b[31m", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1, "source": "s"})"
      << "bad.json: /name: must not hold control characters";
  QTest::addRow("newline in a GPU's name")
      << R"({"kind": "gpu", "name": "a\nb", "vendor": "NVIDIA", "architecture": "hopper", "memory_gib": 80, "memory_bandwidth_gb_s": 3000, "peak_tflops": {"fp32": 60}, "source": "s"})"
      << "bad.json: /name: must not hold control characters";
  // Typed after a flag, a name with a slash reads as a file's path; and the
  // calibration wrote "../evil" outside the presets folder.
  QTest::addRow("slash in a name")
      << R"({"kind": "link", "name": "../evil", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1, "source": "s"})"
      << "bad.json: /name: must not hold \"/\"";
  // Taken here, a misspelt board link failed every command that built the
  // GPU's nodes, naming neither this file nor the field.
  QTest::addRow("unknown board link")
      << R"({"kind": "gpu", "name": "mygpu", "vendor": "NVIDIA", "architecture": "hopper", "memory_gib": 80, "memory_bandwidth_gb_s": 3000, "peak_tflops": {"fp32": 60}, "board_link": "nvlnk9", "source": "s"})"
      << "bad.json: /board_link: unknown link preset \"nvlnk9\": did you mean \"nvlink";
  QTest::addRow("twice in the folder")
      << R"({"kind": "link", "name": "dup", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1, "source": "s"})"
      << "bad.json: /name: link dup is also defined in ";
}

void TestPresets::userPresetsRefusals() {
  QFETCH(QString, text);
  QFETCH(QString, expected);
  QTemporaryDir dir;
  write_file(
      dir.filePath("a-good.json"),
      R"({"kind": "link", "name": "dup", "type": "pcie", "bandwidth_gbps": 1, "latency_us": 1, "source": "s"})");
  write_file(dir.filePath("bad.json"), text.toStdString());
  cs::PresetCatalog catalog = load_catalog();
  const std::size_t links = catalog.links().size();
  const cs::Status s = catalog.load_user_presets(dir.path().toStdString());
  QVERIFY(!s.ok());
  QVERIFY2(s.message().find(expected.toStdString()) != std::string::npos, s.message().c_str());
  QVERIFY2(s.message().find(dir.filePath("bad.json").toStdString()) != std::string::npos,
           "the message names the file");
  // Nothing of a broken folder is merged, not even its good files.
  QCOMPARE(catalog.links().size(), links);
  QVERIFY(catalog.user_files().empty());
}

// A file where the folder should be is an error naming it: every command
// but calibrate passed it over, and ran without the user's presets.
void TestPresets::userPresetsPathThatIsAFile() {
  QTemporaryDir dir;
  const QString file = dir.filePath("presets");
  write_file(file, "{}");
  cs::PresetCatalog catalog = load_catalog();
  const cs::Status s = catalog.load_user_presets(file.toStdString());
  QVERIFY(!s.ok());
  QCOMPARE(QString::fromStdString(s.message()),
           file + ": is not a folder: user presets are read from a folder of *.json files");
  // A folder not made yet adds nothing, without an error.
  QVERIFY(catalog.load_user_presets(dir.filePath("not-yet").toStdString()).ok());
}

void TestPresets::userPresetsFolder() {
  const QByteArray user = qgetenv("CLUSTERSCOPE_USER_PRESETS");
  const QByteArray data = qgetenv("XDG_DATA_HOME");
  const QByteArray home = qgetenv("HOME");
  qunsetenv("CLUSTERSCOPE_USER_PRESETS");
  qputenv("XDG_DATA_HOME", "/data/home");
  QCOMPARE(QString::fromStdString(cs::user_presets_dir().string()),
           QString("/data/home/clusterscope/presets"));
  qunsetenv("XDG_DATA_HOME");
  qputenv("HOME", "/home/someone");
  QCOMPARE(QString::fromStdString(cs::user_presets_dir().string()),
           QString("/home/someone/.local/share/clusterscope/presets"));
  qputenv("CLUSTERSCOPE_USER_PRESETS", "/elsewhere");
  QCOMPARE(QString::fromStdString(cs::user_presets_dir().string()), QString("/elsewhere"));
  qputenv("CLUSTERSCOPE_USER_PRESETS", user);
  if (data.isNull())
    qunsetenv("XDG_DATA_HOME");
  else
    qputenv("XDG_DATA_HOME", data);
  qputenv("HOME", home);
}

void TestPresets::calibratedGpuRoundTrip() {
  QTemporaryDir dir;
  cs::PresetBundle bundle;
  bundle.gpus.push_back(calibrated_cpu_device());
  cs::Link link;
  link.name = "calibrated-box-mpi2";
  link.kind = cs::LinkKind::shared_memory;
  link.bandwidth = 4e9;
  link.latency = 12.5e-6;
  link.efficiency = 1;
  link.source = "all-reduce sweep";
  bundle.links.push_back(link);
  cs::Cluster c;
  c.name = "calibrated-box-cpu2";
  c.nodes = 1;
  c.gpus_per_node = 2;
  c.gpu = bundle.gpus.front();
  c.intra_node = link;
  c.source = "clusterscope calibrate";
  bundle.clusters.push_back(c);
  const std::string file = dir.filePath("sub/calibrated-box.json").toStdString();
  QVERIFY(cs::write_preset_bundle(file, bundle).ok());

  cs::PresetCatalog catalog = load_catalog();
  const cs::Status s = catalog.load_user_presets(dir.filePath("sub").toStdString());
  QVERIFY2(s.ok(), s.message().c_str());
  const cs::GpuSpec* g = catalog.find_gpu("calibrated-box-cpu2");
  QVERIFY(g);
  const cs::GpuSpec want = calibrated_cpu_device();
  QCOMPARE(g->efficiency.gemm_max_by_precision.bf16, 0.75);
  QCOMPARE(g->efficiency.gemm_max_by_precision.fp32, 0.0);
  QCOMPARE(g->efficiency.host_dispatch_us, 0.0);
  QCOMPARE(g->efficiency.loops.norm_ns, want.efficiency.loops.norm_ns);
  QCOMPARE(g->efficiency.loops.softmax_ns, want.efficiency.loops.softmax_ns);
  QCOMPARE(g->efficiency.loops.attention_backward_gflops, 1.25);
  QCOMPARE(g->efficiency.loops.attention_precision, std::optional{cs::Precision::bf16});
  QCOMPARE(g->efficiency.gemm_memory_overlap, 0.75);
  QCOMPARE(g->efficiency.overlap_slowdown, 0.375);
  QCOMPARE(g->efficiency.core_share, 0.5);
  QCOMPARE(g->efficiency.collective_core_share, 0.375);
  QCOMPARE(g->efficiency.shared_wait_in_transfer, 0.25);
  QCOMPARE(g->efficiency.shared_wait_in_tp_transfer, 0.4375);
  QCOMPARE(g->peak.bf16, 12.5e9);
  auto cluster = catalog.cluster("calibrated-box-cpu2");
  QVERIFY2(cluster.ok(), cluster.ok() ? "" : cluster.message().c_str());
  QCOMPARE(cluster->intra_node.latency, 12.5e-6);
  QCOMPARE(cluster->gpu->efficiency.loops.optimizer_ns, 40.5);

  // A datasheet preset writes none of the optional fields.
  const nlohmann::json h100 = cs::to_json(*catalog.find_gpu("h100-sxm"));
  QVERIFY(!h100["efficiency"].contains("loops"));
  QVERIFY(!h100["efficiency"].contains("host_dispatch_us"));
  QVERIFY(!h100["efficiency"].contains("gemm_max_by_precision"));
  QVERIFY(!h100["efficiency"].contains("gemm_memory_overlap"));
  QCOMPARE(catalog.find_gpu("h100-sxm")->efficiency.gemm_memory_overlap, 0.0);
}

void TestPresets::loadDefaultNamesBrokenUserFile() {
  QTemporaryDir dir;
  write_file(dir.filePath("broken.json"), "{");
  const QByteArray user = qgetenv("CLUSTERSCOPE_USER_PRESETS");
  qputenv("CLUSTERSCOPE_USER_PRESETS", dir.path().toUtf8());
  auto c = cs::PresetCatalog::load_default();
  std::string user_error;
  auto shipped = cs::PresetCatalog::load_default_or_shipped(user_error);
  qputenv("CLUSTERSCOPE_USER_PRESETS", user);
  QVERIFY(!c.ok());
  QVERIFY2(c.message().find(dir.filePath("broken.json").toStdString()) != std::string::npos,
           c.message().c_str());
  QVERIFY2(c.message().find("user presets in") != std::string::npos, c.message().c_str());
  // Where a view of the presets asks, the shipped ones and the same words.
  QVERIFY(shipped.ok());
  QVERIFY(shipped->find_gpu("h100-sxm"));
  QVERIFY(shipped->user_files().empty());
  QCOMPARE(user_error, c.message());
}

QTEST_GUILESS_MAIN(TestPresets)
#include "tst_presets.moc"
