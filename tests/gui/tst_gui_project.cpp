// Project files and the workspace around them: round trips, every way a
// project file can be bad (with the message a user sees), field edits
// through the core readers, undo and merge, recent files, and autosave with
// recovery after a session that did not close.

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QScopeGuard>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QUndoStack>
#include <functional>

#include <nlohmann/json.hpp>

#include "app/gui/analysis.h"
#include "app/gui/project.h"
#include "app/gui/workspace.h"
#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/presets.h"
#include "gui_test_support.h"
#include "planners/estimate.h"
#include "tests/named_pipe_writer.h"

using namespace cs::gui;

namespace {

const cs::PresetCatalog& catalog() {
  static const cs::PresetCatalog c = [] {
    auto loaded = cs::PresetCatalog::load(CS_SOURCE_DIR "/resources/presets");
    if (!loaded) qFatal("%s", loaded.message().c_str());
    return std::move(loaded).value();
  }();
  return c;
}

Project defaults() {
  auto p = default_project(catalog());
  if (!p) qFatal("%s", p.message().c_str());
  return std::move(p).value();
}

}  // namespace

class TestGuiProject : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void defaultProjectIsAWorkingPlan();
  void brokenUserPresetsLeaveTheShipped();
  void roundTrip();
  void badFiles_data();
  void badFiles();
  void clusterEdits_data();
  void clusterEdits();
  void workloadEdits();
  void problemsFromMessage();
  void uniqueNames();
  void partsForTheCurrentPlan();
  void undoMergesTyping();
  void runsStayThroughUndo();
  void pinsSavedNotUndone();
  void destroyedWorkspaceSaysNothing();
  void switchingPlansIsNotAnEdit();
  void saveOpenAndRecentFiles();
  void openKeepsProjectOnFailure();
  void namedPipeIsRefused();
  void foreignFilesKeepTheProject_data();
  void foreignFilesKeepTheProject();
  void noStepThatChangesNothing();
  void saveOnAFullDisk();
  void saveKeepsARunStore_data();
  void saveKeepsARunStore();
  void autosaveAndRecovery();
  void failedRecoveryKeepsTheFile();
  void discardedChangesAreNotRecovered();
  void analysisInlineAndInBackground();

 private:
  QTemporaryDir dir_;
};

void TestGuiProject::initTestCase() {
  test::isolateSettings();
  QVERIFY(dir_.isValid());
}

void TestGuiProject::defaultProjectIsAWorkingPlan() {
  const Project p = defaults();
  QCOMPARE(p.clusters.size(), std::size_t(1));
  QCOMPARE(p.workloads.size(), std::size_t(1));
  QCOMPARE(p.plans.size(), std::size_t(1));
  auto plan = p.resolved_plan();
  QVERIFY(plan.ok());
  QCOMPARE(plan->cluster.total_gpus(), 32);
  QVERIFY(cs::plan::check_plan(plan.value()).empty());
  auto e = cs::plan::estimate(plan.value());
  QVERIFY2(e.ok(), e.ok() ? "" : e.message().c_str());
  QVERIFY2(e->fits, cs::plan::memory_problem(plan.value(), e.value()).message.c_str());
  QVERIFY(e->throughput.tokens_per_second > 0);

  // A catalog without the pod: a message, not a crash.
  cs::PresetCatalog empty;
  auto missing = default_project(empty);
  QVERIFY(!missing.ok());
  QVERIFY(QString::fromStdString(missing.message()).contains(QStringLiteral("dgx-h100-32")));
}

// A user preset file that does not read (half written, or another
// program's JSON in the folder): the app had no presets at all, empty lists
// and no project to start with. Now it has the shipped ones and says why
// the user's are missing.
void TestGuiProject::brokenUserPresetsLeaveTheShipped() {
  QTemporaryDir presets;
  QFile broken(presets.filePath(QStringLiteral("mine.json")));
  QVERIFY(broken.open(QIODevice::WriteOnly));
  broken.write(R"([{"kind": "gpu", "name": "h1)");
  broken.close();
  const QByteArray user = qgetenv("CLUSTERSCOPE_USER_PRESETS");
  qputenv("CLUSTERSCOPE_USER_PRESETS", presets.path().toUtf8());
  auto restore = qScopeGuard([&] { qputenv("CLUSTERSCOPE_USER_PRESETS", user); });
  Workspace ws;
  QVERIFY2(ws.presetsError().isEmpty(), qPrintable(ws.presetsError()));
  QVERIFY2(ws.userPresetsError().contains(broken.fileName()), qPrintable(ws.userPresetsError()));
  QVERIFY(ws.catalog().find_gpu("h100-sxm"));
  QVERIFY(ws.newProject());
  QCOMPARE(ws.project().current_cluster()->name, std::string("dgx-h100-32"));
}

void TestGuiProject::roundTrip() {
  Project p = defaults();
  ProjectPlan second = p.plans[0];
  second.name = "second";
  second.parallel.zero_stage = 3;
  second.precision = cs::PrecisionPlan::for_compute(cs::Precision::fp8);
  p.plans.push_back(second);
  p.current_plan = 1;
  const std::string text = project_to_json_text(p);
  auto back = project_from_json_text(text, "p.clusterscope.json");
  QVERIFY2(back.ok(), back.ok() ? "" : back.message().c_str());
  QCOMPARE(project_to_json_text(back.value()), text);
  QCOMPARE(back->current_plan, 1);
  QCOMPARE(back->current()->parallel.zero_stage, 3);
  QCOMPARE(back->current()->precision.compute, cs::Precision::fp8);

  // A plan the plan panel flags is kept as it is: sequence parallelism left
  // on at tp 1, a global batch not a multiple (the saved project would not
  // open, all of it locked out).
  ProjectPlan flagged = p.plans[0];
  flagged.name = "flagged";
  flagged.parallel.tp = 1;
  flagged.parallel.sequence_parallel = true;
  flagged.parallel.global_batch = 1000;
  p.plans.push_back(flagged);
  const std::string with_flagged = project_to_json_text(p);
  auto reopened = project_from_json_text(with_flagged, "p.clusterscope.json");
  QVERIFY2(reopened.ok(), reopened.ok() ? "" : reopened.message().c_str());
  QCOMPARE(project_to_json_text(reopened.value()), with_flagged);
  reopened->current_plan = 2;
  auto plan = reopened->resolved_plan();
  QVERIFY(plan.ok());
  QVERIFY(!cs::plan::check_plan(plan.value()).empty());  // still flagged
  // Degrees below 1 are still refused (nothing the panel lets through).
  std::string broken = with_flagged;
  const std::string tp1 = "\"tp\": 1";
  QVERIFY(broken.find(tp1) != std::string::npos);
  broken.replace(broken.find(tp1), tp1.size(), "\"tp\": 0");
  QVERIFY(!project_from_json_text(broken, "p.clusterscope.json").ok());
}

