// The planner against numbers other people measured or published: every row
// of tests/data/validation/published-runs.md (sections A-D) and more
// published runs, each with its source. Efficiencies come from the GPU
// presets (set once, with their reasons, in resources/presets/gpus.json);
// nothing here is tuned per row. A row the planner cannot meet stays, marked
// as a known gap with its measured error (QEXPECT_FAIL), never deleted.
// Each row prints "predicted vs published" so the table can be read from the
// test log (ctest --output-on-failure -V).

#include <QtTest>
#include <cmath>

#include "core/presets.h"
#include "planners/collectives.h"
#include "planners/cost_model.h"
#include "planners/estimate.h"
#include "planners/formulas.h"
#include "planners/seed_formulas.h"

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const cs::PresetCatalog& catalog() {
  static const cs::PresetCatalog c = [] {
    auto loaded = cs::PresetCatalog::load(CS_SOURCE_DIR "/resources/presets");
    if (!loaded) qFatal("%s", loaded.message().c_str());
    return std::move(loaded).value();
  }();
  return c;
}

// Korthikanti et al. 2022 ran on Selene: DGX A100 80 GB nodes, 8 x HDR per node.
cs::Cluster selene(int gpus) {
  cs::Cluster c = *catalog().cluster("dgx-a100-64");
  c.nodes = std::max(1, gpus / 8);
  c.name = "selene-" + std::to_string(gpus);
  if (c.nodes == 1) c.inter_node.reset();
  return c;
}

// A Megatron-LM run of Korthikanti et al. 2022 (Table 3 / 5): mixed
// precision with fp32 main gradients, unfused (2022) softmax attention.
cs::Plan megatron_plan(const QString& model, int gpus, int tp, int pp, int dp, int global_batch,
                       int micro_batch, int chunks, bool present_work) {
  cs::Plan p;
  p.cluster = selene(gpus);
  const cs::Workload* w = catalog().find_model(model.toStdString());
  if (!w) qFatal("no model preset %s", qPrintable(model));
  p.workload = *w;
  p.parallel.tp = tp;
  p.parallel.pp = pp;
  p.parallel.dp = dp;
  p.parallel.global_batch = global_batch;
  p.parallel.micro_batch = micro_batch;
  p.parallel.virtual_stages = chunks;
  p.parallel.schedule =
      chunks > 1 ? cs::PipelineSchedule::interleaved : cs::PipelineSchedule::one_f_one_b;
  p.parallel.flash_attention = false;
  p.parallel.sequence_parallel = present_work;
  p.parallel.recompute = present_work ? cs::Recompute::selective : cs::Recompute::full;
  p.precision = cs::PrecisionPlan::for_compute(cs::Precision::bf16);
  p.precision.fp32_main_grad = true;
  return p;
}

cs::plan::Estimate estimate_or_fail(const cs::Plan& plan) {
  auto e = cs::plan::estimate(plan);
  if (!e) qFatal("estimate failed: %s", e.message().c_str());
  return std::move(e).value();
}

// Relative error, printed as a table row.
double report(const QString& what, double predicted, double published, const QString& unit,
              const QString& source) {
  const double error = predicted / published - 1;
  qInfo("%-44s predicted %12.5g %-5s published %12.5g  error %+6.1f %%  [%s]", qPrintable(what),
        predicted, qPrintable(unit), published, error * 100, qPrintable(source));
  return error;
}

const char* kTable5 = "Korthikanti et al. 2022, Table 5";
const char* kWeakScaling = "Narayanan et al. 2021, Table 1";
const char* kZero3Table = "Narayanan et al. 2021, Table 2";

// Narayanan et al. 2021, Eq. 3: the FLOPs a step executes with full
// activation recomputation (the forward pass twice, the LM head once), by
// which their Tables 1 and 2 count teraFLOP/s per GPU:
// 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
double narayanan_flops(double b, double s, double l, double h, double v) {
  return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

}  // namespace

class TestPlannerAccuracy : public QObject {
  Q_OBJECT

 private slots:
  void stepTime_data();
  void stepTime();
  void utilisation_data();
  void utilisation();
  void weakScaling_data();
  void weakScaling();
  void zero3AgainstPipelines_data();
  void zero3AgainstPipelines();
  void layerTimes_data();
  void layerTimes();
  void memory_data();
  void memory();
  void activationShares_data();
  void activationShares();
  void activationFormulas_data();
  void activationFormulas();
  void fp8KeepsTheGemmInputsInOneByte_data();
  void fp8KeepsTheGemmInputsInOneByte();
  void zeroModelState_data();
  void zeroModelState();
  void megatronModelState();
  void pipelineBubble_data();
  void pipelineBubble();
  void collectiveBytes_data();
  void collectiveBytes();
  void trainingCompute();
  void modelFlopsPerToken_data();
  void modelFlopsPerToken();
  void seedCommunication_data();
  void seedCommunication();
  void seedQuantisation();
  void seedTrainingFlops();
};

