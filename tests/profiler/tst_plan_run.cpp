// launch::plan_run: a plan made into the launcher's RunSpec, as the desktop
// app launches it: the engine's notes, refusals naming the field, the
// worker's arguments, and the plan file the workers read.

#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/presets.h"
#include "profiler/plan_run.h"

using namespace cs;

namespace {

// A cluster and a small transformer from the presets, two data-parallel ranks.
Plan smallPlan() {
  auto catalog = PresetCatalog::load(CS_SOURCE_DIR "/resources/presets");
  if (!catalog) qFatal("%s", catalog.message().c_str());
  Plan plan;
  plan.cluster = catalog->cluster("dgx-h100-32").value();
  const Workload* model = catalog->find_model("gpt2-small");
  if (!model) qFatal("no gpt2-small preset");
  plan.workload = *model;
  plan.parallel.dp = 2;
  plan.parallel.micro_batch = 1;
  plan.parallel.global_batch = 2;
  plan.precision = PrecisionPlan::for_compute(Precision::fp32);
  return plan;
}

std::string argAfter(const std::vector<std::string>& args, const std::string& flag) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return {};
}

}  // namespace

class TestPlanRun : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void workerArguments();
  void slurmJobMergesItsStores();
  void withoutMpirunNothingIsWritten();
  void refusals_data();
  void refusals();
  void notes_data();
  void notes();
  void interleavedRunsAsOneFOneBOnTheCudaEngine();
  void ranksThisMachineRuns_data();
  void ranksThisMachineRuns();

 private:
  QTemporaryDir dir_;
  launch::PlanRunOptions options() const {
    launch::PlanRunOptions o;
    o.backend = "cpu";
    o.steps = 3;
    o.run_store = dir_.filePath(QStringLiteral("run.db")).toStdString();
    return o;
  }
};

void TestPlanRun::initTestCase() {
  QVERIFY(dir_.isValid());
  // find_worker looks beside this program, then on PATH.
  qputenv("PATH", QByteArray(CS_BIN_DIR ":") + qgetenv("PATH"));
}

void TestPlanRun::workerArguments() {
  const Plan plan = smallPlan();
  auto run = launch::plan_run(plan, options());
  if (!run) QFAIL(run.message().c_str());
  const launch::RunSpec& spec = run->spec;
  QCOMPARE(run->backend, std::string("cpu"));
  QCOMPARE(spec.ranks, 2);
  QCOMPARE(argAfter(spec.worker_args, "--dp"), std::string("2"));
  QCOMPARE(argAfter(spec.worker_args, "--tp"), std::string("1"));
  QCOMPARE(argAfter(spec.worker_args, "--steps"), std::string("3"));
  QCOMPARE(argAfter(spec.worker_args, "--precision"), std::string("fp32"));
  QCOMPARE(argAfter(spec.worker_args, "--backend"), std::string("cpu"));
  QCOMPARE(spec.run_store, options().run_store);
  // The engines' shape is in the title: the plan's model is scaled down.
  QCOMPARE(QString::fromStdString(spec.title),
           QString("GPT-2 124M, scaled to 8 layers of hidden 256, on 2 ranks"));
  // The plan the workers read: written beside the store, and the same plan.
  QCOMPARE(argAfter(spec.worker_args, "--plan"), run->plan_path);
  QVERIFY(QFile::exists(QString::fromStdString(run->plan_path)));
  auto j = read_json_file(run->plan_path);
  QVERIFY(j.ok());
  auto back = plan_from_json(j.value(), run->plan_path);
  QVERIFY(back.ok());
  QCOMPARE(back->parallel.dp, 2);
  QCOMPARE(nlohmann::json::parse(spec.plan_json)["kind"].get<std::string>(), std::string("plan"));
  QVERIFY(std::find(spec.worker_args.begin(), spec.worker_args.end(), "--no-overlap") ==
          spec.worker_args.end());
  // A workload's name past what a title needs is shortened in it: the title
  // is one argument of each worker, and 140,000 characters made mpirun fail
  // with "Argument list too long". A title given that long is refused.
  Plan named = plan;
  named.workload.display_name = std::string(140000, 'n');
  auto shortened = launch::plan_run(named, options());
  if (!shortened) QFAIL(shortened.message().c_str());
  QVERIFY2(shortened->spec.title.size() < 5000 &&
               QString::fromStdString(shortened->spec.title)
                   .endsWith("nnn..., scaled to 8 layers of hidden 256, on 2 ranks"),
           shortened->spec.title.substr(0, 100).c_str());
  launch::PlanRunOptions long_title = options();
  long_title.title = std::string(140000, 't');
  auto refused = launch::plan_run(plan, long_title);
  QVERIFY(!refused);
  QVERIFY2(refused.message().find("--title: 140000 bytes, more than a program argument holds") !=
               std::string::npos,
           refused.message().c_str());
  // A plan that reduces gradients after backward runs its workers so.
  Plan after = plan;
  after.parallel.overlap_grad_reduce = false;
  auto late = launch::plan_run(after, options());
  if (!late) QFAIL(late.message().c_str());
  QVERIFY(std::find(late->spec.worker_args.begin(), late->spec.worker_args.end(), "--no-overlap") !=
          late->spec.worker_args.end());
}