void TestGuiProject::badFiles_data() {
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("message");
  const std::string good = project_to_json_text(defaults());
  auto edited = [&](const QString& from, const QString& to) {
    QString t = QString::fromStdString(good);
    if (!t.contains(from)) qFatal("fixture: %s not in the project", qPrintable(from));
    return t.replace(from, to);
  };
  QTest::addRow("not json") << QStringLiteral("{\"kind\": ")
                            << QStringLiteral("p.json: not a JSON document");
  QTest::addRow("empty") << QString() << QStringLiteral("not a JSON document");
  QTest::addRow("a list") << QStringLiteral("[]") << QStringLiteral("p.json: /: must be an object");
  QTest::addRow("another kind") << QStringLiteral(R"({"kind": "cluster", "nodes": 1})")
                                << QStringLiteral("/kind: must be \"clusterscope_project\"");
  QTest::addRow("newer version") << edited(QStringLiteral("\"version\": 2"),
                                           QStringLiteral("\"version\": 9"))
                                 << QStringLiteral(
                                        "/version: 9 was written by a newer ClusterScope");
  QTest::addRow("cluster field") << edited(QStringLiteral("\"nodes\": 4"),
                                           QStringLiteral("\"nodes\": -2"))
                                 << QStringLiteral(
                                        "p.json, cluster 0: /nodes: must be between 1 and 1048576 (got -2)");
  QTest::addRow("workload field") << edited(QStringLiteral("\"layers\": 32"),
                                            QStringLiteral("\"layers\": \"many\""))
                                  << QStringLiteral("p.json, workload 0: /layers:");
  QTest::addRow("dangling cluster")
      << edited(QStringLiteral("\"cluster\": \"dgx-h100-32\""),
                QStringLiteral("\"cluster\": \"gone\""))
      << QStringLiteral("p.json, plan 0: /cluster: no cluster named \"gone\" in the project");
  // A refused cluster or workload whose name does not read, or a list that
  // is no list: the plans naming it were also said to name one the project
  // lacks, once each (the follow-on error sent the user looking).
  auto json_edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(good);
    edit(j);
    return QString::fromStdString(j.dump(2));
  };
  QTest::addRow("cluster by a preset's name")
      << json_edited([](nlohmann::json& j) { j["clusters"][0] = "dgx-h100-32"; })
      << QStringLiteral(
             "p.json, cluster 0: /: names the preset \"dgx-h100-32\", but a project "
             "gives each cluster whole (an object), not by a preset's name");
  QTest::addRow("workload by a preset's name")
      << json_edited([](nlohmann::json& j) { j["workloads"][0] = "llama2-7b"; })
      << QStringLiteral(
             "p.json, workload 0: /: names the preset \"llama2-7b\", but a project "
             "gives each workload whole");
  QTest::addRow("cluster not an object")
      << json_edited([](nlohmann::json& j) { j["clusters"][0] = nullptr; })
      << QStringLiteral("p.json, cluster 0: /: must be an object");
  QTest::addRow("cluster name not text")
      << json_edited([](nlohmann::json& j) { j["clusters"][0]["name"] = 7; })
      << QStringLiteral("p.json, cluster 0: /name: must be a string");
  QTest::addRow("workload without a name")
      << json_edited([](nlohmann::json& j) { j["workloads"][0].erase("name"); })
      << QStringLiteral("p.json, workload 0: /name: is required");
  QTest::addRow("clusters not a list")
      << json_edited([](nlohmann::json& j) { j["clusters"] = nlohmann::json::object(); })
      << QStringLiteral("p.json: /clusters: must be a list");
  QTest::addRow("workloads not a list")
      << json_edited([](nlohmann::json& j) { j["workloads"] = "llama2-7b"; })
      << QStringLiteral("p.json: /workloads: must be a list");
  QTest::addRow("bad plan") << edited(QStringLiteral("\"zero_stage\": 1"),
                                      QStringLiteral("\"zero_stage\": 7"))
                            << QStringLiteral("p.json, plan 0 parallel: /zero_stage:");
  QTest::addRow("plan name with a newline")
      << json_edited([](nlohmann::json& j) { j["plans"][0]["name"] = "two\nlines"; })
      << QStringLiteral("p.json, plan 0: /name: must not hold control characters");
  // A 20 MB name took 613 MB in the app's lists.
  QTest::addRow("plan name of 20 MB")
      << json_edited(
             [](nlohmann::json& j) { j["plans"][0]["name"] = std::string(20'000'000, 'x'); })
      << QStringLiteral(
             "p.json, plan 0: /name: must be at most 4096 characters long (it holds "
             "20000000)");
  QTest::addRow("current plan") << edited(QStringLiteral("\"current_plan\": 0"),
                                          QStringLiteral("\"current_plan\": 4"))
                                << QStringLiteral("/current_plan: must index the plans");
  // Numbers past an int were wrapped (4294967297 opened as version 1, and
  // 4294967296 as plan 0), a negative version accepted.
  QTest::addRow("version past an int")
      << edited(QStringLiteral("\"version\": 2"), QStringLiteral("\"version\": 4294967297"))
      << QStringLiteral("/version: 4294967297 was written by a newer ClusterScope");
  QTest::addRow("version past 64 bits")
      << edited(QStringLiteral("\"version\": 2"),
                QStringLiteral("\"version\": 18446744073709551615"))
      << QStringLiteral("/version: 18446744073709551615 was written by a newer ClusterScope");
  QTest::addRow("negative version")
      << edited(QStringLiteral("\"version\": 2"), QStringLiteral("\"version\": -5"))
      << QStringLiteral("/version: must be a whole number from 1 (got -5)");
  QTest::addRow("current plan past an int")
      << edited(QStringLiteral("\"current_plan\": 0"),
                QStringLiteral("\"current_plan\": 4294967296"))
      << QStringLiteral("/current_plan: must index the plans");
  // 100000 levels: printing it overflowed the stack (SIGSEGV).
  QTest::addRow("nested past reason")
      << QString(QStringLiteral("[")).repeated(100000) +
             QString(QStringLiteral("]")).repeated(100000)
      << QStringLiteral(
             "p.json: not a JSON document (the file is damaged or not a project): p.json: "
             "invalid JSON: nested more than 256 levels deep");
  // A GPU by a preset's name: a project gives it whole (it said "no presets
  // are loaded" while the app had its presets).
  // Keys no reader asks for and values of the wrong type are named: they were
  // dropped (a misspelt plan's "parallel" opened as dp 1 x tp 1 x pp 1, and
  // a save wrote it so), a title of 5 read as "".
  QTest::addRow("unknown key")
      << edited(QStringLiteral("\"current_plan\": 0"), QStringLiteral("\"curent_plan\": 0"))
      << QStringLiteral("p.json: /curent_plan: unknown field (did you mean \"current_plan\"?)");
  QTest::addRow("unknown plan key")
      << edited(QStringLiteral("\"parallel\": {"), QStringLiteral("\"paralel\": {"))
      << QStringLiteral("p.json, plan 0: /paralel: unknown field (did you mean \"parallel\"?)");
  QTest::addRow("plan name not text")
      << edited(QStringLiteral("\"name\": \"LLaMA-2 7B on 32 H100\""),
                QStringLiteral("\"name\": 7"))
      << QStringLiteral("p.json, plan 0: /name: must be a string");
  QTest::addRow("run title not text")
      << edited(QStringLiteral("\"runs\": []"),
                QStringLiteral(R"("runs": [{"store": "/runs/a.db", "title": 5}])"))
      << QStringLiteral("p.json, run 0: /title: must be a string");
  QTest::addRow("unknown run key")
      << edited(QStringLiteral("\"runs\": []"),
                QStringLiteral(R"("runs": [{"store": "/runs/a.db", "stores": "/runs/b.db"}])"))
      << QStringLiteral("p.json, run 0: /stores: unknown field (did you mean \"store\"?)");
  QTest::addRow("run without a store")
      << edited(QStringLiteral("\"runs\": []"), QStringLiteral(R"("runs": [{"title": "a"}])"))
      << QStringLiteral("p.json, run 0: /store: is required");
  QTest::addRow("runs not a list")
      << edited(QStringLiteral("\"runs\": []"), QStringLiteral("\"runs\": {}"))
      << QStringLiteral("p.json: /runs: must be a list");
  // Pinned plans are read as strictly as the plans (a pin from another
  // version of the planner that no longer estimates is the app's to leave out).
  {
    Project pinned = defaults();
    pinned.pinned.push_back({"pin", pinned.clusters[0], pinned.workloads[0],
                             pinned.plans[0].parallel, pinned.plans[0].precision});
    QString t = QString::fromStdString(project_to_json_text(pinned));
    const QString pins = t.mid(t.indexOf(QStringLiteral("\"pinned\"")));
    auto pin_edited = [&](const QString& from, const QString& to) {
      QString p = pins;
      if (!p.contains(from)) qFatal("fixture: %s not in the pin", qPrintable(from));
      return QString(t).replace(pins, p.replace(p.indexOf(from), from.size(), to));
    };
    QTest::addRow("pinned plan field")
        << pin_edited(QStringLiteral("\"zero_stage\": 1"), QStringLiteral("\"zero_stage\": 7"))
        << QStringLiteral("p.json, pinned plan 0 parallel: /zero_stage:");
    QTest::addRow("pinned plan cluster")
        << pin_edited(QStringLiteral("\"nodes\": 4"), QStringLiteral("\"nodes\": 0"))
        << QStringLiteral("p.json, pinned plan 0 cluster: /nodes: must be between 1");
    // A plan's or pin's name, shown in lists and titles: a newline split it,
    // an escape code reached a terminal; refused as a cluster's name is.
    QTest::addRow("pinned plan name with an escape code")
        << pin_edited(QStringLiteral("\"name\": \"pin\""),
                      QStringLiteral("\"name\": \"pin\\u001b[31m\""))
        << QStringLiteral("p.json, pinned plan 0: /name: must not hold control characters");
    QTest::addRow("pinned plan without a workload")
        << pin_edited(QStringLiteral("\"workload\": {"), QStringLiteral("\"workloads\": {"))
        << QStringLiteral("p.json, pinned plan 0: /workload: is required");
    auto with_pinned = [&](const nlohmann::json& value) {
      nlohmann::json j = nlohmann::json::parse(t.toStdString());
      j["pinned"] = value;
      return QString::fromStdString(j.dump(2));
    };
    QTest::addRow("pinned plan not an object")
        << with_pinned(nlohmann::json::array({7}))
        << QStringLiteral("p.json, pinned plan 0: /: must be an object");
    QTest::addRow("pinned not a list") << with_pinned(nlohmann::json::object())
                                       << QStringLiteral("p.json: /pinned: must be a list");
  }
  QTest::addRow("preset name") << edited(QStringLiteral("\"gpu\": {"),
                                         QStringLiteral("\"gpu\": \"h100-sxm\", \"unused\": {"))
                               << QStringLiteral(
                                      "/gpu: names the preset \"h100-sxm\", but this "
                                      "document must give it whole");
}