// --- A. Step time, Table 5 (within 10 %), and the 530B run with 8-way data
// parallelism from the same paper's Sec. 6.3.
void TestPlannerAccuracy::stepTime_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<int>("gpus");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("global_batch");
  QTest::addColumn<int>("micro_batch");
  QTest::addColumn<int>("chunks");
  QTest::addColumn<bool>("present_work");  // sequence parallel + selective, else full recompute
  QTest::addColumn<double>("published");   // seconds per iteration
  QTest::addColumn<QString>("source");
  QTest::addColumn<QString>(
      "known_gap");  // why a row misses, with its error; empty when it meets the tolerance

  const QString t5 = kTable5;
  QTest::addRow("22B full") << "megatron-22b" << 8 << 8 << 1 << 1 << 4 << 4 << 1 << false << 1.42
                            << t5 << "";
  QTest::addRow("22B SP+selective")
      << "megatron-22b" << 8 << 8 << 1 << 1 << 4 << 4 << 1 << true << 1.10 << t5 << "";
  QTest::addRow("175B full") << "megatron-175b" << 64 << 8 << 8 << 1 << 64 << 1 << 3 << false
                             << 18.13 << t5 << "";
  QTest::addRow("175B SP+selective")
      << "megatron-175b" << 64 << 8 << 8 << 1 << 64 << 1 << 3 << true << 13.75 << t5 << "";
  QTest::addRow("530B full") << "megatron-530b" << 280 << 8 << 35 << 1 << 280 << 1 << 3 << false
                             << 49.05 << t5 << "";
  QTest::addRow("530B SP+selective")
      << "megatron-530b" << 280 << 8 << 35 << 1 << 280 << 1 << 3 << true << 37.83 << t5 << "";
  QTest::addRow("1T full") << "megatron-1t" << 512 << 8 << 64 << 1 << 512 << 1 << 1 << false
                           << 94.42 << t5 << "";
  QTest::addRow("1T SP+selective")
      << "megatron-1t" << 512 << 8 << 64 << 1 << 512 << 1 << 1 << true << 71.49 << t5 << "";
  // "if we scale the 530B model to 8-way data parallelism (2240 GPUs) while
  // keeping batch size per model instance constant ... the time per
  // iteration increases slightly from 37.83 seconds to 39.15 seconds";
  // their gradient all-reduce did not overlap backward, the planner's does.
  QTest::addRow("530B SP+selective, dp 8 on 2240 GPUs")
      << "megatron-530b" << 2240 << 8 << 35 << 8 << 2240 << 1 << 3 << true << 39.15
      << "Korthikanti et al. 2022, Sec. 6.3"
      << "";
}

void TestPlannerAccuracy::stepTime() {
  QFETCH(QString, model);
  QFETCH(int, gpus);
  QFETCH(int, tp);
  QFETCH(int, pp);
  QFETCH(int, dp);
  QFETCH(int, global_batch);
  QFETCH(int, micro_batch);
  QFETCH(int, chunks);
  QFETCH(bool, present_work);
  QFETCH(double, published);
  QFETCH(QString, source);
  QFETCH(QString, known_gap);
  const cs::Plan plan =
      megatron_plan(model, gpus, tp, pp, dp, global_batch, micro_batch, chunks, present_work);
  const cs::plan::Estimate e = estimate_or_fail(plan);
  QVERIFY(e.fits);
  const double error =
      report(QString(QTest::currentDataTag()) + " step", e.time.step(), published, "s", source);
  if (!known_gap.isEmpty()) QEXPECT_FAIL("", qPrintable(known_gap), Continue);
  QVERIFY2(std::fabs(error) <= 0.10, qPrintable(QString("error %1 %").arg(error * 100, 0, 'f', 1)));
}

// MFU and HFU of the Table 5 "present work" rows: the model and hardware
// FLOPs per step over the predicted step time and the A100's 312 TFLOP/s.
void TestPlannerAccuracy::utilisation_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<int>("gpus");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("global_batch");
  QTest::addColumn<int>("micro_batch");
  QTest::addColumn<int>("chunks");
  QTest::addColumn<double>("mfu");
  QTest::addColumn<double>("hfu");
  QTest::addRow("22B") << "megatron-22b" << 8 << 1 << 4 << 4 << 1 << 0.415 << 0.437;
  QTest::addRow("175B") << "megatron-175b" << 64 << 8 << 64 << 1 << 3 << 0.514 << 0.528;
  QTest::addRow("530B") << "megatron-530b" << 280 << 35 << 280 << 1 << 3 << 0.560 << 0.570;
  QTest::addRow("1T") << "megatron-1t" << 512 << 64 << 512 << 1 << 1 << 0.563 << 0.570;
}

void TestPlannerAccuracy::utilisation() {
  QFETCH(QString, model);
  QFETCH(int, gpus);
  QFETCH(int, pp);
  QFETCH(int, global_batch);
  QFETCH(int, micro_batch);
  QFETCH(int, chunks);
  QFETCH(double, mfu);
  QFETCH(double, hfu);
  const cs::Plan plan =
      megatron_plan(model, gpus, 8, pp, 1, global_batch, micro_batch, chunks, true);
  const cs::plan::Estimate e = estimate_or_fail(plan);
  // The model FLOPs are the paper's formula exactly (72 B s L h^2 (1 + s/6h + V/12Lh)).
  const cs::TransformerShape& s = plan.workload.transformer;
  const double formula =
      cs::plan::megatron_model_flops(global_batch, s.seq_len, s.layers, s.hidden, s.vocab);
  QCOMPARE(e.throughput.model_flops_per_step / formula, 1.0);
  const double mfu_error =
      report(QString(QTest::currentDataTag()) + " MFU", e.throughput.mfu, mfu, "", kTable5);
  const double hfu_error =
      report(QString(QTest::currentDataTag()) + " HFU", e.throughput.hfu, hfu, "", kTable5);
  QVERIFY(std::fabs(mfu_error) <= 0.10);
  QVERIFY(std::fabs(hfu_error) <= 0.10);
}

// Narayanan et al. 2021, Table 1: GPT models from 1.7B to 1T parameters on
// up to 3072 A100s of Selene (s = 2048, V = 51200, fp16, full activation
// recomputation), teraFLOP/s per GPU by Eq. 3. The table gives no
// micro-batch or interleaving: one sequence a micro-batch, 1F1B. Megatron
// of 2021 fused no attention.
void TestPlannerAccuracy::weakScaling_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<int>("gpus");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("global_batch");
  QTest::addColumn<double>("tflops");  // achieved per GPU
  QTest::addRow("1.7B") << "megatron-1.7b" << 32 << 1 << 1 << 512 << 137.0;
  QTest::addRow("3.6B") << "megatron-3.6b" << 64 << 2 << 1 << 512 << 138.0;
  QTest::addRow("7.5B") << "megatron-7.5b" << 128 << 4 << 1 << 512 << 142.0;
  QTest::addRow("18.4B") << "megatron-18.4b" << 256 << 8 << 1 << 1024 << 135.0;
  QTest::addRow("39.1B") << "megatron-39.1b" << 512 << 8 << 2 << 1536 << 138.0;
  QTest::addRow("76.1B") << "megatron-76.1b" << 1024 << 8 << 4 << 1792 << 140.0;
  QTest::addRow("145.6B") << "megatron-145.6b" << 1536 << 8 << 8 << 2304 << 148.0;
  QTest::addRow("310.1B") << "megatron-310.1b" << 1920 << 8 << 16 << 2160 << 155.0;
  QTest::addRow("529.6B") << "megatron-530b" << 2520 << 8 << 35 << 2520 << 163.0;
  QTest::addRow("1008.0B") << "megatron-1t" << 3072 << 8 << 64 << 3072 << 163.0;
}