// A Slurm job ends by merging its ranks' stores into the run store, whoever
// plans it (the app's jobs left only RUN.ranks/rank*.db), with the plan the
// workers read; a merge the user names is kept.
void TestPlanRun::slurmJobMergesItsStores() {
  launch::PlanRunOptions o = options();
  o.placement = launch::Placement::slurm;
  o.slurm.partition = "cpu";
  auto run = launch::plan_run(smallPlan(), o);
  if (!run) QFAIL(run.message().c_str());
  const std::vector<std::string>& merge = run->spec.slurm.after_command;
  QVERIFY(!merge.empty());
  QVERIFY2(merge.front().ends_with("/clusterscope"), merge.front().c_str());
  QCOMPARE(std::vector<std::string>(merge.begin() + 1, merge.begin() + 3),
           (std::vector<std::string>{"run", "--merge-only"}));
  QCOMPARE(argAfter(merge, "--plan"), run->plan_path);
  QCOMPARE(argAfter(merge, "--out"), o.run_store);
  QCOMPARE(argAfter(merge, "--ranks"), std::string("2"));
  auto script = launch::slurm_script(run->spec);
  QVERIFY2(script, script ? "" : script.message().c_str());
  QVERIFY(script->find("run --merge-only") != std::string::npos);

  o.slurm.after_command = {"/opt/merge", "it"};
  run = launch::plan_run(smallPlan(), o);
  QVERIFY(run);
  QCOMPARE(run->spec.slurm.after_command, o.slurm.after_command);
}

// Where mpirun is not found a run is refused before its plan is written
// beside the store: the plan of a run that never started was left there,
// and an empty RUN.ranks folder with it. A Slurm job's ranks start with
// srun, where the job runs: it needs no mpirun here.
void TestPlanRun::withoutMpirunNothingIsWritten() {
  const QByteArray path = qgetenv("PATH");
  qputenv("PATH", QByteArray(CS_BIN_DIR));  // the worker, no mpirun
  launch::PlanRunOptions o = options();
  o.run_store = dir_.filePath(QStringLiteral("no-mpirun.db")).toStdString();
  auto run = launch::plan_run(smallPlan(), o);
  const bool plan_written = QFileInfo::exists(dir_.filePath(QStringLiteral("no-mpirun.plan.json")));
  const bool folder_made = QFileInfo::exists(dir_.filePath(QStringLiteral("no-mpirun.ranks")));
  launch::PlanRunOptions slurm = o;
  slurm.placement = launch::Placement::slurm;
  auto job = launch::plan_run(smallPlan(), slurm);
  qputenv("PATH", path);
  QVERIFY(!run);
  QVERIFY2(run.message().starts_with("mpirun: not found"), run.message().c_str());
  QVERIFY(!plan_written);
  QVERIFY(!folder_made);
  QVERIFY2(job, job ? "" : job.message().c_str());
}