void TestGuiProject::badFiles() {
  QFETCH(QString, text);
  QFETCH(QString, message);
  auto p = project_from_json_text(text.toStdString(), "p.json");
  QVERIFY(!p.ok());
  QVERIFY2(QString::fromStdString(p.message()).contains(message), p.message().c_str());
  // A refused cluster or workload is not also said to be missing from the
  // project, by the plan that names it.
  for (const char* missing : {"no cluster named", "no workload named"}) {
    if (!message.contains(QLatin1String(missing)))
      QVERIFY2(!QString::fromStdString(p.message()).contains(QLatin1String(missing)),
               p.message().c_str());
  }
}

void TestGuiProject::clusterEdits_data() {
  QTest::addColumn<QString>("pointer");
  QTest::addColumn<QString>("value");
  QTest::addColumn<QString>("problem_pointer");
  QTest::addColumn<QString>("problem");  // "" when the edit is valid
  QTest::addRow("nodes") << "/nodes"
                         << "16"
                         << ""
                         << "";
  QTest::addRow("nodes zero") << "/nodes"
                              << "0"
                              << "/nodes"
                              << "must be between 1 and 1048576 (got 0)";
  QTest::addRow("nodes text") << "/nodes"
                              << "\"x\""
                              << "/nodes"
                              << "must be an integer";
  QTest::addRow("gpu preset") << "/gpu"
                              << "\"a100-80gb\""
                              << ""
                              << "";
  QTest::addRow("gpu unknown") << "/gpu"
                               << "\"h1000\""
                               << "/gpu"
                               << "h1000";
  QTest::addRow("bandwidth") << "/inter_node/bandwidth_gbps"
                             << "-1"
                             << "/inter_node/bandwidth_gbps"
                             << "must be between 0.001 and 10000000 (got -1)";
  QTest::addRow("price") << "/price_per_gpu_hour"
                         << "-3"
                         << "/price_per_gpu_hour"
                         << "must be between 0 and 1000000";
  QTest::addRow("no network") << "/inter_node"
                              << "null"
                              << "/inter_node"
                              << "required";
}

void TestGuiProject::clusterEdits() {
  QFETCH(QString, pointer);
  QFETCH(QString, value);
  QFETCH(QString, problem_pointer);
  QFETCH(QString, problem);
  const cs::Cluster original = defaults().clusters[0];
  std::vector<cs::Problem> problems;
  auto edited =
      edit_cluster(original, {{pointer.toStdString(), value.toStdString()}}, catalog(), &problems);
  if (problem.isEmpty()) {
    QVERIFY2(edited.ok(), edited.ok() ? "" : edited.message().c_str());
    QVERIFY(problems.empty());
    // A preset named by a string is inlined: its name is what the field holds.
    const QString shown = value.startsWith('"') ? pointer + QStringLiteral("/name") : pointer;
    QCOMPARE(QString::fromStdString(cluster_field(edited.value(), shown.toStdString())),
             value.remove('"'));
    return;
  }
  QVERIFY(!edited.ok());
  bool found = false;
  for (const cs::Problem& p : problems) {
    found = found || (QString::fromStdString(p.pointer) == problem_pointer &&
                      QString::fromStdString(p.message).contains(problem));
  }
  QVERIFY2(found, edited.message().c_str());
}

