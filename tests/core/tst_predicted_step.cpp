// A run store's meta "predicted_step" (core/predicted_step.h): what the
// earlier writers stored still reads, field for field and back to the same
// text; a bad one is refused with the JSON pointer of the bad field.

#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/predicted_step.h"
#include "core/trace_reader.h"

using namespace cs::trace;

namespace {

const std::string kCpuEngine = CS_DATA_DIR "/cpu/cpu-engine-dp2.db";
const std::string kWhere = "run.db: meta predicted_step";

}  // namespace

class TestPredictedStep : public QObject {
  Q_OBJECT
 private slots:
  void readsWhatTheOldWriterStored();
  void readsABarePlannerPrediction();
  void roundTrip();
  void errorsNameThePointer_data();
  void errorsNameThePointer();
  void unreadableProbeIsANoteNotAnError();
  void unreadableMemoryIsANoteNotAnError_data();
  void unreadableMemoryIsANoteNotAnError();
};

// The store `clusterscope run` wrote before this type existed (with
// calib::predict_run's fields: cluster, calibrated, workload, notes, plan,
// machine probe), read as it is on disk.
void TestPredictedStep::readsWhatTheOldWriterStored() {
  QTemporaryDir dir;
  const std::string copy = dir.filePath("run.db").toStdString();
  std::filesystem::copy_file(kCpuEngine, copy);
  auto reader = TraceReader::open(copy);
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  const auto text = (*reader)->meta(kPredictedStepMetaKey);
  QVERIFY(text);

  auto p = read_predicted_step(*text, kWhere);
  QVERIFY2(p, p ? "" : p.message().c_str());
  QCOMPARE(p->step_seconds, 0.03193967429041972);
  QCOMPARE(p->categories.size(), std::size_t{3});
  QCOMPARE(p->categories.at("compute"), 0.028485949409725653);
  QVERIFY(p->parts.empty());
  QCOMPARE(p->breakdown.size(), std::size_t{13});
  QCOMPARE(p->breakdown.at("compute.gemm"), 0.009535579394599307);
  QCOMPARE(p->breakdown.at("communication.dp"), 0.0034537248806940654);
  QCOMPARE(p->cluster.value_or(""), std::string("calibrated-vm-cpu2"));
  QCOMPARE(p->calibrated.value_or(false), true);
  QCOMPARE(p->workload.value_or(""), std::string("GPT-2 124M (as the worker trains it)"));
  QVERIFY(p->notes);
  QCOMPARE(p->notes->size(), std::size_t{1});
  QVERIFY(nlohmann::json::parse(p->plan_json)["workload"]["name"] == "gpt2-small-worker");
  QVERIFY2(p->machine_probe, p->machine_probe_error.c_str());
  QCOMPARE(p->machine_probe->shape.width, 256);
  QCOMPARE(p->machine_probe->shape.all_reduce_bytes, std::int64_t{1} << 20);
  QCOMPARE(p->machine_probe->gemm_seconds, 0.0018913816887789192);

  // Written again, the same text to the byte: the same keys and figures.
  QCOMPARE(cs::json_text(to_json(*p)), *text);
}

// What a planner alone (and hand-written stores) hold: the step, no more.
void TestPredictedStep::readsABarePlannerPrediction() {
  auto p = read_predicted_step(R"({"step_seconds": 0.01})", kWhere);
  QVERIFY2(p, p ? "" : p.message().c_str());
  QCOMPARE(p->step_seconds, 0.01);
  QVERIFY(p->categories.empty() && p->parts.empty() && p->breakdown.empty());
  QVERIFY(!p->cluster && !p->calibrated && !p->workload && !p->notes);
  QVERIFY(p->plan_json.empty());
  QVERIFY(!p->machine_probe && p->machine_probe_error.empty());
  QVERIFY(!p->memory);  // a store written before memory was predicted
  QCOMPARE(cs::json_text(to_json(*p)), std::string(R"({"step_seconds":0.01})"));
}