void TestPlannerAccuracy::weakScaling() {
  QFETCH(QString, model);
  QFETCH(int, gpus);
  QFETCH(int, tp);
  QFETCH(int, pp);
  QFETCH(int, global_batch);
  QFETCH(double, tflops);
  const int dp = gpus / (tp * pp);
  cs::Plan plan = megatron_plan(model, gpus, tp, pp, dp, global_batch, 1, 1, false);
  plan.precision = cs::PrecisionPlan::for_compute(cs::Precision::fp16);
  plan.precision.fp32_main_grad = true;
  const cs::plan::Estimate e = estimate_or_fail(plan);
  QVERIFY(e.fits);
  // What the planner executes is their Eq. 3 exactly.
  const cs::TransformerShape& s = plan.workload.transformer;
  QCOMPARE(e.throughput.hardware_flops_per_step /
               narayanan_flops(global_batch, s.seq_len, s.layers, s.hidden, s.vocab),
           1.0);
  const double error = report(QString(QTest::currentDataTag()) + " TFLOP/s per GPU",
                              e.throughput.hardware_tflops_per_gpu, tflops, "", kWeakScaling);
  QVERIFY2(std::fabs(error) <= 0.10, qPrintable(QString("error %1 %").arg(error * 100, 0, 'f', 1)));
}

// Narayanan et al. 2021, Table 2: GPT-3 175B at a global batch of 1536 on
// 384 to 1536 A100s, ZeRO-3 without model parallelism (DeepSpeed, fp16,
// activation recomputation) against PTD-P (tp 8 x pp 12). PTD-P holds; the
// ZeRO-3 rows are a known gap: the planner gathers and reduce-scatters as
// NCCL's hierarchical collectives do (a node's share of the weights over its
// eight NICs), hidden behind compute but for one group, and so finds the
// step compute-bound (216 to 199 TFLOP/s); DeepSpeed's ZeRO-3 of 2021 ran
// communication-bound at about 66 s a step whatever the micro-batch (the
// three rows hold one micro-batch a replica), its collectives at about one
// NIC's rate a GPU, and fell from 144 to 44 TFLOP/s.
void TestPlannerAccuracy::zero3AgainstPipelines_data() {
  QTest::addColumn<int>("gpus");
  QTest::addColumn<bool>("zero3");  // else PTD-P: tp 8, pp 12
  QTest::addColumn<int>("micro_batch");
  QTest::addColumn<double>("tflops");
  QTest::addColumn<QString>("known_gap");
  QTest::addRow("ZeRO-3, 384 GPUs")
      << 384 << true << 4 << 144.0
      << "ZeRO-3's collectives as NCCL runs them, hidden: +50 % (DeepSpeed 2021 ran slower)";
  QTest::addRow("ZeRO-3, 768 GPUs")
      << 768 << true << 2 << 88.0
      << "ZeRO-3's collectives as NCCL runs them, hidden: +139 % (DeepSpeed 2021 ran slower)";
  QTest::addRow("ZeRO-3, 1536 GPUs")
      << 1536 << true << 1 << 44.0
      << "ZeRO-3's collectives as NCCL runs them, hidden: +352 % (DeepSpeed 2021 ran slower)";
  QTest::addRow("PTD-P, 384 GPUs") << 384 << false << 1 << 153.0 << "";
  QTest::addRow("PTD-P, 768 GPUs") << 768 << false << 1 << 149.0 << "";
  QTest::addRow("PTD-P, 1536 GPUs") << 1536 << false << 1 << 141.0 << "";
}

void TestPlannerAccuracy::zero3AgainstPipelines() {
  QFETCH(int, gpus);
  QFETCH(bool, zero3);
  QFETCH(int, micro_batch);
  QFETCH(double, tflops);
  QFETCH(QString, known_gap);
  const int tp = zero3 ? 1 : 8, pp = zero3 ? 1 : 12;
  cs::Plan plan =
      megatron_plan("megatron-175b", gpus, tp, pp, gpus / (tp * pp), 1536, micro_batch, 1, false);
  plan.precision = cs::PrecisionPlan::for_compute(cs::Precision::fp16);
  plan.precision.fp32_main_grad = !zero3;  // DeepSpeed keeps fp16 gradients
  if (zero3) plan.parallel.zero_stage = 3;
  const cs::plan::Estimate e = estimate_or_fail(plan);
  QVERIFY(e.fits);
  const double error = report(QString(QTest::currentDataTag()) + " TFLOP/s per GPU",
                              e.throughput.hardware_tflops_per_gpu, tflops, "", kZero3Table);
  if (!known_gap.isEmpty()) QEXPECT_FAIL("", qPrintable(known_gap), Continue);
  QVERIFY2(std::fabs(error) <= 0.10, qPrintable(QString("error %1 %").arg(error * 100, 0, 'f', 1)));
}

// The model FLOPs of one token of any shape (what the workload panel shows)
// are the planner's model FLOPs of a step divided by its tokens; for a GPT
// shape they are Korthikanti et al.'s formula. The panel used that formula
// for every shape: LLaMA-2 70B read 841 ZFLOP over its 2T tokens, not 889.
void TestPlannerAccuracy::modelFlopsPerToken_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<double>("gflop_per_token");  // by hand from the shape, 3 x forward
  QTest::addRow("GPT-3 175B") << "megatron-175b" << 1076.443;
  QTest::addRow("LLaMA-2 7B") << "llama2-7b" << 46.085;
  QTest::addRow("LLaMA-2 70B (grouped-query)") << "llama2-70b" << 444.491;
  QTest::addRow("LLaMA-3 8B (grouped-query)") << "llama3-8b" << 57.913;
}