void TestGuiProject::workloadEdits() {
  const cs::Workload w = defaults().workloads[0];
  auto more = edit_workload(w, {{"/layers", "48"}});
  QVERIFY(more.ok());
  QCOMPARE(more->transformer.layers, 48);
  QVERIFY(cs::parameter_count(more.value()) > cs::parameter_count(w));
  std::vector<cs::Problem> problems;
  auto bad = edit_workload(w, {{"/kv_heads", "5"}}, &problems);
  QVERIFY(!bad.ok());
  QCOMPARE(problems.size(), std::size_t(1));
  QCOMPARE(QString::fromStdString(problems[0].pointer), QStringLiteral("/kv_heads"));
  QVERIFY(
      QString::fromStdString(problems[0].message).contains(QStringLiteral("must divide heads")));
  QCOMPARE(QString::fromStdString(workload_field(w, "/hidden")), QStringLiteral("4096"));
  QCOMPARE(QString::fromStdString(workload_field(w, "/nothing")), QString());
}

void TestGuiProject::problemsFromMessage() {
  const auto p = problems_from_message(
      "edit: /nodes: must be >= 1\nedit: /: must be an object\nother: /x: y", "edit");
  QCOMPARE(p.size(), std::size_t(3));
  QCOMPARE(QString::fromStdString(p[0].pointer), QStringLiteral("/nodes"));
  QCOMPARE(QString::fromStdString(p[0].message), QStringLiteral("must be >= 1"));
  QCOMPARE(QString::fromStdString(p[1].pointer), QString());
  QCOMPARE(QString::fromStdString(p[2].message), QStringLiteral("other: /x: y"));
}

void TestGuiProject::uniqueNames() {
  QCOMPARE(QString::fromStdString(unique_name("plan", {})), QStringLiteral("plan"));
  QCOMPARE(QString::fromStdString(unique_name("plan", {"plan", "plan 2"})),
           QStringLiteral("plan 3"));
  // A name of the longest length read back gives way to its number: a copy
  // of it, saved, made a project that did not open again.
  const std::string longest(cs::kMaxLabelCharacters, 'x');
  const std::string second = unique_name(longest, {longest});
  QCOMPARE(second.size(), cs::kMaxLabelCharacters);
  QVERIFY(second.ends_with("xx 2"));
  // Cut between characters (two bytes each here), counted as characters.
  std::string wide;
  for (std::size_t i = 0; i < cs::kMaxLabelCharacters; ++i)
    wide += "\u00e9";
  const std::string copy = label_with_suffix(wide, " (copy)");
  QCOMPARE(QString::fromStdString(copy).size(), qsizetype(cs::kMaxLabelCharacters));
  QVERIFY(QString::fromStdString(copy).endsWith(QStringLiteral("\u00e9 (copy)")));
  QCOMPARE(label_with_suffix("short", " (edited)"), std::string("short (edited)"));
  // Both read back.
  Project project = defaults();
  project.plans[0].name = second;
  project.clusters[0].display_name = copy;
  const QString path = dir_.filePath(QStringLiteral("longest.clusterscope.json"));
  QVERIFY(save_project(path.toStdString(), project).ok());
  auto reopened = load_project(path.toStdString());
  QVERIFY2(reopened.ok(), reopened.ok() ? "" : reopened.message().c_str());
}

// A cluster or workload used by the current plan alone is replaced in
// place under its name (the plan refers to it by that name); one that other
// plans share stays theirs, and the current plan gets its own, named apart.
void TestGuiProject::partsForTheCurrentPlan() {
  Project p = defaults();
  const std::string cluster = p.plans[0].cluster;
  const std::string model = p.plans[0].workload;
  cs::Cluster a100 = catalog().cluster("dgx-a100-64").value();
  use_for_current_plan(p, a100);
  QCOMPARE(int(p.clusters.size()), 1);
  QCOMPARE(p.plans[0].cluster, cluster);
  QCOMPARE(p.clusters[0].nodes, a100.nodes);

  ProjectPlan second = p.plans[0];
  second.name = "second";
  p.plans.push_back(second);
  p.current_plan = 1;
  const cs::Cluster before = p.clusters[0];
  use_for_current_plan(p, catalog().cluster("dgx-h100-32").value());
  QCOMPARE(int(p.clusters.size()), 2);
  QCOMPARE(p.plans[0].cluster, cluster);
  QVERIFY(p.plans[1].cluster != cluster);
  QVERIFY(cs::to_json(p.clusters[0]) == cs::to_json(before));  // the first plan's, untouched

  // A copy: "(copy)" shown, named apart; the plan sharing the original keeps it.
  const cs::Workload* shared = p.current_workload();
  const std::string shown = shared->display_name;
  copy_workload_for_current_plan(p);
  QCOMPARE(int(p.workloads.size()), 2);
  QCOMPARE(p.plans[0].workload, model);
  QVERIFY(p.plans[1].workload != model);
  QCOMPARE(p.current_workload()->display_name, shown + " (copy)");
  // Used by the current plan alone now: replaced in place.
  cs::Workload edited = *p.current_workload();
  edited.name = "whatever";
  edited.transformer.layers = 3;
  const std::string own = p.plans[1].workload;
  use_for_current_plan(p, edited);
  QCOMPARE(int(p.workloads.size()), 2);
  QCOMPARE(p.plans[1].workload, own);
  QCOMPARE(p.current_workload()->transformer.layers, 3);
  QVERIFY(p.workloads[std::size_t(p.workload_index(model))].transformer.layers != 3);
}

void TestGuiProject::undoMergesTyping() {
  Workspace ws;
  QVERIFY(ws.newProject());
  QSignalSpy changed(&ws, &Workspace::projectChanged);
  for (int nodes : {1, 12, 128}) {
    Project p = ws.project();
    p.clusters[0].nodes = nodes;
    ws.edit(QStringLiteral("nodes"), p, QStringLiteral("cluster/nodes"));
  }
  QCOMPARE(changed.count(), 3);
  QCOMPARE(ws.undoStack()->count(), 1);  // three keystrokes, one step
  Project p = ws.project();
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  QCOMPARE(ws.undoStack()->count(), 2);
  QVERIFY(ws.isModified());
  ws.undoStack()->undo();
  QCOMPARE(ws.project().plans[0].parallel.zero_stage, 1);
  QCOMPARE(ws.project().clusters[0].nodes, 128);
  ws.undoStack()->undo();
  QCOMPARE(ws.project().clusters[0].nodes, 4);
  QVERIFY(!ws.isModified());
  ws.closeSession();
}