void TestPlanRun::refusals_data() {
  QTest::addColumn<QString>("change");
  QTest::addColumn<QString>("says");
  // Named by JSON pointer, as plan, validate and the app name a plan's
  // fields (they read "parallel.zero_stage").
  QTest::addRow("no ZeRO-4") << "zero4"
                             << "/parallel/zero_stage: ";
  QTest::addRow("fp16 on the CPU") << "fp16"
                                   << "/precision/compute: ";
  QTest::addRow("unknown backend") << "backend"
                                   << "backend";
  QTest::addRow("no steps") << "steps"
                            << "steps: must be >= 1";
  QTest::addRow("no store") << "store"
                            << "run store";
  // What the app's Launch started although its panel flagged the plan: a
  // tp of 10^5 or 10^6 ran the app out of memory laying out the reshaped model, a
  // dp of 2^31 - 1 wrapped the rank count.
  QTest::addRow("tp past any rank") << "tp"
                                    << "tp = 100000: the engines give each tensor-parallel rank "
                                       "a head (";
  QTest::addRow("ranks past an int") << "dp"
                                     << "/parallel: dp x tp x pp = 2147483647 ranks; a run starts "
                                        "at most 1048576";
  QTest::addRow("global batch") << "batch"
                                << "/parallel/global_batch: must be a multiple of dp x micro_batch";
  // Megatron's interleaved order walks the chunks pp micro-batches at a time.
  QTest::addRow("interleaved, 3 micro-batches on 2 stages")
      << "interleaved3"
      << "/parallel/virtual_stages: the interleaved schedule needs the micro-batches per step (3) "
         "to be a multiple of pp (2)";
}

void TestPlanRun::refusals() {
  QFETCH(QString, change);
  QFETCH(QString, says);
  Plan plan = smallPlan();
  launch::PlanRunOptions o = options();
  if (change == "zero4") plan.parallel.zero_stage = 4;
  if (change == "fp16") plan.precision = PrecisionPlan::for_compute(Precision::fp16);
  if (change == "backend") o.backend = "tpu";
  if (change == "steps") o.steps = 0;
  if (change == "store") o.run_store.clear();
  if (change == "tp") plan.parallel.tp = 100000;
  if (change == "interleaved3") {
    plan.parallel.dp = 1;
    plan.parallel.pp = 2;
    plan.parallel.micro_batch = 1;
    plan.parallel.global_batch = 3;
    plan.parallel.virtual_stages = 2;
    plan.parallel.schedule = PipelineSchedule::interleaved;
  }
  if (change == "dp") {
    plan.parallel.dp = std::numeric_limits<int>::max();
    plan.parallel.global_batch = std::numeric_limits<int>::max();
    plan.parallel.micro_batch = 1;
  }
  if (change == "batch")
    plan.parallel.global_batch = plan.parallel.dp * plan.parallel.micro_batch + 1;
  auto run = launch::plan_run(plan, o);
  QVERIFY(!run.ok());
  QVERIFY2(QString::fromStdString(run.message()).contains(says), run.message().c_str());
}