void TestPredictedStep::roundTrip() {
  PredictedStep p;
  p.step_seconds = 0.25;
  p.categories = {{"compute", 0.2}, {"communication", 0.05}};
  p.parts = {{"dp_allreduce", 0.04}};
  p.breakdown = {{"compute.gemm", 0.15}, {"wait", 0.0}, {"a/b~c", 1e-9}};
  p.cluster = "dgx-h100";
  p.calibrated = false;
  p.workload = "GPT-2 small";
  p.notes = std::vector<std::string>{"one", "two"};
  p.plan_json = R"({"kind":"plan"})";
  cs::MachineProbe probe;
  probe.shape = cs::machine_probe_shape("cpu", "fp32", 2);
  probe.gemm_seconds = 1e-3;
  probe.loop_seconds = 2e-4;
  probe.all_reduce_seconds = 3e-4;
  p.machine_probe = probe;
  p.pipeline = cs::trace::PipelinePace{4, 16, cs::trace::PipelinePace::Stage::middle};
  p.memory = cs::trace::PredictedMemory{123'101'184,
                                        934'281'216,
                                        {{"weights", 25'900'000}, {"activations", 19'300'000}},
                                        {{"first", 123'101'184}, {"last", 99'000'000}}};

  const std::string text = cs::json_text(to_json(p));
  auto back = read_predicted_step(text, kWhere);
  QVERIFY2(back, back ? "" : back.message().c_str());
  QCOMPARE(back->step_seconds, p.step_seconds);
  QCOMPARE(back->categories, p.categories);
  QCOMPARE(back->parts, p.parts);
  QCOMPARE(back->breakdown, p.breakdown);
  QCOMPARE(back->cluster, p.cluster);
  QCOMPARE(back->calibrated, p.calibrated);
  QCOMPARE(back->workload, p.workload);
  QCOMPARE(back->notes, p.notes);
  QCOMPARE(back->plan_json, p.plan_json);
  QVERIFY(back->machine_probe);
  QCOMPARE(cs::machine_probe_json(*back->machine_probe), cs::machine_probe_json(probe));
  QVERIFY(back->memory);
  QCOMPARE(back->memory->allocated_bytes, 123'101'184.0);
  QCOMPARE(back->memory->device_bytes, 934'281'216.0);
  QCOMPARE(back->memory->parts, p.memory->parts);
  QCOMPARE(back->memory->stages, p.memory->stages);
  QVERIFY(back->pipeline);
  QCOMPARE(back->pipeline->stages, 4);
  QCOMPARE(back->pipeline->ranks_per_stage, 16);
  QVERIFY(back->pipeline->pacing == cs::trace::PipelinePace::Stage::middle);
  // Stage s holds ranks [16 s, 16 s + 16): the middle ones are 16 .. 47.
  QVERIFY(!back->pipeline->holds(15) && back->pipeline->holds(16) && back->pipeline->holds(47) &&
          !back->pipeline->holds(48));
  QCOMPARE(cs::json_text(to_json(*back)), text);
}

void TestPredictedStep::errorsNameThePointer_data() {
  QTest::addColumn<QString>("json");
  QTest::addColumn<QString>("message");  // after "<where>: "
  QTest::addRow("not JSON") << "{step"
                            << "not valid JSON";
  QTest::addRow("not an object") << "[0.1]"
                                 << "must be a JSON object";
  QTest::addRow("a number alone") << "0.1"
                                  << "must be a JSON object";
  QTest::addRow("no step") << "{}"
                           << "/step_seconds: must be a number";
  QTest::addRow("step as text") << R"({"step_seconds": "1 s"})"
                                << "/step_seconds: must be a number";
  QTest::addRow("category as text") << R"({"step_seconds": 1, "categories": {"compute": "1s"}})"
                                    << "/categories/compute: must be a number of seconds";
  QTest::addRow("part as null") << R"({"step_seconds": 1, "parts": {"mlp": null}})"
                                << "/parts/mlp: must be a number of seconds";
  QTest::addRow("breakdown part as list")
      << R"({"step_seconds": 1, "breakdown": {"compute.gemm": [1]}})"
      << "/breakdown/compute.gemm: must be a number of seconds";
  // Out of any planner's range: printed as if predicted.
  QTest::addRow("negative step") << R"({"step_seconds": -0.3})"
                                 << "/step_seconds: must be > 0 and at most 1e9 seconds (got -0.3)";
  QTest::addRow("negative category")
      << R"({"step_seconds": 1, "categories": {"compute": -5}})"
      << "/categories/compute: must be from 0 to 1e9 seconds (got -5)";
  QTest::addRow("part of 1e308 s") << R"({"step_seconds": 1, "parts": {"mlp": 1e308}})"
                                   << "/parts/mlp: must be from 0 to 1e9 seconds (got 1e+308)";
  QTest::addRow("part name escaped") << R"({"step_seconds": 1, "parts": {"a/b~c": true}})"
                                     << "/parts/a~1b~0c: must be a number of seconds";
  QTest::addRow("parts not an object") << R"({"step_seconds": 1, "parts": [1]})"
                                       << "/parts: must be an object";
  QTest::addRow("cluster as number") << R"({"step_seconds": 1, "cluster": 3})"
                                     << "/cluster: must be text";
  QTest::addRow("calibrated as text") << R"({"step_seconds": 1, "calibrated": "yes"})"
                                      << "/calibrated: must be true or false";
  QTest::addRow("a note as number") << R"({"step_seconds": 1, "notes": ["a", 2]})"
                                    << "/notes/1: must be text";
  QTest::addRow("plan as text") << R"({"step_seconds": 1, "plan": "gpt"})"
                                << "/plan: must be an object";
  QTest::addRow("pipeline as list") << R"({"step_seconds": 1, "pipeline": [2]})"
                                    << "/pipeline: must be an object";
  QTest::addRow("one stage")
      << R"({"step_seconds": 1, "pipeline": {"stages": 1, "ranks_per_stage": 1, "pacing": "last"}})"
      << "/pipeline/stages: must be a whole number from 2 to 1048576";
  QTest::addRow("ranks as text")
      << R"({"step_seconds": 1, "pipeline": {"stages": 2, "ranks_per_stage": "8", "pacing": "last"}})"
      << "/pipeline/ranks_per_stage: must be a whole number from 1 to 1048576";
  QTest::addRow("unknown pacing")
      << R"({"step_seconds": 1, "pipeline": {"stages": 2, "ranks_per_stage": 1, "pacing": "slow"}})"
      << "/pipeline/pacing: must be \"first\", \"middle\" or \"last\"";
}