// A workspace destroyed with unsaved edits said fileChanged from inside its
// destructor (its undo stack comes clean as it is destroyed), to receivers
// already destroyed: the main window, whose child it is (undefined
// behaviour; UBSan: a call on an object that was only a QWidget any more).
void TestGuiProject::destroyedWorkspaceSaysNothing() {
  auto* ws = new Workspace;
  QVERIFY(ws->newProject());
  Project p = ws->project();
  p.plans[0].parallel.zero_stage = 2;
  ws->edit(QStringLiteral("zero"), p);
  QVERIFY(!ws->undoStack()->isClean());
  QSignalSpy file_changed(ws, &Workspace::fileChanged);
  delete ws;
  QCOMPARE(file_changed.count(), 0);
}

// A run recorded is a fact, not an edit: undo and redo leave it, and it
// makes the project modified until saved.
void TestGuiProject::runsStayThroughUndo() {
  Workspace ws;
  QVERIFY(ws.newProject());
  const QString path = dir_.filePath(QStringLiteral("runs.clusterscope.json"));
  QVERIFY(ws.saveAs(path));
  Project p = ws.project();
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  QSignalSpy file_changed(&ws, &Workspace::fileChanged);
  ProjectRun run;
  run.title = "first";
  run.store = "/tmp/first.db";
  run.outcome = "complete";
  ws.recordRun(run);
  QCOMPARE(ws.undoStack()->count(), 1);  // the edit only
  QCOMPARE(int(ws.project().runs.size()), 1);
  ws.undoStack()->undo();
  QCOMPARE(ws.project().plans[0].parallel.zero_stage, 1);
  QCOMPARE(int(ws.project().runs.size()), 1);
  QVERIFY(ws.isModified());  // the undo is back at the saved step, the run is not saved
  ws.undoStack()->redo();
  QCOMPARE(ws.project().plans[0].parallel.zero_stage, 2);
  QCOMPARE(int(ws.project().runs.size()), 1);
  QVERIFY(ws.save());
  QVERIFY(!ws.isModified());
  run.title = "second";
  ws.recordRun(run);
  QVERIFY(ws.isModified());
  QVERIFY(file_changed.count() >= 3);  // modified, saved, modified
  ws.undoStack()->undo();
  QCOMPARE(int(ws.project().runs.size()), 2);
  QVERIFY(ws.save());
  auto reread = load_project(path.toStdString());
  QVERIFY(reread.ok());
  QCOMPARE(int(reread->runs.size()), 2);
  QCOMPARE(reread->plans[0].parallel.zero_stage, 1);
  ws.closeSession();
}

// Pinned plans are saved with the project (they were lost on reopening)
// and, as runs, are no edits: undo keeps them, pins as they were change
// nothing, and other pins make the project modified until saved.
void TestGuiProject::pinsSavedNotUndone() {
  Workspace ws;
  QVERIFY(ws.newProject());
  const QString path = dir_.filePath(QStringLiteral("pins.clusterscope.json"));
  QVERIFY(ws.saveAs(path));
  Project p = ws.project();
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  QVERIFY(ws.save());
  ProjectPin pin{"pinned one", p.clusters[0], p.workloads[0], p.plans[0].parallel,
                 p.plans[0].precision};
  pin.cluster.nodes = 8;  // estimated on a cluster the project no longer has
  QSignalSpy file_changed(&ws, &Workspace::fileChanged);
  ws.setPinned({pin});
  QVERIFY(ws.isModified());
  QCOMPARE(file_changed.count(), 1);
  QCOMPARE(ws.undoStack()->count(), 1);  // the edit only
  ws.undoStack()->undo();
  QCOMPARE(ws.project().plans[0].parallel.zero_stage, 1);
  QCOMPARE(int(ws.project().pinned.size()), 1);
  ws.undoStack()->redo();
  QVERIFY(ws.save());
  QVERIFY(!ws.isModified());
  ws.setPinned(ws.project().pinned);
  QVERIFY(!ws.isModified());

  auto reread = load_project(path.toStdString());
  QVERIFY2(reread.ok(), reread.ok() ? "" : reread.message().c_str());
  QCOMPARE(int(reread->pinned.size()), 1);
  QVERIFY(same_pins(reread->pinned, {pin}));
  QCOMPARE(reread->pinned[0].cluster.nodes, 8);
  QCOMPARE(reread->pinned[0].name, std::string("pinned one"));
  QVERIFY(same_edits(reread.value(), ws.project()));
  QVERIFY(ws.open(path));
  QVERIFY(same_pins(ws.project().pinned, {pin}));
  ws.setPinned({});
  QVERIFY(ws.isModified());
  ws.closeSession();
}

// Showing another plan is not an edit: no undo step, nothing to save (it
// was both, so that Ctrl+Z switched plans back and closing asked to save).
void TestGuiProject::switchingPlansIsNotAnEdit() {
  Workspace ws;
  QVERIFY(ws.newProject());
  Project p = ws.project();
  ProjectPlan second = p.plans[0];
  second.name = "second";
  p.plans.push_back(second);
  p.current_plan = 1;
  ws.edit(QStringLiteral("add a plan"), p);
  QVERIFY(ws.saveAs(dir_.filePath(QStringLiteral("switch.clusterscope.json"))));
  QSignalSpy changed(&ws, &Workspace::projectChanged);
  ws.selectPlan(0);
  QCOMPARE(ws.project().current_plan, 0);
  QCOMPARE(changed.count(), 1);
  QCOMPARE(ws.undoStack()->count(), 1);
  QVERIFY(!ws.isModified());
  ws.selectPlan(5);  // no such plan: nothing happens
  QCOMPARE(ws.project().current_plan, 0);
  ws.undoStack()->undo();  // the plan added goes
  QCOMPARE(int(ws.project().plans.size()), 1);
  QCOMPARE(ws.project().current_plan, 0);
  ws.closeSession();
}