void TestPlannerAccuracy::modelFlopsPerToken() {
  QFETCH(QString, model);
  QFETCH(double, gflop_per_token);
  const cs::Plan plan = megatron_plan(model, 8, 8, 1, 1, 8, 1, 1, true);
  const cs::TransformerShape& s = plan.workload.transformer;
  const double per_token = cs::plan::model_flops_per_token(s);
  QVERIFY2(std::fabs(per_token / 1e9 / gflop_per_token - 1) < 1e-4,
           qPrintable(QString::number(per_token / 1e9, 'f', 3)));
  const cs::plan::Estimate e = estimate_or_fail(plan);
  const double tokens = double(plan.parallel.global_batch) * s.seq_len;
  QVERIFY(std::fabs(e.throughput.model_flops_per_step / tokens / per_token - 1) < 1e-12);
  const bool gpt_shape = s.kv_heads == s.heads && s.ffn_hidden == 4 * s.hidden && !s.gated_mlp;
  if (gpt_shape) {
    const double formula =
        cs::plan::megatron_model_flops(1, s.seq_len, s.layers, s.hidden, s.vocab);
    QVERIFY(std::fabs(per_token * s.seq_len / formula - 1) < 1e-12);
  }
}

// One 22B layer (TP 8, micro-batch 4) on a DGX A100, forward and backward:
// Korthikanti et al. 2022, Table 4. The A100's gemm_max was set from these
// (see its preset's source); the end-to-end rows above are the check.
void TestPlannerAccuracy::layerTimes_data() {
  QTest::addColumn<bool>("sequence_parallel");
  QTest::addColumn<int>("recompute");
  QTest::addColumn<double>("forward_ms");
  QTest::addColumn<double>("backward_ms");
  QTest::addRow("baseline, no recompute") << false << int(cs::Recompute::none) << 7.7 << 11.9;
  QTest::addRow("sequence parallelism") << true << int(cs::Recompute::none) << 7.2 << 11.8;
  QTest::addRow("baseline with recompute") << false << int(cs::Recompute::full) << 7.7 << 19.5;
  QTest::addRow("selective recompute") << false << int(cs::Recompute::selective) << 7.7 << 13.2;
  QTest::addRow("selective + sequence") << true << int(cs::Recompute::selective) << 7.2 << 13.1;
}

void TestPlannerAccuracy::layerTimes() {
  QFETCH(bool, sequence_parallel);
  QFETCH(int, recompute);
  QFETCH(double, forward_ms);
  QFETCH(double, backward_ms);
  cs::Plan plan = megatron_plan("megatron-22b", 8, 8, 1, 1, 4, 4, 1, sequence_parallel);
  plan.parallel.recompute = static_cast<cs::Recompute>(recompute);
  const auto m = cs::plan::detail::machine_of(plan.cluster);
  const auto x = cs::plan::detail::model_of(plan.workload);
  const auto k = cs::plan::detail::knobs_of(plan.parallel, plan.precision);
  const auto costs = cs::plan::detail::layer_costs(m, x, k);
  const auto layer = cs::plan::detail::chunk_cost(x, k, costs, 1, false, false);
  const double forward = (layer.forward + layer.tp_forward) * 1e3;
  const double backward = (layer.backward + layer.recompute + layer.tp_backward) * 1e3;
  const QString source = "Korthikanti et al. 2022, Table 4";
  const QString tag = QTest::currentDataTag();
  QVERIFY(std::fabs(report(tag + " forward", forward, forward_ms, "ms", source)) <= 0.10);
  QVERIFY(std::fabs(report(tag + " backward", backward, backward_ms, "ms", source)) <= 0.10);
}

// --- B. Memory per GPU (GiB), Figure 1 of the paper: weights + gradients +
// optimizer state of the transformer layers (18 bytes per parameter with
// Megatron's fp32 main gradient; the paper leaves the embedding out), and
// activations of the first stage for "none" (tensor parallelism alone) and
// "SP + selective" (within 10 %).
void TestPlannerAccuracy::memory_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<int>("gpus");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("global_batch");
  QTest::addColumn<int>("micro_batch");
  QTest::addColumn<int>("chunks");
  QTest::addColumn<double>("model_state_gib");
  QTest::addColumn<double>("activations_none_gib");
  QTest::addColumn<double>("activations_sp_selective_gib");
  QTest::addRow("22B") << "megatron-22b" << 8 << 1 << 4 << 4 << 1 << 45.6 << 59.25 << 9.56;
  QTest::addRow("175B") << "megatron-175b" << 64 << 8 << 64 << 1 << 3 << 45.6 << 66.84 << 12.35;
  QTest::addRow("530B") << "megatron-530b" << 280 << 35 << 280 << 1 << 3 << 31.6 << 114.0 << 23.08;
  QTest::addRow("1T") << "megatron-1t" << 512 << 64 << 512 << 1 << 1 << 33.0 << 131.25 << 26.56;
}