void TestPredictedStep::errorsNameThePointer() {
  QFETCH(QString, json);
  QFETCH(QString, message);
  auto p = read_predicted_step(json.toStdString(), kWhere);
  QVERIFY(!p);
  const QString got = QString::fromStdString(p.message());
  QVERIFY2(got.startsWith(QString::fromStdString(kWhere) + ": " + message), qPrintable(got));
}

// The comparison stands without the probe (trace stats notes why).
void TestPredictedStep::unreadableProbeIsANoteNotAnError() {
  auto p =
      read_predicted_step(R"({"step_seconds": 1, "machine_probe": {"width": "wide"}})", kWhere);
  QVERIFY2(p, p ? "" : p.message().c_str());
  QVERIFY(!p->machine_probe);
  QVERIFY2(p->machine_probe_error.starts_with(kWhere + ": /machine_probe") &&
               p->machine_probe_error.find("/width") != std::string::npos,
           p->machine_probe_error.c_str());
}

// The time comparison stands without the memory (trace stats says why);
// a store of another version could hold a memory object this one refuses.
void TestPredictedStep::unreadableMemoryIsANoteNotAnError_data() {
  QTest::addColumn<QString>("memory");
  QTest::addColumn<QString>("message");  // after "<where>: "
  QTest::addRow("a number") << "8e9"
                            << "/memory: must be an object";
  QTest::addRow("without the device's")
      << R"({"allocated_bytes": 1e9})"
      << "/memory/device_bytes: must be a number of bytes from 0 to 1e18";
  QTest::addRow("as text") << R"({"allocated_bytes": "x", "device_bytes": 1e9})"
                           << "/memory/allocated_bytes: must be a number of bytes from 0 to 1e18";
  QTest::addRow("negative") << R"({"allocated_bytes": -1, "device_bytes": 1e9})"
                            << "/memory/allocated_bytes: must be a number of bytes from 0 to 1e18";
  QTest::addRow("a part as text")
      << R"({"allocated_bytes": 1, "device_bytes": 2, "parts": {"weights": "1"}})"
      << "/memory/parts/weights: must be a number of bytes from 0 to 1e18";
  QTest::addRow("stages as a list")
      << R"({"allocated_bytes": 1, "device_bytes": 2, "stages": [1, 2]})"
      << "/memory/stages: must be an object";
  QTest::addRow("a middle stage")
      << R"({"allocated_bytes": 1, "device_bytes": 2, "stages": {"middle": 1}})"
      << "/memory/stages/middle: unknown stage (\"first\" or \"last\")";
  QTest::addRow("a stage as null")
      << R"({"allocated_bytes": 1, "device_bytes": 2, "stages": {"last": null}})"
      << "/memory/stages/last: must be a number of bytes from 0 to 1e18";
  QTest::addRow("allocated past the device")
      << R"({"allocated_bytes": 2e9, "device_bytes": 1e9})"
      << "/memory: allocated_bytes (2000000000) is more than device_bytes (1000000000)";
}

void TestPredictedStep::unreadableMemoryIsANoteNotAnError() {
  QFETCH(QString, memory);
  QFETCH(QString, message);
  auto p = read_predicted_step(
      QString(R"({"step_seconds": 1, "memory": %1})").arg(memory).toStdString(), kWhere);
  QVERIFY2(p, p ? "" : p.message().c_str());
  QCOMPARE(p->step_seconds, 1.0);
  QVERIFY(!p->memory);
  QVERIFY2(QString::fromStdString(p->memory_error)
               .startsWith(QString::fromStdString(kWhere) + ": " + message),
           p->memory_error.c_str());
}

QTEST_GUILESS_MAIN(TestPredictedStep)
#include "tst_predicted_step.moc"