void TestGuiProject::saveOpenAndRecentFiles() {
  Workspace ws;
  QVERIFY(ws.newProject());
  ws.clearRecentFiles();
  QVERIFY(!ws.save());                                      // no file yet
  const QString path = dir_.filePath(QStringLiteral("a"));  // the suffix is added
  QVERIFY(ws.saveAs(path));
  QCOMPARE(ws.filePath(), path + QStringLiteral(".clusterscope.json"));
  QVERIFY(QFile::exists(ws.filePath()));
  QCOMPARE(ws.recentFiles(), QStringList{ws.filePath()});

  Project p = ws.project();
  p.plans[0].parallel.micro_batch = 2;
  ws.edit(QStringLiteral("micro"), p);
  QVERIFY(ws.save());
  Workspace other;
  QVERIFY(other.open(ws.filePath()));
  QCOMPARE(other.project().plans[0].parallel.micro_batch, 2);
  QCOMPARE(project_to_json_text(other.project()), project_to_json_text(ws.project()));
  QVERIFY(!other.isModified());
  ws.closeSession();
  other.closeSession();

  // A recent file gone since leaves the list when it fails to open (it
  // stayed, failing each time); one that is there but does not read stays.
  const QString moved = dir_.filePath(QStringLiteral("moved.clusterscope.json"));
  QVERIFY(QFile::copy(ws.filePath(), moved));
  QVERIFY(other.open(moved));
  other.closeSession();
  const QString broken = dir_.filePath(QStringLiteral("broken.clusterscope.json"));
  QVERIFY(QFile::copy(ws.filePath(), broken));
  QVERIFY(other.open(broken));
  other.closeSession();
  QVERIFY(QFile::remove(moved));
  {
    QFile damaged(broken);
    QVERIFY(damaged.open(QIODevice::WriteOnly | QIODevice::Truncate));
    damaged.write("{ not json");
  }
  QSignalSpy opening(&other, &Workspace::message);
  QVERIFY(!other.open(moved));
  QVERIFY(!other.open(broken));
  QCOMPARE(other.recentFiles(), (QStringList{broken, ws.filePath()}));
  QCOMPARE(opening.count(), 2);
  QVERIFY2(opening.at(0).at(0).toString().contains(QStringLiteral("no longer in the recent files")),
           qPrintable(opening.at(0).at(0).toString()));
  QVERIFY(!opening.at(1).at(0).toString().contains(QStringLiteral("recent files")));

  // An unwritable place: the save fails with a message and nothing changes.
  QSignalSpy messages(&ws, &Workspace::message);
  QVERIFY(!ws.saveAs(dir_.filePath(QStringLiteral("no/such/dir/b.clusterscope.json"))));
  QCOMPARE(messages.count(), 1);
  QCOMPARE(messages.front().at(1).value<MessageLevel>(), MessageLevel::error);
  QCOMPARE(ws.filePath(), dir_.filePath(QStringLiteral("a.clusterscope.json")));

  // A read-only file is kept as it was, and read-only: it was renamed over,
  // and came back writable. Said with its name; the project stays unsaved.
  const QString kept = ws.filePath();
  QFile file(kept);
  QVERIFY(file.open(QIODevice::ReadOnly));
  const QByteArray before = file.readAll();
  file.close();
  const auto read_only = QFile::ReadOwner | QFile::ReadGroup | QFile::ReadOther;
  QVERIFY(QFile::setPermissions(kept, read_only));
  auto writable_again =
      qScopeGuard([&] { QFile::setPermissions(kept, read_only | QFile::WriteOwner); });
  p.plans[0].parallel.micro_batch = 4;
  ws.edit(QStringLiteral("micro"), p);
  messages.clear();
  QVERIFY(!ws.save());
  QCOMPARE(messages.count(), 1);
  QCOMPARE(messages.front().at(1).value<MessageLevel>(), MessageLevel::error);
  const QString said = messages.front().at(0).toString();
  QVERIFY2(said.contains(kept) && said.contains(QStringLiteral("read-only")), qPrintable(said));
  QVERIFY(file.open(QIODevice::ReadOnly));
  QCOMPARE(file.readAll(), before);
  file.close();
  QCOMPARE(
      QFileInfo(kept).permissions() & (QFile::WriteOwner | QFile::WriteGroup | QFile::WriteOther),
      QFileDevice::Permissions());
  QVERIFY(ws.isModified());
  QCOMPARE(ws.filePath(), kept);
}

void TestGuiProject::openKeepsProjectOnFailure() {
  Workspace ws;
  QVERIFY(ws.newProject());
  const std::string before = project_to_json_text(ws.project());
  const QString path = dir_.filePath(QStringLiteral("broken.clusterscope.json"));
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("\x89PNG\r\n\x1a\n not a project");
  f.close();
  QSignalSpy messages(&ws, &Workspace::message);
  QVERIFY(!ws.open(path));
  QCOMPARE(messages.count(), 1);
  QVERIFY(messages.front().front().toString().contains(QStringLiteral("broken.clusterscope.json")));
  QCOMPARE(project_to_json_text(ws.project()), before);
  QVERIFY(ws.filePath().isEmpty());
  ws.closeSession();
}

// A named pipe named as a project (in the file dialog, the recent files or
// on the command line): reading it waited for a program to write to it, and
// the app hung, unable to quit. It is refused at once, named, whether or not
// a program writes to it, and the open project stays as it was.
void TestGuiProject::namedPipeIsRefused() {
  const QString pipe = dir_.filePath(QStringLiteral("piped.clusterscope.json"));
  Workspace ws;
  QVERIFY(ws.newProject());
  Project p = ws.project();
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  const std::string before = project_to_json_text(ws.project());
  // A writer with a whole project: opened, it was read as the project.
  cs::test::NamedPipeWriter writer(pipe,
                                   QByteArray::fromStdString(project_to_json_text(defaults())));
  QVERIFY(writer.made());
  QSignalSpy messages(&ws, &Workspace::message);
  const bool opened = ws.open(pipe);
  writer.finish();
  QVERIFY(!opened);
  QCOMPARE(messages.count(), 1);
  const QString said = messages.front().front().toString();
  QVERIFY2(said.contains(pipe + QStringLiteral(": is a named pipe, not a project file")),
           qPrintable(said));
  QCOMPARE(project_to_json_text(ws.project()), before);
  QVERIFY(ws.isModified());
  QVERIFY(ws.filePath().isEmpty());
  ws.closeSession();
}

// A file that is no project (a run store, a picture, an empty file, a
// project with a misspelt key) is refused by name, and the open project
// stays as it was: its edits, its undo steps, its file.
void TestGuiProject::foreignFilesKeepTheProject_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<QByteArray>("bytes");
  QTest::addColumn<QString>("says");
  QFile store(QStringLiteral(CS_SOURCE_DIR "/tests/data/cpu/cpu-engine-dp2.db"));
  if (!store.open(QIODevice::ReadOnly)) qFatal("fixture: no run store");
  QTest::addRow("run store") << QStringLiteral("run.json") << store.readAll()
                             << QStringLiteral("invalid JSON");
  QTest::addRow("picture") << QStringLiteral("picture.clusterscope.json")
                           << QByteArray("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16)
                           << QStringLiteral("invalid JSON");
  QTest::addRow("empty") << QStringLiteral("empty.clusterscope.json") << QByteArray()
                         << QStringLiteral("invalid JSON");
  std::string misspelt = project_to_json_text(defaults());
  misspelt.replace(misspelt.find("\"plans\""), 7, "\"plan\"");
  QTest::addRow("misspelt key") << QStringLiteral("misspelt.clusterscope.json")
                                << QByteArray::fromStdString(misspelt)
                                << QStringLiteral("/plan: unknown field (did you mean \"plans\"?)");
}

