// The worker's backward pass against finite differences of its forward pass,
// parameter tensor by parameter tensor (every layer: embeddings, layer norms,
// attention, MLP, LM head), and the gradient a pipeline stage sends back.
// Also: the CPU backend's read_on_compute_threads leaves what it reads as it was.

#include <QtTest>
#include <cmath>
#include <random>
#include <vector>

#include "core/plans.h"
#include "profiler/worker/cpu_backend.h"
#include "profiler/worker/gpt_model.h"

using namespace cs::worker;

namespace {

constexpr int kB = 2;
GptConfig tiny() {
  GptConfig c;
  c.vocab = 16;
  c.seq = 6;
  c.layers = 2;
  c.hidden = 16;
  c.heads = 2;
  c.ffn = 32;
  return c;
}

struct Fixture {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  std::unique_ptr<GptModel> model;
  Tensor weights, grads;
  std::vector<std::int32_t> tokens, targets;

  explicit Fixture(ModelParallel mp = {}, cs::Recompute recompute = cs::Recompute::none) {
    model = std::make_unique<GptModel>(*backend, tiny(), mp, DType::f32, kB, 1, nullptr, recompute);
    weights = backend->alloc(model->num_params(), DType::f32, "w");
    grads = backend->alloc(model->num_params(), DType::f32, "g");
    model->initialize(42, weights);
    // Larger than the 0.02 of training so that every path carries signal.
    for (std::int64_t i = 0; i < weights.numel; ++i) weights.as<float>()[i] *= 3.0f;
    model->bind_weights(weights);
    model->bind_gradients(grads);
    std::mt19937 rng(7);
    for (int i = 0; i < kB * tiny().seq; ++i) {
      tokens.push_back(static_cast<std::int32_t>(rng() % tiny().vocab));
      targets.push_back(static_cast<std::int32_t>(rng() % tiny().vocab));
    }
  }
  ~Fixture() {
    backend->release(weights);
    backend->release(grads);
  }
  double loss() { return model->forward(0, tokens.data(), targets.data()); }
};

}  // namespace

class TestWorkerGradients : public QObject {
  Q_OBJECT

 private slots:
  void parameterGradients_data();
  void parameterGradients();
  void stageInputGradient();
  void recomputationGivesTheSameGradients_data();
  void recomputationGivesTheSameGradients();
  void bf16ForwardTracksFp32();
  void readOnComputeThreadsLeavesTensors_data();
  void readOnComputeThreadsLeavesTensors();
};

void TestWorkerGradients::parameterGradients_data() {
  QTest::addColumn<QString>("param");
  Fixture f;
  for (const ParamInfo& p : f.model->params()) QTest::addRow("%s", p.name.c_str()) << QString::fromStdString(p.name);
}