void TestPlannerAccuracy::memory() {
  QFETCH(QString, model);
  QFETCH(int, gpus);
  QFETCH(int, pp);
  QFETCH(int, global_batch);
  QFETCH(int, micro_batch);
  QFETCH(int, chunks);
  QFETCH(double, model_state_gib);
  QFETCH(double, activations_none_gib);
  QFETCH(double, activations_sp_selective_gib);
  const QString source = "Korthikanti et al. 2022, Figure 1";
  const QString tag = QTest::currentDataTag();

  cs::Plan none = megatron_plan(model, gpus, 8, pp, 1, global_batch, micro_batch, chunks, false);
  none.parallel.recompute = cs::Recompute::none;
  const cs::plan::Estimate e_none = estimate_or_fail(none);
  const cs::plan::MemoryBreakdown& first = e_none.first_stage;
  const double layers_state = (first.model_state() - first.embedding_model_state) / kGiB;
  const double act_none = (first.activations - first.embedding_activations) / kGiB;
  QVERIFY(std::fabs(report(tag + " weights+grads+optimizer", layers_state, model_state_gib, "GiB",
                           source)) <= 0.10);
  QVERIFY(std::fabs(report(tag + " activations, none", act_none, activations_none_gib, "GiB",
                           source)) <= 0.10);

  const cs::Plan present =
      megatron_plan(model, gpus, 8, pp, 1, global_batch, micro_batch, chunks, true);
  const cs::plan::Estimate e = estimate_or_fail(present);
  const double act = (e.first_stage.activations - e.first_stage.embedding_activations) / kGiB;
  QVERIFY(std::fabs(report(tag + " activations, SP + selective", act, activations_sp_selective_gib,
                           "GiB", source)) <= 0.10);
  // The embedding (first stage) adds to what the figure shows, never takes away.
  QVERIFY(first.model_state() >= first.model_state() - first.embedding_model_state);
  QVERIFY(first.embedding_model_state > 0);
}

// Activations as a percentage of "none" (Figure 7): sequence parallel /
// selective / both / full recompute.
void TestPlannerAccuracy::activationShares_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<bool>("sequence_parallel");
  QTest::addColumn<int>("recompute");
  QTest::addColumn<double>("percent");
  struct Row {
    const char* model;
    double sp, sel, both, full;
  };
  const Row rows[] = {{"megatron-22b", 66.8, 49.4, 16.2, 7.6},
                      {"megatron-175b", 62.0, 56.5, 18.5, 8.7},
                      {"megatron-530b", 58.3, 62.0, 20.3, 9.4},
                      {"megatron-1t", 58.3, 62.0, 20.3, 9.4}};
  for (const Row& r : rows) {
    QTest::addRow("%s sequence parallel", r.model)
        << r.model << true << int(cs::Recompute::none) << r.sp;
    QTest::addRow("%s selective", r.model)
        << r.model << false << int(cs::Recompute::selective) << r.sel;
    QTest::addRow("%s both", r.model) << r.model << true << int(cs::Recompute::selective) << r.both;
    QTest::addRow("%s full recompute", r.model)
        << r.model << false << int(cs::Recompute::full) << r.full;
  }
}

void TestPlannerAccuracy::activationShares() {
  QFETCH(QString, model);
  QFETCH(bool, sequence_parallel);
  QFETCH(int, recompute);
  QFETCH(double, percent);
  const cs::TransformerShape& s = catalog().find_model(model.toStdString())->transformer;
  const int micro_batch = model == "megatron-22b" ? 4 : 1;
  const cs::plan::LayerShape shape{double(s.seq_len), double(micro_batch), double(s.hidden),
                                   double(s.heads),   double(s.kv_heads),  double(s.ffn_hidden),
                                   s.gated_mlp};
  const double none =
      cs::plan::activation_bytes_per_layer(shape, 8, false, cs::Recompute::none, false);
  const double this_one = cs::plan::activation_bytes_per_layer(
      shape, 8, sequence_parallel, static_cast<cs::Recompute>(recompute), false);
  const double predicted = 100 * this_one / none;
  const double error = report(QString(QTest::currentDataTag()) + " % of none", predicted, percent,
                              "%", "Korthikanti et al. 2022, Figure 7");
  // Within 10 %. The figure's 9.4 % for full recomputation of the 530B and
  // 1T models is 1.3 % below Table 2's own 2sbh / sbh(10 + 24/t + 5as/ht) = 2/21.
  QVERIFY(std::fabs(error) <= 0.10);
}

// Table 2 of the paper, formula by formula, exactly.
void TestPlannerAccuracy::activationFormulas_data() {
  QTest::addColumn<int>("tp");
  QTest::addColumn<bool>("sequence_parallel");
  QTest::addColumn<int>("recompute");
  QTest::addColumn<QString>("formula");
  QTest::addRow("no parallelism") << 1 << false << int(cs::Recompute::none) << "sbh(34 + 5as/h)";
  QTest::addRow("tensor parallel")
      << 8 << false << int(cs::Recompute::none) << "sbh(10 + 24/t + 5as/(ht))";
  QTest::addRow("tensor + sequence parallel")
      << 8 << true << int(cs::Recompute::none) << "(sbh/t)(34 + 5as/h)";
  QTest::addRow("tensor parallel + selective")
      << 8 << false << int(cs::Recompute::selective) << "sbh(10 + 24/t)";
  QTest::addRow("tensor + sequence + selective")
      << 8 << true << int(cs::Recompute::selective) << "34sbh/t";
  QTest::addRow("full recompute") << 8 << false << int(cs::Recompute::full) << "2sbh";
  // A model trained without dropout (LLaMA) keeps no masks (1 byte an
  // element: 2sbh a layer) and of the scores only the softmax output (2as^2b
  // of 5as^2b): the paper's terms less those.
  QTest::addRow("no parallelism, no dropout")
      << 1 << false << int(cs::Recompute::none) << "sbh(32 + 2as/h)";
  QTest::addRow("tensor parallel, no dropout")
      << 8 << false << int(cs::Recompute::none) << "sbh(8 + 24/t + 2as/(ht))";
  QTest::addRow("tensor + sequence + selective, no dropout")
      << 8 << true << int(cs::Recompute::selective) << "32sbh/t";
  QTest::addRow("full recompute, no dropout") << 8 << false << int(cs::Recompute::full) << "2sbh";
}