void TestGuiProject::foreignFilesKeepTheProject() {
  QFETCH(QString, name);
  QFETCH(QByteArray, bytes);
  QFETCH(QString, says);
  const QString path = dir_.filePath(name);
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(bytes);
  f.close();
  Workspace ws;
  QVERIFY(ws.newProject());
  const QString saved = dir_.filePath(QStringLiteral("kept.clusterscope.json"));
  QVERIFY(ws.saveAs(saved));
  Project p = ws.project();
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  const std::string before = project_to_json_text(ws.project());
  QSignalSpy messages(&ws, &Workspace::message);
  QVERIFY(!ws.open(path));
  QCOMPARE(messages.count(), 1);
  const QString said = messages.front().front().toString();
  QVERIFY2(said.contains(name) && said.contains(says), qPrintable(said));
  QCOMPARE(messages.front().at(1).value<MessageLevel>(), MessageLevel::error);
  QCOMPARE(project_to_json_text(ws.project()), before);
  QVERIFY(ws.isModified());
  QCOMPARE(ws.undoStack()->count(), 1);
  QCOMPARE(ws.filePath(), saved);
  ws.closeSession();
}

// An edit that changes nothing is no undo step and no change to save: a
// list's item picked again made "Use cluster ..." steps, and a field typed
// away and back ("4", "41", "4") left a step that undid nothing and the
// project marked modified although it was as saved.
void TestGuiProject::noStepThatChangesNothing() {
  Workspace ws;
  QVERIFY(ws.newProject());
  QVERIFY(ws.saveAs(dir_.filePath(QStringLiteral("nothing.clusterscope.json"))));
  QSignalSpy changed(&ws, &Workspace::projectChanged);
  QSignalSpy file_changed(&ws, &Workspace::fileChanged);
  ws.edit(QStringLiteral("same"), ws.project());
  QCOMPARE(ws.undoStack()->count(), 0);
  QCOMPARE(changed.count(), 0);
  QVERIFY(!ws.isModified());

  Project p = ws.project();
  for (int nodes : {41, 4}) {
    p.clusters[0].nodes = nodes;
    ws.edit(QStringLiteral("nodes"), p, QStringLiteral("cluster/nodes"));
  }
  QCOMPARE(ws.undoStack()->count(), 0);
  QVERIFY(!ws.undoStack()->canUndo());
  QVERIFY(!ws.isModified());
  QCOMPARE(file_changed.count(), 2);  // modified, then as saved again

  // After another step, typing away and back leaves that step alone.
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  for (int nodes : {41, 4}) {
    p.clusters[0].nodes = nodes;
    ws.edit(QStringLiteral("nodes"), p, QStringLiteral("cluster/nodes"));
  }
  QCOMPARE(ws.undoStack()->count(), 1);
  QCOMPARE(ws.undoStack()->undoText(), QStringLiteral("zero"));
  QVERIFY(ws.isModified());

  // A run recorded since is no edit: the same plans again are still none.
  ProjectRun run;
  run.store = "/runs/a.db";
  ws.recordRun(run);
  ws.edit(QStringLiteral("same"), ws.project());
  QCOMPARE(ws.undoStack()->count(), 1);
  // Undone, the step waits to be redone; an edit that changes nothing keeps it so.
  ws.undoStack()->undo();
  ws.edit(QStringLiteral("same"), ws.project());
  QVERIFY(ws.undoStack()->canRedo());
  ws.closeSession();
}

// Saved on a full disk: the save fails and says so, the file keeps what
// the last save wrote, nothing is left beside it, and the project is still
// unsaved.
void TestGuiProject::saveOnAFullDisk() {
  const QString disk = dir_.filePath(QStringLiteral("small-disk"));
  QVERIFY(QDir().mkpath(disk));
  QProcess mount;
  mount.start(QStringLiteral("mount"),
              {QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"),
               QStringLiteral("size=256k"), QStringLiteral("tmpfs"), disk});
  if (!mount.waitForFinished(10000) || mount.exitCode() != 0)
    QSKIP("cannot mount a small tmpfs here (needs root): the full-disk case is not checked");
  auto unmount = qScopeGuard([&] { QProcess::execute(QStringLiteral("umount"), {disk}); });

  Workspace ws;
  QVERIFY(ws.newProject());
  const QString path = disk + QStringLiteral("/p.clusterscope.json");
  QVERIFY(ws.saveAs(path));
  QFile file(path);
  QVERIFY(file.open(QIODevice::ReadOnly));
  const QByteArray before = file.readAll();
  file.close();
  {
    QFile filler(disk + QStringLiteral("/filler"));
    QVERIFY(filler.open(QIODevice::WriteOnly));
    const QByteArray block(4096, 'x');
    while (filler.write(block) == block.size() && filler.flush()) {
    }
  }
  Project p = ws.project();
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  QSignalSpy messages(&ws, &Workspace::message);
  QVERIFY(!ws.save());
  QCOMPARE(messages.count(), 1);
  const QString said = messages.front().front().toString();
  QVERIFY2(said.contains(path) && said.contains(QStringLiteral("disk full?")), qPrintable(said));
  QVERIFY(file.open(QIODevice::ReadOnly));
  QCOMPARE(file.readAll(), before);
  file.close();
  QCOMPARE(QDir(disk).entryList(QDir::Files | QDir::Hidden).size(), 2);  // the file, the filler
  QVERIFY(ws.isModified());
  QCOMPARE(ws.filePath(), path);
  ws.closeSession();
}

// Saved as onto a run store (the file dialog's "replace?" answered yes, a
// link to one, a store named as a project): the project was written over
// it, and the recorded run was gone. It is refused by name, as the exports
// refuse it; the store stays as it was and the project unsaved.
void TestGuiProject::saveKeepsARunStore_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<bool>("link");
  QTest::addRow("run store") << QStringLiteral("run.db") << false;
  QTest::addRow("run store with a project's name")
      << QStringLiteral("run.clusterscope.json") << false;
  QTest::addRow("link to a run store") << QStringLiteral("linked.clusterscope.json") << true;
}

void TestGuiProject::saveKeepsARunStore() {
  QFETCH(QString, name);
  QFETCH(bool, link);
  QFile fixture(QStringLiteral(CS_SOURCE_DIR "/tests/data/cpu/cpu-engine-dp2.db"));
  QVERIFY(fixture.open(QIODevice::ReadOnly));
  const QByteArray store_bytes = fixture.readAll();
  const QString store = dir_.filePath(QStringLiteral("store-%1").arg(name));
  {
    QFile f(store);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(store_bytes), store_bytes.size());
  }
  const QString path = link ? dir_.filePath(name) : store;
  if (link) {
    QFile::remove(path);
    QVERIFY(QFile::link(store, path));
  }
  Workspace ws;
  QVERIFY(ws.newProject());
  const QString saved = dir_.filePath(QStringLiteral("before-store.clusterscope.json"));
  QVERIFY(ws.saveAs(saved));
  Project p = ws.project();
  p.plans[0].parallel.zero_stage = 2;
  ws.edit(QStringLiteral("zero"), p);
  QSignalSpy messages(&ws, &Workspace::message);
  QVERIFY(!ws.saveAs(path));
  QCOMPARE(messages.count(), 1);
  QCOMPARE(messages.front().at(1).value<MessageLevel>(), MessageLevel::error);
  const QString said = messages.front().front().toString();
  QVERIFY2(said.contains(path) && said.contains(QStringLiteral("SQLite database")),
           qPrintable(said));
  QFile kept(store);
  QVERIFY(kept.open(QIODevice::ReadOnly));
  QVERIFY2(kept.readAll() == store_bytes, "the run store was written over");
  QCOMPARE(QFileInfo(path).isSymLink(), link);
  QVERIFY(ws.isModified());
  QCOMPARE(ws.filePath(), saved);
  ws.closeSession();
}