void TestWorkerGradients::parameterGradients() {
  QFETCH(QString, param);
  Fixture f;
  const ParamInfo* info = nullptr;
  for (const ParamInfo& p : f.model->params()) {
    if (p.name == param.toStdString()) info = &p;
  }
  QVERIFY(info);

  f.backend->zero(f.grads);
  f.loss();
  f.model->backward(0, 1.0f, nullptr);

  // Central differences on up to 24 elements spread over the tensor.
  const double eps = 3e-3;
  float* w = f.weights.as<float>() + info->offset;
  const float* g = f.grads.as<float>() + info->offset;
  const std::int64_t n = info->numel();
  const std::int64_t stride = std::max<std::int64_t>(1, n / 24);
  double worst = 0;
  for (std::int64_t i = 0; i < n; i += stride) {
    const float saved = w[i];
    w[i] = static_cast<float>(saved + eps);
    const double up = f.loss();
    w[i] = static_cast<float>(saved - eps);
    const double down = f.loss();
    w[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double error = std::fabs(numeric - g[i]) / (1e-3 + std::fabs(numeric));
    worst = std::max(worst, error);
    QVERIFY2(error < 0.05, qPrintable(QString("%1[%2]: backward %3, finite differences %4")
                                           .arg(param).arg(i).arg(g[i]).arg(numeric)));
  }
  qInfo("%s: worst relative error %.2e", qPrintable(param), worst);
}

// A later pipeline stage: the gradient of its input, which it sends back.
void TestWorkerGradients::stageInputGradient() {
  Fixture f(ModelParallel{1, 0, 2, 1});
  QVERIFY(!f.model->first_stage());
  const std::int64_t n = f.model->stage_input(0).numel;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float* x = f.model->stage_input(0).as<float>();
  for (std::int64_t i = 0; i < n; ++i) x[i] = normal(rng);

  f.backend->zero(f.grads);
  f.loss();
  f.model->backward(0, 1.0f, nullptr);
  std::vector<float> analytic(f.model->input_grad().as<float>(),
                              f.model->input_grad().as<float>() + n);
  const double eps = 3e-3;
  for (std::int64_t i = 0; i < n; i += n / 20) {
    const float saved = x[i];
    x[i] = static_cast<float>(saved + eps);
    const double up = f.loss();
    x[i] = static_cast<float>(saved - eps);
    const double down = f.loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double error = std::fabs(numeric - analytic[i]) / (1e-3 + std::fabs(numeric));
    QVERIFY2(error < 0.05, qPrintable(QString("input[%1]: backward %2, finite differences %3")
                                          .arg(i).arg(analytic[i]).arg(numeric)));
  }
}

void TestWorkerGradients::recomputationGivesTheSameGradients_data() {
  QTest::addColumn<int>("recompute");
  QTest::addColumn<int>("stage");  // of two; -1: no pipeline
  QTest::addRow("selective") << int(cs::Recompute::selective) << -1;
  QTest::addRow("full") << int(cs::Recompute::full) << -1;
  QTest::addRow("full, first of two stages") << int(cs::Recompute::full) << 0;
  QTest::addRow("selective, last of two stages") << int(cs::Recompute::selective) << 1;
  QTest::addRow("full, last of two stages") << int(cs::Recompute::full) << 1;
}

// Recomputation runs the same forward again from what it kept: the loss,
// every parameter's gradient and the gradient sent back are the ones of a
// model that stored its activations, to the bit.
void TestWorkerGradients::recomputationGivesTheSameGradients() {
  QFETCH(int, recompute);
  QFETCH(int, stage);
  const ModelParallel mp = stage < 0 ? ModelParallel{} : ModelParallel{1, 0, 2, stage};
  Fixture stored(mp), recomputed(mp, static_cast<cs::Recompute>(recompute));
  QCOMPARE(recomputed.model->num_params(), stored.model->num_params());
  for (Fixture* f : {&stored, &recomputed}) {
    if (!f->model->first_stage()) {
      std::mt19937 rng(3);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      const Tensor x = f->model->stage_input(0);
      for (std::int64_t i = 0; i < x.numel; ++i)
        x.as<float>()[i] = normal(rng);
    }
    if (!f->model->last_stage()) {
      std::mt19937 rng(5);
      std::normal_distribution<float> normal(0.0f, 0.1f);
      const Tensor d = f->model->output_grad();
      for (std::int64_t i = 0; i < d.numel; ++i)
        d.as<float>()[i] = normal(rng);
    }
    f->backend->zero(f->grads);
  }
  QCOMPARE(recomputed.loss(), stored.loss());
  QVERIFY(recomputed.model->activation_bytes() < stored.model->activation_bytes());
  stored.model->backward(0, 1.0f, nullptr);
  recomputed.model->backward(0, 1.0f, nullptr);
  const auto differs = [](Tensor a, Tensor b) {
    for (std::int64_t i = 0; i < a.numel; ++i) {
      if (a.as<float>()[i] != b.as<float>()[i]) return i;
    }
    return std::int64_t{-1};
  };
  for (const ParamInfo& p : stored.model->params()) {
    const std::int64_t at = differs(stored.grads.slice(p.offset, p.numel()),
                                    recomputed.grads.slice(p.offset, p.numel()));
    QVERIFY2(at < 0, qPrintable(QString("%1[%2]").arg(p.name.c_str()).arg(at)));
  }
  if (!stored.model->first_stage())
    QCOMPARE(differs(stored.model->input_grad(), recomputed.model->input_grad()), std::int64_t{-1});
}

// bf16 storage changes the numbers a little, not the function.
void TestWorkerGradients::bf16ForwardTracksFp32() {
  Fixture f32;
  const double loss32 = f32.loss();
  auto backend = make_cpu_backend(1);
  GptModel model(*backend, tiny(), ModelParallel{}, DType::bf16, kB, 1, nullptr,
                 cs::Recompute::none);
  Tensor master = backend->alloc(model.num_params(), DType::f32, "m");
  Tensor weights = backend->alloc(model.num_params(), DType::bf16, "w");
  backend->download(master.data, f32.weights);  // the same (scaled) weights
  backend->convert(weights, master);
  model.bind_weights(weights);
  const double loss16 = model.forward(0, f32.tokens.data(), f32.targets.data());
  QVERIFY2(std::fabs(loss16 - loss32) < 0.05 * loss32,
           qPrintable(QString("fp32 %1, bf16 %2").arg(loss32).arg(loss16)));
  QVERIFY(loss16 != loss32);  // bf16 really rounds
  backend->release(master);
  backend->release(weights);
}

// The operation sweep has the BLAS threads read a loop's operands before
// timing it: they must come back as they were, whatever their size or type.
void TestWorkerGradients::readOnComputeThreadsLeavesTensors_data() {
  QTest::addColumn<qint64>("numel");
  QTest::addColumn<bool>("bf16");
  QTest::newRow("less than a row") << qint64{100} << false;
  QTest::newRow("one row") << qint64{128} << false;
  QTest::newRow("rows and a remainder") << qint64{128 * 300 + 77} << false;
  QTest::newRow("a million weights") << (qint64{1} << 20) << false;
  QTest::newRow("bf16") << qint64{128 * 64 + 5} << true;
}

void TestWorkerGradients::readOnComputeThreadsLeavesTensors() {
  QFETCH(qint64, numel);
  QFETCH(bool, bf16);
  for (int threads : {1, 2}) {
    auto backend = make_cpu_backend(threads);
    Tensor master = backend->alloc(numel, DType::f32, "values");
    for (std::int64_t i = 0; i < numel; ++i) master.as<float>()[i] = std::sin(0.001f * i) * 3.0f;
    Tensor t = master;
    Tensor narrow;
    if (bf16) {
      narrow = backend->alloc(numel, DType::bf16, "bf16 values");
      backend->convert(narrow, master);
      t = narrow;
    }
    std::vector<unsigned char> before(static_cast<std::size_t>(t.bytes()));
    backend->download(before.data(), t);
    backend->read_on_compute_threads(t);
    backend->read_on_compute_threads(t);  // the scratch it keeps is reused
    std::vector<unsigned char> after(before.size());
    backend->download(after.data(), t);
    QVERIFY2(before == after, qPrintable(QString("%1 BLAS threads").arg(threads)));
    backend->release(master);
    if (bf16) backend->release(narrow);
  }
}

QTEST_GUILESS_MAIN(TestWorkerGradients)
#include "tst_worker_gradients.moc"