void TestPlannerAccuracy::fp8KeepsTheGemmInputsInOneByte_data() {
  QTest::addColumn<bool>("flash");
  QTest::addColumn<bool>("gated");
  QTest::addColumn<double>("per_sbh");  // bytes per s*b*h, tp 1, dropout, no scores
  // 34 at 16 bits: less one byte for each of the QKV, MLP and FC2 inputs
  // (4 of h wide: 1 + 1 + 4); fused attention's output stays in 16 bits
  // for its own backward, beside its FP8 copy (+1).
  QTest::addRow("fused attention, GeLU") << true << false << 34.0 - 6 + 1;
  // Unfused: the projection reads only its FP8 copy (-1).
  QTest::addRow("unfused attention, GeLU") << false << false << 34.0 - 6 - 1;
  // SwiGLU of ffn 4h: gate and up in 16 bits, the product one byte.
  QTest::addRow("fused attention, SwiGLU")
      << true << true << 2.0 * 2 + 2 * 1 + 2 + 4 + 2 + 3 + (2 * 2 + 1) * 4;
}

// FP8 training (Transformer Engine) keeps the inputs of the four GEMMs as
// their FP8 copies: the planner counted them in 16 bits, 17 % more
// activations than a Megatron-LM FP8 run holds.
void TestPlannerAccuracy::fp8KeepsTheGemmInputsInOneByte() {
  QFETCH(bool, flash);
  QFETCH(bool, gated);
  QFETCH(double, per_sbh);
  const double s = 2048, b = 1, h = 4096, a = 32;
  const cs::plan::LayerShape shape{s, b, h, a, a, 4 * h, gated, true};
  const double got =
      cs::plan::activation_bytes_per_layer(shape, 1, false, cs::Recompute::selective, flash, 2, 1);
  const double scores = flash ? 4 * a * s * b : 0;  // fused attention's log-sum-exp
  QCOMPARE(got, s * b * h * per_sbh + scores);
  // In 16 bits, as before: 34sbh.
  if (!gated) {
    QCOMPARE(
        cs::plan::activation_bytes_per_layer(shape, 1, false, cs::Recompute::selective, flash, 2),
        34 * s * b * h + scores);
  }
}

void TestPlannerAccuracy::activationFormulas() {
  QFETCH(int, tp);
  QFETCH(bool, sequence_parallel);
  QFETCH(int, recompute);
  QFETCH(QString, formula);
  const double s = 2048, b = 4, h = 6144, a = 64, t = tp;
  const bool dropout = !QString(QTest::currentDataTag()).endsWith("no dropout");
  const cs::plan::LayerShape shape{s, b, h, a, a, 4 * h, false, dropout};
  const double got = cs::plan::activation_bytes_per_layer(
      shape, tp, sequence_parallel, static_cast<cs::Recompute>(recompute), false);
  double expected = 0;
  if (formula == "sbh(34 + 5as/h)") expected = s * b * h * (34 + 5 * a * s / h);
  if (formula == "sbh(10 + 24/t + 5as/(ht))")
    expected = s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  if (formula == "(sbh/t)(34 + 5as/h)") expected = s * b * h / t * (34 + 5 * a * s / h);
  if (formula == "sbh(10 + 24/t)") expected = s * b * h * (10 + 24 / t);
  if (formula == "34sbh/t") expected = 34 * s * b * h / t;
  if (formula == "2sbh") expected = 2 * s * b * h;
  if (formula == "sbh(32 + 2as/h)") expected = s * b * h * (32 + 2 * a * s / h);
  if (formula == "sbh(8 + 24/t + 2as/(ht))")
    expected = s * b * h * (8 + 24 / t + 2 * a * s / (h * t));
  if (formula == "32sbh/t") expected = 32 * s * b * h / t;
  QVERIFY2(expected > 0, qPrintable(formula));
  QCOMPARE(got, expected);
}

// --- C. ZeRO (Rajbhandari et al. 2020, Figure 1): 7.5B parameters on 64
// GPUs: 120 / 31.4 / 16.6 / 1.9 GB per GPU, from the formula and from an
// estimate of a 7.5B-parameter model trained data-parallel with mixed Adam.
void TestPlannerAccuracy::zeroModelState_data() {
  QTest::addColumn<int>("stage");
  QTest::addColumn<double>("gigabytes");
  QTest::addRow("baseline") << 0 << 120.0;
  QTest::addRow("ZeRO-1 (Pos)") << 1 << 31.4;
  QTest::addRow("ZeRO-2 (Pos+g)") << 2 << 16.6;
  QTest::addRow("ZeRO-3 (Pos+g+p)") << 3 << 1.9;
}

void TestPlannerAccuracy::zeroModelState() {
  QFETCH(int, stage);
  QFETCH(double, gigabytes);
  const double psi = 7.5e9;
  const double formula = cs::plan::zero_model_state_bytes(psi, 64, stage) / 1e9;
  QCOMPARE(std::round(formula * 10) / 10, gigabytes);

  cs::Plan plan;
  plan.cluster = *catalog().cluster("dgx-a100-64");
  plan.workload.name = "dense-7.5b";
  plan.workload.kind = cs::WorkloadKind::generic;
  plan.workload.generic.parameters = psi;
  plan.workload.generic.forward_flops_per_sample = 2 * psi * 1024;
  plan.workload.optimizer = cs::Optimizer::adam;
  plan.parallel.dp = 64;
  plan.parallel.global_batch = 64;
  plan.parallel.zero_stage = stage;
  plan.precision = cs::PrecisionPlan::for_compute(cs::Precision::fp16);
  const cs::plan::Estimate e = estimate_or_fail(plan);
  report(QString("ZeRO paper, 7.5B on 64 GPUs, ") + QTest::currentDataTag(),
         e.memory.model_state() / 1e9, gigabytes, "GB", "Rajbhandari et al. 2020, Figure 1");
  QCOMPARE(std::round(e.memory.model_state() / 1e8) / 10, gigabytes);
}