void TestGuiProject::autosaveAndRecovery() {
  QString autosave;
  std::string edited;
  const QString source = dir_.filePath(QStringLiteral("work.clusterscope.json"));
  {
    Workspace crashed;
    QVERIFY(!crashed.hasRecovery());
    QVERIFY(crashed.newProject());
    QVERIFY(crashed.saveAs(source));
    crashed.setAutosaveDelay(10);
    Project p = crashed.project();
    p.plans[0].parallel.global_batch = 2048;
    crashed.edit(QStringLiteral("batch"), p);
    autosave = crashed.autosavePath();
    QVERIFY(!autosave.isEmpty());
    QTRY_VERIFY(QFile::exists(autosave));
    edited = project_to_json_text(crashed.project());
    // No closeSession(): the session ends as a crash would, file left behind.
  }
  QVERIFY(QFile::exists(autosave));
  Workspace next;
  QVERIFY(next.hasRecovery());
  QCOMPARE(next.recoverySource(), source);
  QVERIFY(next.autosavePath() != autosave);  // its own slot, not the crashed one's
  QVERIFY(next.recover());
  QCOMPARE(project_to_json_text(next.project()), edited);
  QVERIFY(next.isModified());
  QCOMPARE(next.filePath(), source);
  QVERIFY(!QFile::exists(autosave));
  QVERIFY(!next.hasRecovery());
  next.closeSession();
  QVERIFY(!QFile::exists(next.autosavePath()));

  // A clean exit leaves nothing to recover.
  {
    Workspace clean;
    QVERIFY(clean.newProject());
    clean.setAutosaveDelay(10);
    Project p = clean.project();
    p.plans[0].parallel.global_batch = 512;
    clean.edit(QStringLiteral("batch"), p);
    QTRY_VERIFY(QFile::exists(clean.autosavePath()));
    clean.closeSession();
  }
  Workspace after_clean;
  QVERIFY(!after_clean.hasRecovery());
  after_clean.closeSession();
}

// A crashed session's autosave that this version cannot read (a newer one
// wrote it) is kept and its place said: Restore deleted it, and with it the
// unsaved work.
void TestGuiProject::failedRecoveryKeepsTheFile() {
  QString autosave;
  {
    Workspace crashed;
    QVERIFY(crashed.newProject());
    crashed.setAutosaveDelay(10);
    Project p = crashed.project();
    p.plans[0].parallel.global_batch = 2048;
    crashed.edit(QStringLiteral("batch"), p);
    autosave = crashed.autosavePath();
    QTRY_VERIFY(QFile::exists(autosave));
    // No closeSession(): the session ends as a crash would.
  }
  QFile file(autosave);
  QVERIFY(file.open(QIODevice::ReadWrite));
  QString text = QString::fromUtf8(file.readAll());
  QVERIFY(text.contains(QStringLiteral("\"version\": 2")));
  text.replace(QStringLiteral("\"version\": 2"), QStringLiteral("\"version\": 3"));
  QVERIFY(file.resize(0));
  file.write(text.toUtf8());
  file.close();
  Workspace next;
  QVERIFY(next.hasRecovery());
  QSignalSpy messages(&next, &Workspace::message);
  QVERIFY(!next.recover());
  QVERIFY(QFile::exists(autosave));
  QCOMPARE(messages.count(), 1);
  QVERIFY2(
      messages.front().front().toString().contains(QStringLiteral("It is kept in ") + autosave),
      qPrintable(messages.front().front().toString()));
  QVERIFY(!next.hasRecovery());
  next.closeSession();
  QFile::remove(autosave);
}

// Changes discarded for a new project went on in the autosave: a crash
// before the next edit offered them back as "unsaved changes".
void TestGuiProject::discardedChangesAreNotRecovered() {
  QString autosave;
  {
    Workspace crashed;
    QVERIFY(!crashed.hasRecovery());
    QVERIFY(crashed.newProject());
    crashed.setAutosaveDelay(10);
    Project p = crashed.project();
    p.plans[0].parallel.global_batch = 2048;
    crashed.edit(QStringLiteral("batch"), p);
    autosave = crashed.autosavePath();
    QTRY_VERIFY(QFile::exists(autosave));
    QVERIFY(crashed.newProject());  // the edit discarded
    QVERIFY(!QFile::exists(autosave));
    // No closeSession(): the session ends as a crash would.
  }
  Workspace next;
  QVERIFY(!next.hasRecovery());
  next.closeSession();
}

void TestGuiProject::analysisInlineAndInBackground() {
  const cs::Plan plan = defaults().resolved_plan().value();
  // Inline (the plan takes microseconds): never delivered inside request().
  AnalysisService inline_service;
  QSignalSpy inline_spy(&inline_service, &AnalysisService::analysed);
  const std::uint64_t job = inline_service.request(plan);
  QCOMPARE(inline_spy.count(), 0);
  QTRY_COMPARE(inline_spy.count(), 1);
  QCOMPARE(inline_service.latest()->job, job);
  QVERIFY(inline_service.latest()->estimate.has_value());
  QCOMPARE(inline_service.latest()->optionsOf(cs::plan::Control::tp).empty(), false);

  // On the worker thread: three requests in a row; the first is running, the
  // second is replaced while it waits, the first's result is stale. Only the
  // last is delivered.
  AnalysisService service;
  service.setBackgroundOnly(true);
  QSignalSpy spy(&service, &AnalysisService::analysed);
  cs::Plan b = plan;
  b.parallel.zero_stage = 2;
  cs::Plan c = plan;
  c.parallel.zero_stage = 3;
  service.request(plan);
  service.request(b);
  const std::uint64_t last = service.request(c);
  QVERIFY(service.busy());
  QTRY_VERIFY(!service.busy());
  QTest::qWait(50);
  QCOMPARE(spy.count(), 1);
  QCOMPARE(service.latest()->job, last);
  QCOMPARE(service.latest()->plan.parallel.zero_stage, 3);

  // A plan that cannot run: the reasons, no estimate, no crash.
  cs::Plan bad = plan;
  bad.parallel.tp = 3;
  service.request(bad);
  QTRY_COMPARE(spy.count(), 2);
  QVERIFY(!service.latest()->estimate);
  QVERIFY(!service.latest()->problems.empty());
  bool tp_named = false;
  for (const cs::Problem& p : service.latest()->problems)
    tp_named = tp_named || p.pointer == "/parallel/tp";
  QVERIFY(tp_named);
}

QTEST_MAIN(TestGuiProject)
#include "tst_gui_project.moc"