void TestPlanRun::notes_data() {
  QTest::addColumn<QString>("change");
  QTest::addColumn<QString>("note");
  QTest::addColumn<QString>("precision");
  QTest::addRow("tf32 on the CPU") << "tf32"
                                   << "tf32 has no meaning on the CPU"
                                   << "fp32";
  // The CPU engine runs the interleaved schedule (it ran 1F1B, said).
  QTest::addRow("interleaved") << "interleaved"
                               << "!1F1B"
                               << "fp32";
  // The engines recompute as the plan asks (they ran without it, said).
  QTest::addRow("recompute") << "recompute"
                             << "!recomputation"
                             << "fp32";
  QTest::addRow("scaled model") << "none"
                                << "the model is reshaped to what the engines run (at most hidden "
                                   "256, 8 layers, sequence 128)"
                                << "fp32";
  // GPT-2's tied embeddings and dropout, which the engines train without.
  QTest::addRow("tied, with dropout")
      << "none"
      << "the engines train an LM head of its own (the plan's model ties it to the token "
         "embedding) and no dropout"
      << "fp32";
  QTest::addRow("untied, without dropout") << "untied"
                                           << "!the engines train"
                                           << "fp32";
  // The engines run sequence parallelism (they ran without it, said).
  QTest::addRow("sequence parallel") << "sp"
                                     << "!sequence parallelism"
                                     << "fp32";
}

void TestPlanRun::notes() {
  QFETCH(QString, change);
  QFETCH(QString, note);
  QFETCH(QString, precision);
  Plan plan = smallPlan();
  if (change == "tf32") plan.precision = PrecisionPlan::for_compute(Precision::tf32);
  if (change == "interleaved") {
    plan.parallel.pp = 2;
    plan.parallel.dp = 1;
    plan.parallel.global_batch = 2;
    plan.parallel.virtual_stages = 2;
    plan.parallel.schedule = PipelineSchedule::interleaved;
  }
  if (change == "recompute") plan.parallel.recompute = Recompute::full;
  if (change == "sp") {
    plan.parallel.tp = 2;
    plan.parallel.dp = 1;
    plan.parallel.global_batch = 2;
    plan.parallel.sequence_parallel = true;
  }
  if (change == "untied") {
    plan.workload.transformer.tied_embeddings = false;
    plan.workload.transformer.dropout = false;
  }
  auto run = launch::plan_run(plan, options());
  if (!run) QFAIL(run.message().c_str());
  // "!text": no note says it.
  const bool absent = note.startsWith('!');
  const QString text = absent ? note.mid(1) : note;
  bool found = false;
  for (const std::string& n : run->notes)
    found = found || QString::fromStdString(n).contains(text);
  QVERIFY2(found != absent, qPrintable(note));
  QCOMPARE(QString::fromStdString(argAfter(run->spec.worker_args, "--precision")), precision);
  QCOMPARE(QString::fromStdString(argAfter(run->spec.worker_args, "--recompute")),
           change == "recompute" ? QString("full") : QString("none"));
  const auto& args = run->spec.worker_args;
  QCOMPARE(std::find(args.begin(), args.end(), "--sequence-parallel") != args.end(),
           change == "sp");
  QCOMPARE(QString::fromStdString(argAfter(args, "--virtual-stages")),
           change == "interleaved" ? QString("2") : QString());
}

// NCCL's sends block the stream until their receive: the CUDA engine runs
// the plan's chunks as 1F1B, said, on the model the chunks split (its
// layers a multiple of pp x virtual stages, as the prediction's).
void TestPlanRun::interleavedRunsAsOneFOneBOnTheCudaEngine() {
  Plan plan = smallPlan();
  plan.workload.transformer.layers = 12;
  plan.parallel.dp = 1;
  plan.parallel.pp = 2;
  plan.parallel.global_batch = 2;
  plan.parallel.virtual_stages = 3;
  plan.parallel.schedule = PipelineSchedule::interleaved;
  launch::PlanRunOptions o = options();
  o.backend = "cuda";
  o.write_plan = false;  // no GPU here to check
  auto run = launch::plan_run(plan, o);
  if (!run) QFAIL(run.message().c_str());
  bool said = false;
  for (const std::string& n : run->notes)
    said = said || n.find("the CUDA engine runs the interleaved pipeline schedule as plain 1F1B") !=
                       std::string::npos;
  QVERIFY(said);
  QCOMPARE(QString::fromStdString(argAfter(run->spec.worker_args, "--virtual-stages")), QString());
  QCOMPARE(QString::fromStdString(argAfter(run->spec.worker_args, "--layers")), QString("6"));
  o.backend = "cpu";
  run = launch::plan_run(plan, o);
  if (!run) QFAIL(run.message().c_str());
  QCOMPARE(QString::fromStdString(argAfter(run->spec.worker_args, "--virtual-stages")),
           QString("3"));
  QCOMPARE(QString::fromStdString(argAfter(run->spec.worker_args, "--layers")), QString());
}

