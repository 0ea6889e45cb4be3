// One rank's training loop on the CPU backend, without MPI: dynamic loss
// scaling (an overflowing step is skipped and its scale halved, the scale
// doubles after a clean window, a scaled run trains what an unscaled one
// does) and AdamW's step count, which only applied updates advance.

#include <QtTest>
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "profiler/worker/corpus.h"
#include "profiler/worker/cpu_backend.h"
#include "profiler/worker/trainer.h"

using namespace cs::worker;

namespace {

// The group of one rank: every collective is the identity.
class SoloComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view name() const override { return "solo"; }
  void all_reduce(Tensor) override {}
  void send(Tensor, int) override { QFAIL("a single rank sends nothing"); }
  void recv(Tensor, int) override { QFAIL("a single rank receives nothing"); }
  void wait_sends() override {}
  void wait_sends_from(Tensor) override {}
  void barrier() override {}
  void reduce_scatter(Tensor full, Tensor shard) override { copy(full, shard); }
  void all_gather(Tensor shard, Tensor full) override { copy(shard, full); }
  Ticket all_reduce_async(Tensor) override { return 0; }
  Ticket reduce_scatter_async(Tensor full, Tensor shard) override { return copy(full, shard); }
  Ticket all_gather_async(Tensor shard, Tensor full) override { return copy(shard, full); }
  Ticket reduce_async(Tensor, int) override { return 0; }
  void wait(Ticket) override {}

 private:
  static Ticket copy(Tensor from, Tensor to) {
    if (from.data != to.data) std::memcpy(to.data, from.data, static_cast<std::size_t>(to.bytes()));
    return 0;
  }
};

TrainConfig tiny_config() {
  TrainConfig c;
  c.model.vocab = 256;
  c.model.seq = 16;
  c.model.layers = 2;
  c.model.hidden = 32;
  c.model.heads = 4;
  c.model.ffn = 128;
  c.micro_batch = 2;
  c.accumulation = 2;
  c.lr = 1e-3f;
  c.seed = 77;
  return c;
}

// Two tokens a step: the loss gradient of each logit is the scale over 2,
// and FLT_MAX overflows in backward.
TrainConfig overflowing_config() {
  TrainConfig c = tiny_config();
  c.model.seq = 2;
  c.micro_batch = 1;
  c.accumulation = 1;
  c.dynamic_loss_scale = true;
  c.initial_loss_scale = FLT_MAX;
  return c;
}

struct Solo {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  SoloComm dp, tp, pp;
  Trainer trainer;
  explicit Solo(const TrainConfig& c)
      : trainer(*backend, dp, tp, pp, c, builtin_corpus(), nullptr) {}
};

}  // namespace

class TestWorkerTrainer : public QObject {
  Q_OBJECT

 private slots:
  void overflowSkipsAndHalvesTheScale();
  void firstAppliedStepIsAdamsFirst();
  void scaleDoublesAfterACleanWindow();
  void scaleStopsGrowingAtItsCeiling();
  void scaledRunTrainsAsUnscaled();
  void nonFiniteGradientsStopBeforeTheUpdate();
};

// A step whose gradients overflow changes no weight and halves the scale.
void TestWorkerTrainer::overflowSkipsAndHalvesTheScale() {
  const TrainConfig c = overflowing_config();
  Solo s(c);
  const std::vector<float> before = s.trainer.local_weights();
  const StepResult r = s.trainer.step();
  QVERIFY(r.skipped);
  QCOMPARE(r.loss_scale, static_cast<double>(FLT_MAX));
  QVERIFY(std::isinf(r.grad_norm));
  QVERIFY(std::isfinite(r.loss));
  QVERIFY(s.trainer.local_weights() == before);
  const StepResult next = s.trainer.step();
  QCOMPARE(next.loss_scale, static_cast<double>(FLT_MAX / 2));
}

// Skipped steps are no optimizer steps (PyTorch's GradScaler and Megatron
// skip optimizer.step(), whose count drives Adam's bias correction): the
// first update applied moves each weight by about lr, as Adam's first step
// does (|m̂ / sqrt(v̂)| = 1). Counting the skipped steps made it smaller
// (after k skips, (0.1 / (1 - 0.9^(k+1))) / sqrt(0.05 / (1 - 0.95^(k+1))) lr).
void TestWorkerTrainer::firstAppliedStepIsAdamsFirst() {
  const TrainConfig c = overflowing_config();
  Solo s(c);
  int skipped = 0;
  std::vector<float> before = s.trainer.local_weights();
  for (;;) {
    const StepResult r = s.trainer.step();
    if (!r.skipped) break;
    ++skipped;
    QVERIFY2(skipped < 200, "the scale never came down to a finite step");
  }
  QVERIFY(skipped >= 1);
  const std::vector<float> after = s.trainer.local_weights();
  std::vector<double> moves;
  for (std::size_t i = 0; i < after.size(); ++i) {
    const double d = std::fabs(static_cast<double>(after[i]) - before[i]);
    if (d > 0) moves.push_back(d);
  }
  QVERIFY(moves.size() > after.size() / 2);
  std::nth_element(moves.begin(), moves.begin() + moves.size() / 2, moves.end());
  const double median = moves[moves.size() / 2];
  qInfo("%d steps skipped; median weight move %.4g (lr %g)", skipped, median, double(c.lr));
  QVERIFY2(std::fabs(median - c.lr) < 0.02 * c.lr,
           qPrintable(QString("after %1 skipped steps the first update moved weights by %2, "
                              "not lr = %3")
                          .arg(skipped)
                          .arg(median)
                          .arg(c.lr)));
}