// Megatron-LM's fp32 main gradient: 18 bytes per parameter, or 6 + 12/DP
// with the distributed optimizer (ZeRO-1).
void TestPlannerAccuracy::megatronModelState() {
  QCOMPARE(cs::plan::megatron_model_state_bytes(1.0, 8, false), 18.0);
  QCOMPARE(cs::plan::megatron_model_state_bytes(1.0, 8, true), 6.0 + 12.0 / 8);
  cs::Plan plan;
  plan.cluster = *catalog().cluster("dgx-a100-64");
  plan.workload.name = "one-billion";
  plan.workload.kind = cs::WorkloadKind::generic;
  plan.workload.generic.parameters = 1e9;
  plan.workload.generic.forward_flops_per_sample = 1e12;
  plan.parallel.dp = 16;
  plan.parallel.global_batch = 16;
  plan.precision = cs::PrecisionPlan::for_compute(cs::Precision::bf16);
  plan.precision.fp32_main_grad = true;
  QCOMPARE(estimate_or_fail(plan).memory.model_state(), 18e9);
  plan.parallel.zero_stage = 1;
  QCOMPARE(estimate_or_fail(plan).memory.model_state(), 6e9 + 12e9 / 16);
}

// Pipeline bubble (Narayanan et al. 2021): (p-1)/m, interleaved (p-1)/(v m).
void TestPlannerAccuracy::pipelineBubble_data() {
  QTest::addColumn<int>("stages");
  QTest::addColumn<int>("micro_batches");
  QTest::addColumn<int>("chunks");
  QTest::addColumn<double>("fraction");
  QTest::addRow("1F1B p8 m64") << 8 << 64 << 1 << 7.0 / 64;
  QTest::addRow("interleaved p8 m64 v3") << 8 << 64 << 3 << 7.0 / (3 * 64);
  QTest::addRow("1F1B p64 m512") << 64 << 512 << 1 << 63.0 / 512;
  QTest::addRow("no pipeline") << 1 << 16 << 1 << 0.0;
}

void TestPlannerAccuracy::pipelineBubble() {
  QFETCH(int, stages);
  QFETCH(int, micro_batches);
  QFETCH(int, chunks);
  QFETCH(double, fraction);
  QCOMPARE(cs::plan::pipeline_bubble_fraction(stages, micro_batches, chunks), fraction);
  if (stages == 8) {
    const cs::Plan plan =
        megatron_plan("megatron-175b", 64, 8, 8, 1, micro_batches, 1, chunks, true);
    QCOMPARE(estimate_or_fail(plan).bubble_fraction, fraction);
  }
}

// nccl-tests doc/PERFORMANCE.md: bytes each rank moves and bus-bandwidth factors.
void TestPlannerAccuracy::collectiveBytes_data() {
  QTest::addColumn<int>("op");
  QTest::addColumn<int>("ranks");
  QTest::addColumn<double>("factor");
  QTest::addRow("all-reduce 8") << int(cs::trace::Collective::all_reduce) << 8 << 2.0 * 7 / 8;
  QTest::addRow("all-reduce 2") << int(cs::trace::Collective::all_reduce) << 2 << 1.0;
  QTest::addRow("all-gather 8") << int(cs::trace::Collective::all_gather) << 8 << 7.0 / 8;
  QTest::addRow("reduce-scatter 64")
      << int(cs::trace::Collective::reduce_scatter) << 64 << 63.0 / 64;
  QTest::addRow("broadcast 8") << int(cs::trace::Collective::broadcast) << 8 << 1.0;
  QTest::addRow("all-to-all 4") << int(cs::trace::Collective::all_to_all) << 4 << 3.0 / 4;
  QTest::addRow("one rank") << int(cs::trace::Collective::all_reduce) << 1 << 0.0;
  // busbw's convention gives broadcast 1 on one rank; a rank alone moves nothing.
  QTest::addRow("broadcast, one rank") << int(cs::trace::Collective::broadcast) << 1 << 0.0;
  // Not a group collective: the planner gives it no cost.
  QTest::addRow("send") << int(cs::trace::Collective::send) << 2 << 0.0;
}

void TestPlannerAccuracy::collectiveBytes() {
  QFETCH(int, op);
  QFETCH(int, ranks);
  QFETCH(double, factor);
  const auto o = static_cast<cs::trace::Collective>(op);
  // One table of factors (core's): the bytes moved are busbw's factor past one rank.
  if (ranks > 1 && cs::trace::is_group_collective(o))
    QCOMPARE(cs::trace::bus_bandwidth_factor(o, ranks), factor);
  QCOMPARE(cs::plan::bytes_per_rank(o, ranks, 1e9), factor * 1e9);
  // busbw = algbw x factor: a ring at bandwidth B with no latency reaches busbw = B.
  if (ranks > 1 && factor > 0) {
    const cs::plan::Tier tier{100e9, 1.0, 0.0};
    const double seconds = cs::plan::ring_seconds(o, ranks, 1e9, tier);
    QCOMPARE(1e9 / seconds * factor, 100e9);
  }
}

// C = 6 P D: GPT-3 175B on 300B tokens is about 3.14e23 FLOPs.
void TestPlannerAccuracy::trainingCompute() {
  cs::Plan plan;
  plan.cluster = *catalog().cluster("dgx-a100-1024");
  plan.workload = *catalog().find_model("gpt3-175b");
  plan.parallel.tp = 8;
  plan.parallel.pp = 8;
  plan.parallel.dp = 16;
  plan.parallel.global_batch = 1536;
  const cs::plan::Estimate e = estimate_or_fail(plan);
  report("GPT-3 175B, 300B tokens, 6PD", e.training.flops_6pd, 3.14e23, "FLOP",
         "published-runs.md, C");
  QCOMPARE(QString::number(e.training.flops_6pd, 'g', 3), QString("3.14e+23"));
  // The per-step model FLOPs over the run agree with 6PD to the attention and head terms.
  QVERIFY(std::fabs(e.training.flops / e.training.flops_6pd - 1) < 0.05);
}

// --- D. The seed articles' own examples.
void TestPlannerAccuracy::seedCommunication_data() {
  QTest::addColumn<double>("bandwidth");
  QTest::addColumn<double>("article_seconds");
  QTest::addColumn<int>("decimals");
  QTest::addRow("10 GB/s") << 10e9 << 0.08 << 2;
  QTest::addRow("1 GB/s") << 1e9 << 0.8 << 1;
}