void TestPlanRun::ranksThisMachineRuns_data() {
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("cores");
  QTest::addColumn<double>("memory_gib");
  QTest::addColumn<QString>("refusal");  // "" when it runs
  // docs/runs.md, "More ranks than cores": 4 ranks on 2 cores are measured.
  QTest::addRow("4 ranks on 2 cores") << 4 << 2 << 64.0 << "";
  QTest::addRow("8 a core") << 16 << 2 << 64.0 << "";
  // --dp 100000 on 2 cores spun mpirun at full CPU and never started a rank.
  QTest::addRow("past 8 a core")
      << 17 << 2 << 64.0
      << "17 ranks of the CPU engine on this machine's 2 cores: at most 16 run here (8 a core";
  QTest::addRow("one core") << 9 << 1 << 64.0 << "on this machine's 1 core: at most 8 run here";
  QTest::addRow("memory unknown") << 64 << 64 << 0.0 << "";
  // GPT-2 small scaled to the engines' shape: about 100 MB of weights,
  // gradients and AdamW moments a rank.
  QTest::addRow("past the memory")
      << 64 << 64 << 2.0 << "64 ranks of the CPU engine need at least ";
}

// How many CPU-engine ranks this machine runs side by side: refused past 8 a
// core or past the memory available, naming the count, the cores or the
// memory, and how to start them anyway; plan_run refuses them too unless
// told to oversubscribe.
void TestPlanRun::ranksThisMachineRuns() {
  QFETCH(int, dp);
  QFETCH(int, cores);
  QFETCH(double, memory_gib);
  QFETCH(QString, refusal);
  Plan plan = smallPlan();
  plan.parallel.dp = dp;
  plan.parallel.global_batch = dp;
  const launch::LocalCapacity capacity{cores, memory_gib * 1024 * 1024 * 1024};
  const Status s = launch::check_local_cpu_ranks(plan, "cpu", capacity);
  if (refusal.isEmpty()) {
    QVERIFY2(s.ok(), s.message().c_str());
  } else {
    QVERIFY(!s.ok());
    QVERIFY2(QString::fromStdString(s.message()).contains(refusal), s.message().c_str());
    QVERIFY2(QString::fromStdString(s.message())
                 .endsWith("run fewer, or start them anyway with clusterscope run --oversubscribe"),
             s.message().c_str());
  }
  // The CUDA engine's ranks are the GPUs': not held to the cores.
  QVERIFY(launch::check_local_cpu_ranks(plan, "cuda", capacity).ok());
  const auto per_rank = launch::cpu_rank_memory_bytes(plan);
  QVERIFY(per_rank.ok());
  QVERIFY2(*per_rank > 64e6 && *per_rank < 400e6, std::to_string(*per_rank).c_str());
  if (dp != 4) return;
  // plan_run holds a run to this machine's cores, unless told otherwise.
  Plan many = smallPlan();
  many.parallel.dp = 100000;
  many.parallel.global_batch = 100000;
  auto refused = launch::plan_run(many, options());
  QVERIFY(!refused.ok());
  QVERIFY2(QString::fromStdString(refused.message()).startsWith("100000 ranks of the CPU engine"),
           refused.message().c_str());
  launch::PlanRunOptions anyway = options();
  anyway.oversubscribe = true;
  auto made = launch::plan_run(many, anyway);
  QVERIFY2(made.ok(), made.ok() ? "" : made.message().c_str());
  QCOMPARE(made->spec.ranks, 100000);
}

QTEST_GUILESS_MAIN(TestPlanRun)
#include "tst_plan_run.moc"