void TestWorkerTrainer::scaleDoublesAfterACleanWindow() {
  TrainConfig c = tiny_config();
  c.dynamic_loss_scale = true;
  c.initial_loss_scale = 1024;
  c.loss_scale_window = 3;
  Solo s(c);
  std::vector<double> scales;
  for (int i = 0; i < 7; ++i) {
    const StepResult r = s.trainer.step();
    QVERIFY(!r.skipped);
    scales.push_back(r.loss_scale);
  }
  QCOMPARE(scales, (std::vector<double>{1024, 1024, 1024, 2048, 2048, 2048, 4096}));
}

// Doubling stops at 2^24: growing for ever, the scale became infinite
// (a long clean run), and from then every step overflowed and was skipped.
void TestWorkerTrainer::scaleStopsGrowingAtItsCeiling() {
  TrainConfig c = tiny_config();
  c.dynamic_loss_scale = true;
  c.initial_loss_scale = 4194304;  // 2^22
  c.loss_scale_window = 1;
  Solo s(c);
  std::vector<double> scales;
  for (int i = 0; i < 5; ++i) {
    const StepResult r = s.trainer.step();
    QVERIFY(!r.skipped);
    scales.push_back(r.loss_scale);
  }
  QCOMPARE(scales, (std::vector<double>{4194304, 8388608, 16777216, 16777216, 16777216}));
}

// Scaling by a power of two and back is exact in fp32: the same losses,
// gradient norms and weights as without loss scaling.
void TestWorkerTrainer::scaledRunTrainsAsUnscaled() {
  TrainConfig plain = tiny_config();
  TrainConfig scaled = plain;
  scaled.dynamic_loss_scale = true;
  scaled.initial_loss_scale = 4096;
  Solo a(plain), b(scaled);
  for (int i = 0; i < 3; ++i) {
    const StepResult ra = a.trainer.step();
    const StepResult rb = b.trainer.step();
    QVERIFY(!rb.skipped);
    QCOMPARE(rb.loss, ra.loss);
    QVERIFY2(
        std::fabs(rb.grad_norm - ra.grad_norm) <= 1e-6 * ra.grad_norm,
        qPrintable(QString("step %1: %2 against %3").arg(i).arg(rb.grad_norm).arg(ra.grad_norm)));
  }
  const std::vector<float> wa = a.trainer.local_weights(), wb = b.trainer.local_weights();
  double worst = 0;
  for (std::size_t i = 0; i < wa.size(); ++i)
    worst = std::max(worst, double(std::fabs(wa[i] - wb[i])));
  QVERIFY2(worst < 1e-6, qPrintable(QString::number(worst)));
}

// Gradients that are not finite (no loss scaling to skip them) stop the run
// at the step that made them, its weights as they were: applied, they made
// every weight NaN and the run stopped a step later, on its loss.
void TestWorkerTrainer::nonFiniteGradientsStopBeforeTheUpdate() {
  TrainConfig c = tiny_config();
  c.lr = 1e30f;  // the first update throws the weights past any finite logit
  Solo s(c);
  std::vector<float> before;
  QString error;
  int step = 0;
  for (; step < 5 && error.isEmpty(); ++step) {
    before = s.trainer.local_weights();
    try {
      s.trainer.step();
    } catch (const std::exception& e) {
      error = QString::fromUtf8(e.what());
    }
  }
  QVERIFY2(!error.isEmpty(), "a learning rate of 1e30 trained on");
  QVERIFY2(
      error.contains(QRegularExpression(
          QString(R"(^training diverged: the gradient norm is (nan|infinite) at step %1; )"
                  R"(the weights were not updated \(is the learning rate 1e\+30 too large\?\)$)")
              .arg(step))),
      qPrintable(error));
  const std::vector<float> after = s.trainer.local_weights();
  QCOMPARE(after.size(), before.size());
  QVERIFY(std::memcmp(after.data(), before.data(), after.size() * sizeof(float)) == 0);
}

QTEST_GUILESS_MAIN(TestWorkerTrainer)
#include "tst_worker_trainer.moc"