void TestPlannerAccuracy::seedCommunication() {
  QFETCH(double, bandwidth);
  QFETCH(double, article_seconds);
  QFETCH(int, decimals);
  const double s = 100e6, latency = 0.1e-3;
  const int n = 8;
  const double t = cs::plan::simple_communication_seconds(s, n, bandwidth, latency);
  QCOMPARE(t, s * n / bandwidth + latency * (n - 1));
  const double scale = std::pow(10.0, decimals);
  QCOMPARE(std::round(t * scale) / scale, article_seconds);
  // Beside it, the ring all-reduce moves 2(N-1)/N x S.
  const double ring = cs::plan::ring_all_reduce_seconds(s, n, bandwidth, latency);
  QCOMPARE(ring, 2.0 * (n - 1) / n * s / bandwidth + 2.0 * (n - 1) * latency);
  QVERIFY(ring < t);
  report(QString("seed T = S*N/B + L*(N-1), ") + QTest::currentDataTag(), t, article_seconds, "s",
         "seed article 1");
}

void TestPlannerAccuracy::seedQuantisation() {
  // [-0.5, 0.8]: s = 1.3/255 = 0.005098, z = round(0.5/s) = 98.
  const cs::plan::QuantParams article = cs::plan::article_int8_params(-0.5, 0.8);
  QCOMPARE(std::round(article.scale * 1e6) / 1e6, 0.005098);
  QCOMPARE(article.zero_point, 98);
  // 0.3 maps to round(0.3/s) + z = 59 + 98 = 157: over a signed int8's 127, clamped.
  const cs::plan::Quantized q = cs::plan::quantize(0.3, article);
  QCOMPARE(q.unclamped, std::int64_t{157});
  QVERIFY(q.clamped);
  QCOMPARE(q.q, 127);
  QCOMPARE(q.dequantized, article.scale * (127 - 98));
  QVERIFY(std::fabs(q.error) > 0.15);
  // Unsigned [0, 255] holds it: 157, dequantised s (q - z) = 0.3008.
  const cs::plan::QuantParams u = cs::plan::quant_params(-0.5, 0.8, 8, false);
  const cs::plan::Quantized uq = cs::plan::quantize(0.3, u);
  QCOMPARE(uq.q, 157);
  QVERIFY(!uq.clamped);
  QVERIFY(std::fabs(uq.error) <= u.scale / 2);
  // A signed int8 with its zero point shifted by -128 holds it too: 29.
  const cs::plan::QuantParams sg = cs::plan::quant_params(-0.5, 0.8, 8, true);
  QCOMPARE(sg.zero_point, -30);
  const cs::plan::Quantized sq = cs::plan::quantize(0.3, sg);
  QCOMPARE(sq.q, 29);
  QVERIFY(!sq.clamped);
  QCOMPARE(sq.dequantized, uq.dequantized);
  // The ends of the range come back within half a step.
  for (double x : {-0.5, 0.0, 0.8})
    QVERIFY(std::fabs(cs::plan::quantize(x, u).error) <= u.scale / 2 + 1e-15);
  QCOMPARE(cs::plan::quantize(0.0, u).dequantized, 0.0);
  // A range without 0 is widened to hold it (zeros stay exact), and says so.
  const cs::plan::QuantParams positive = cs::plan::quant_params(0.2, 0.8, 8, false);
  QCOMPARE(positive.min, 0.0);
  QCOMPARE(positive.max, 0.8);
  QCOMPARE(positive.scale, 0.8 / 255);
  QCOMPARE(positive.zero_point, 0);
  QCOMPARE(u.min, -0.5);
  // A value far outside a tiny range saturates: round(x/s) passes any
  // integer, where llround's result was unspecified.
  const cs::plan::QuantParams tiny = cs::plan::quant_params(-1e-300, 0, 8, false);
  const cs::plan::Quantized far = cs::plan::quantize(1.0, tiny);
  QVERIFY(far.clamped);
  QCOMPARE(far.q, tiny.q_max);
  QCOMPARE(far.unclamped, std::int64_t{9'000'000'000'000'000'000});
  QCOMPARE(cs::plan::quantize(-1e300, tiny).q, tiny.q_min);
}

// Total FLOPs = forward x (1 forward + 2 backward) x the samples trained on
// (the article's batch x iterations, where the last batch of an epoch holds
// what is left), for the second article's ResNet-18 on CIFAR-10, batch 256,
// 5 epochs.
void TestPlannerAccuracy::seedTrainingFlops() {
  const cs::Workload* w = catalog().find_model("resnet18-cifar10");
  QVERIFY(w);
  const double iterations = cs::plan::iterations_per_run(50000, 256, 5);
  QCOMPARE(iterations, 196.0 * 5);
  const double flops = cs::plan::training_flops(w->generic.forward_flops_per_sample, 50000 * 5);
  QCOMPARE(flops, w->generic.forward_flops_per_sample * 3 * 50000 * 5);
  // The article's x2 undercounts the total by a third (the backward by half).
  QCOMPARE(flops * 2 / 3, w->generic.forward_flops_per_sample * 2 * 50000 * 5);

  cs::Plan plan;
  plan.cluster = *catalog().cluster("h200-1");
  plan.workload = *w;
  plan.parallel.global_batch = 256;
  plan.parallel.micro_batch = 256;
  plan.precision = cs::PrecisionPlan::for_compute(cs::Precision::fp32);
  const cs::plan::Estimate e = estimate_or_fail(plan);
  QVERIFY(e.fits);
  QCOMPARE(e.training.steps, 980.0);
  QCOMPARE(e.training.flops, flops);
  // 6PD does not describe a convolution (it read 17.5 TFLOP beside 56.3).
  QCOMPARE(e.training.flops_6pd, 0.0);
  report("ResNet-18 CIFAR-10, 5 epochs, training FLOPs", e.training.flops, flops, "FLOP",
         "seed article 2");
}

QTEST_GUILESS_MAIN(TestPlannerAccuracy)
#include "tst_planner_accuracy.moc"
