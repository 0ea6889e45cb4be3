#include "app/gui/calibration_panel.h"

#include <QCheckBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <string>
#include <utility>

#include "app/calibration/calibration_workflow.h"
#include "core/format.h"
#include "core/host_probe.h"

namespace cs::gui {

namespace {

// The progress bar's range: the calibration's share done, in thousandths
// (its phases and the points within each, CalibrationProgress::fraction).
constexpr int kProgressSteps = 1000;

// What the worker thread hands back: the calibration, or why there is none.
struct Outcome {
  std::shared_ptr<calib::MachineCalibration> value;
  QString error;
};

QString quality_text(const plan::FitQuality& q) {
  // One point is fitted exactly: no R² or error to speak of.
  if (q.points.size() == 1) return QObject::tr("one point (%1 samples)").arg(q.points[0].samples);
  return QStringLiteral("R² %1, RMS %2 %, worst %3 % (%4 points)")
      .arg(q.r2, 0, 'f', 3)
      .arg(100 * q.rms_error, 0, 'f', 1)
      .arg(100 * q.max_error, 0, 'f', 1)
      .arg(q.points.size());
}

QString text(const std::string& s) {
  return QString::fromStdString(s);
}

// The optimizer's row: the sum of its passes, by parameter count where measured.
QString optimizer_text(const LoopCosts& loops) {
  const std::string by_size = plan::optimizer_by_size_text(loops);
  return by_size.empty() ? QObject::tr("sum of its passes")
                         : QObject::tr("sum of its passes: %1").arg(text(by_size));
}

}  // namespace

// Written by whichever thread reports (the sweep's, the launcher's monitor),
// read by the panel's timer: plain data under a mutex, no Qt.
struct CalibrationPanel::Sweep {
  launch::StopRequest stop;
  std::mutex mutex;
  launch::CalibrationProgress progress;
  bool changed = false;
};

CalibrationPanel::CalibrationPanel(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("calibrationPanel"));
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(
      tr("Measures this machine (GEMMs, memory, the model's operations and all-reduces, "
         "through the worker) and saves a calibrated cluster preset that the planner uses "
         "like a datasheet preset."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);

  auto* form = new QFormLayout;
  ranks_ = new QLineEdit(QStringLiteral("1, 2, 4"), this);
  ranks_->setObjectName(QStringLiteral("calibrationRanks"));
  ranks_->setToolTip(tr("Rank counts to measure (CPU engine: ranks sharing the cores)"));
  form->addRow(tr("Rank counts"), ranks_);
  seconds_ = new QDoubleSpinBox(this);
  seconds_->setObjectName(QStringLiteral("calibrationSeconds"));
  seconds_->setRange(0.01, 10);
  seconds_->setDecimals(2);
  seconds_->setSingleStep(0.1);
  seconds_->setValue(0.2);
  seconds_->setSuffix(tr(" s"));
  seconds_->setToolTip(tr("Seconds per GEMM size (longer: steadier figures)"));
  form->addRow(tr("Per size"), seconds_);
  reference_ = new QCheckBox(tr("Then train a reference model on each rank count and learn from it"),
                             this);
  reference_->setObjectName(QStringLiteral("calibrationReferenceRuns"));
  reference_->setChecked(true);
  reference_->setToolTip(
      tr("CPU engine: a few training steps of a small GPT per rank count, after the sweeps. The "
         "sweeps time each operation alone; training interleaves them, and the presets learn "
         "what that costs. The runs' stores are kept beside the calibration store."));
  form->addRow(QString(), reference_);
  layout->addLayout(form);

  auto* buttons = new QHBoxLayout;
  start_ = new QPushButton(tr("Calibrate this machine"), this);
  start_->setObjectName(QStringLiteral("calibrationStart"));
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setObjectName(QStringLiteral("calibrationCancel"));
  cancel_->setEnabled(false);
  learn_ = new QPushButton(tr("Learn from runs..."), this);
  learn_->setObjectName(QStringLiteral("calibrationLearn"));
  learn_->setToolTip(
      tr("Refine the calibrated presets from run stores: their GEMMs, loops and collectives, "
         "the runs of one rank count fitted together"));
  buttons->addWidget(start_);
  buttons->addWidget(cancel_);
  buttons->addStretch();
  buttons->addWidget(learn_);
  layout->addLayout(buttons);

  progress_ = new QProgressBar(this);
  progress_->setVisible(false);
  layout->addWidget(progress_);
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("calibrationStatus"));
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::PlainText);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  // The status scrolls past a few lines: a calibration's notes (one for each
  // fit off its points, on a busy machine a dozen) took the window's height
  // and left the fits' table a row.
  status_area_ = new QScrollArea(this);
  status_area_->setObjectName(QStringLiteral("calibrationStatusArea"));
  status_area_->setWidget(status_);
  status_area_->setWidgetResizable(true);
  status_area_->setFrameShape(QFrame::NoFrame);
  status_area_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  layout->addWidget(status_area_);

  table_ = new QTableWidget(0, 4, this);
  table_->setObjectName(QStringLiteral("calibrationFits"));
  table_->setHorizontalHeaderLabels({tr("Ranks"), tr("Quantity"), tr("Fitted"), tr("Fit quality")});
  // The fit's quality in view without scrolling across: the columns before
  // it are held to a width (a long value wraps, as the quality does), the
  // quality takes the rest, and the rows grow to what they hold.
  table_->horizontalHeader()->setSectionResizeMode(3, QHeaderView::Stretch);
  table_->setWordWrap(true);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  layout->addWidget(table_, 1);

  poll_ = new QTimer(this);
  poll_->setInterval(100);
  connect(poll_, &QTimer::timeout, this, &CalibrationPanel::showProgress);

  connect(start_, &QPushButton::clicked, this, &CalibrationPanel::start);
  connect(cancel_, &QPushButton::clicked, this, &CalibrationPanel::cancel);
  connect(learn_, &QPushButton::clicked, this, &CalibrationPanel::chooseRuns);
}

CalibrationPanel::~CalibrationPanel() {
  // The sweep stops with the panel (every rank closes its store).
  if (sweep_) sweep_->stop.cancel = true;
}

void CalibrationPanel::setPresetsDir(const QString& dir) {
  presets_dir_ = dir;
}
void CalibrationPanel::setStorePath(const QString& path) {
  store_path_ = path;
}
void CalibrationPanel::setPlanCluster(std::optional<Cluster> cluster) {
  plan_cluster_ = std::move(cluster);
}

void CalibrationPanel::setStatus(const QString& text) {
  status_->setText(text);
  fitStatus();
}

void CalibrationPanel::fitStatus() {
  constexpr int kLines = 6;
  const int wanted =
      status_->text().isEmpty() ? 0 : status_->heightForWidth(status_area_->viewport()->width());
  status_area_->setFixedHeight(std::min(wanted, kLines * fontMetrics().lineSpacing()));
}

void CalibrationPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fitStatus();  // the lines wrap anew
}

void CalibrationPanel::setRunning(bool running) {
  running_ = running;
  calibrating_ = false;  // start() says so after
  start_->setEnabled(!running);
  cancel_->setEnabled(running);
  learn_->setEnabled(!running);
  ranks_->setEnabled(!running);
  seconds_->setEnabled(!running);
  reference_->setEnabled(!running);
  progress_->setVisible(running);
}

void CalibrationPanel::showProgress() {
  if (!sweep_) return;
  std::lock_guard lock(sweep_->mutex);
  if (!sweep_->changed) return;
  sweep_->changed = false;
  // The share of the whole done, phases and the points within each.
  progress_->setValue(static_cast<int>(std::lround(sweep_->progress.fraction() * kProgressSteps)));
  setStatus(QString::fromStdString(sweep_->progress.text));
}

void CalibrationPanel::fail(const QString& message) {
  setStatus(message);
  emit failed(message);
}

void CalibrationPanel::cancel() {
  if (!sweep_) return;
  // Again while the ranks close their stores: killed, as a second Ctrl-C does.
  if (sweep_->stop.cancel.exchange(true)) {
    sweep_->stop.kill = true;
    setStatus(tr("Killing the ranks..."));
    return;
  }
  setStatus(tr("Stopping the calibration... (Cancel again to kill the ranks)"));
}

void CalibrationPanel::start() {
  if (running_) return;
  std::vector<int> ranks;
  for (const QString& raw : ranks_->text().split(QLatin1Char(','))) {
    const QString part = raw.trimmed();
    if (part.isEmpty()) continue;
    bool ok = false;
    const int n = part.toInt(&ok);
    if (!ok || n < 1) {
      fail(tr("Rank counts: \"%1\" is not a positive whole number").arg(part));
      return;
    }
    ranks.push_back(n);
  }
  if (ranks.empty()) {
    fail(tr("Rank counts: give at least one"));
    return;
  }

  // The same options as `clusterscope calibrate` on this host.
  const HostInfo host = probe_host();
  calib::MachineCalibrationOptions options;
  launch::CalibrationRunOptions& run = options.run;
  run.backend = host.gpus.empty() ? "cpu" : "cuda";
  run.rank_counts = ranks;
  run.seconds_per_size = seconds_->value();
  run.host = host.hostname;
  run.host_memory_bytes = host.memory_bytes;
  run.cpu_cores = host.cpu_cores;
  run.gpu_memory_bytes = smallest_gpu_memory_bytes(host);
  if (run.backend == "cuda") {
    run.precisions = {"fp32", "tf32", "bf16", "fp16"};
    run.gemm_sizes = {1024, 2048, 4096, 8192};
    if (auto catalog = PresetCatalog::load_default()) {
      if (const GpuSpec* g = catalog->match_device(host.gpus.front().name)) options.datasheet = *g;
    }
  }
  options.reference_runs = reference_->isChecked();
  options.presets_dir = presets_dir_.toStdString();
  const std::filesystem::path dir = presets_dir_.isEmpty()
                                        ? user_presets_dir()
                                        : std::filesystem::path(presets_dir_.toStdString());
  // Named for its time, as `clusterscope calibrate` names it: one name for
  // every calibration wrote each over the last (its reference runs' too).
  const std::string stamp =
      QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")).toStdString();
  run.store =
      !store_path_.isEmpty()
          ? store_path_.toStdString()
          : (dir.parent_path() / ("calibration-" + host.hostname + "-" + stamp + ".db")).string();

  table_->setRowCount(0);
  progress_->setRange(0, kProgressSteps);
  progress_->setValue(0);
  setStatus(tr("Starting the sweeps..."));
  setRunning(true);
  calibrating_ = true;
  const int job = ++job_;
  sweep_ = std::make_shared<Sweep>();
  poll_->start();

  auto* watcher = new QFutureWatcher<Outcome>(this);
  connect(watcher, &QFutureWatcher<Outcome>::finished, this, [this, watcher, job] {
    watcher->deleteLater();
    if (job != job_) return;  // a stale job
    poll_->stop();
    setRunning(false);
    const Outcome outcome = watcher->future().result();
    if (!outcome.value) {
      fail(outcome.error);
      return;
    }
    showResult(*outcome.value);
  });
  watcher->setFuture(QtConcurrent::run([options, sweep = sweep_] {
    auto result = calib::calibrate_machine(
        options,
        [sweep](const launch::CalibrationProgress& p) {
          std::lock_guard lock(sweep->mutex);
          sweep->progress = p;
          sweep->changed = true;
        },
        &sweep->stop);
    Outcome out;
    if (result) {
      out.value = std::make_shared<calib::MachineCalibration>(std::move(result).value());
    } else {
      out.error = QString::fromStdString(result.message());
    }
    return out;
  }));
}

void CalibrationPanel::chooseRuns() {
  const QStringList files = QFileDialog::getOpenFileNames(
      this, tr("Learn from run stores"), QString(), tr("Run stores (*.db);;All files (*)"));
  if (!files.isEmpty()) learnFrom(files);
}

void CalibrationPanel::learnFrom(const QStringList& run_stores) {
  if (running_ || run_stores.isEmpty()) return;
  std::vector<std::string> stores;
  for (const QString& s : run_stores)
    stores.push_back(s.toStdString());
  const std::filesystem::path dir = presets_dir_.toStdString();
  table_->setRowCount(0);
  progress_->setRange(0, 0);  // busy: a fit takes seconds
  setStatus(tr("Learning from %1...").arg(run_stores.join(QStringLiteral(", "))));
  setRunning(true);
  cancel_->setEnabled(false);  // nothing to stop: it reads the stores and fits
  const int job = ++job_;
  struct Learnt {
    std::shared_ptr<std::vector<calib::RunRefinement>> value;
    // Calibration stores (a calibration's sweeps, kept where its reference
    // runs were cancelled) are fitted as calibrations, as
    // clusterscope calibrate --from-store fits them.
    std::shared_ptr<std::vector<calib::MachineCalibration>> calibrations;
    QString error;
  };
  auto* watcher = new QFutureWatcher<Learnt>(this);
  connect(watcher, &QFutureWatcher<Learnt>::finished, this, [this, watcher, job] {
    watcher->deleteLater();
    if (job != job_) return;
    setRunning(false);
    const Learnt outcome = watcher->future().result();
    if (outcome.calibrations) {
      showFittedStores(*outcome.calibrations);
      return;
    }
    if (!outcome.value) {
      fail(outcome.error);
      return;
    }
    QStringList lines, clusters;
    QString file;
    for (const calib::RunRefinement& r : *outcome.value) {
      showFit(r.fit);
      QStringList runs;
      for (const std::string& run : r.runs)
        runs << QFileInfo(text(run)).fileName();
      lines << tr("Refined %1 from %2%3.")
                   .arg(text(r.base_cluster), runs.join(QStringLiteral(", ")),
                        r.runs.size() > 1 ? tr(" (fitted together)") : QString());
      for (const std::string& note : r.fit.notes)
        lines << text(note);
      clusters << text(r.base_cluster);
      file = text(r.presets_file.string());
    }
    if (!file.isEmpty()) lines << tr("Saved in %1.").arg(file);
    setStatus(lines.join(QStringLiteral("\n")));
    emit calibrated(file, clusters);
  });
  watcher->setFuture(QtConcurrent::run([stores, dir, plan_cluster = plan_cluster_] {
    Learnt out;
    auto catalog = PresetCatalog::load_default();
    if (catalog && !dir.empty() && dir != user_presets_dir()) {
      // The presets being refined live in the panel's folder.
      if (Status s = catalog->load_user_presets(dir); !s) catalog = s.error();
    }
    if (!catalog) {
      out.error = QString::fromStdString(catalog.message());
      return out;
    }
    const auto calibration_stores = std::count_if(
        stores.begin(), stores.end(), [](auto& s) { return calib::is_calibration_store(s); });
    if (calibration_stores > 0 && calibration_stores < std::ssize(stores)) {
      out.error =
          tr("Calibration stores and run stores were chosen together: a calibration "
             "store is fitted on its own, runs are learnt from together; choose one "
             "kind.");
      return out;
    }
    if (calibration_stores > 0) {
      auto fitted = std::make_shared<std::vector<calib::MachineCalibration>>();
      for (const std::string& store : stores) {
        auto one = calib::fit_and_save_calibration_store(store, *catalog,
                                                         dir.empty() ? user_presets_dir() : dir);
        if (!one) {
          out.error = QString::fromStdString(one.message());
          return out;
        }
        fitted->push_back(std::move(one).value());
      }
      out.calibrations = std::move(fitted);
      return out;
    }
    auto result = calib::refine_from_runs(stores, *catalog, {}, true, dir, plan_cluster);
    if (result) {
      out.value = std::make_shared<std::vector<calib::RunRefinement>>(std::move(result).value());
    } else {
      out.error = QString::fromStdString(result.message());
    }
    return out;
  }));
}

void CalibrationPanel::showResult(const calib::MachineCalibration& result) {
  table_->setRowCount(0);
  showFit(result.fit);
  for (const plan::Calibration& fit : result.reference_fits)
    showFit(fit, tr("reference runs: "));
  QStringList clusters;
  for (const Cluster& c : result.presets.clusters)
    clusters << text(c.name);
  const QString file = text(result.presets_file.string());
  QString message =
      tr("Calibrated in %1: clusters %2")
          .arg(text(format_seconds(result.record.seconds + result.reference_seconds)),
               clusters.join(QStringLiteral(", ")));
  if (!file.isEmpty()) message += tr(", saved in %1").arg(file);
  message += tr("; the calibration store is %1.").arg(text(result.record.store));
  for (const std::string& note : result.fit.notes)
    message += QStringLiteral("\n") + text(note);
  for (const calib::ReferenceRun& r : result.reference_runs) {
    const QString layout = text(calib::to_string(r.layout));
    message += QStringLiteral("\n") +
               tr("Reference run %1: %2 per step measured; the sweeps predicted %3, the "
                  "calibrated presets %4.")
                   .arg(layout, text(format_seconds(r.measured_step_s)),
                        text(format_seconds(r.predicted_sweeps_s)),
                        text(format_seconds(r.predicted_s)));
    if (r.retried) message += tr(" (run twice, the first far from the prediction: the faster kept)");
  }
  for (const std::string& note : result.notes)
    message += QStringLiteral("\n") + text(note);
  setStatus(message);
  emit calibrated(file, clusters);
}

// Calibration stores fitted again (Learn from runs given one): each one's
// fit in the table, its clusters and the presets file it saved.
void CalibrationPanel::showFittedStores(const std::vector<calib::MachineCalibration>& fitted) {
  QStringList lines, clusters;
  QString file;
  for (const calib::MachineCalibration& m : fitted) {
    showFit(m.fit);
    QStringList names;
    for (const Cluster& c : m.presets.clusters)
      names << text(c.name);
    lines << tr("Fitted the calibration store %1: clusters %2.")
                 .arg(text(m.record.store), names.join(QStringLiteral(", ")));
    for (const std::string& note : m.fit.notes)
      lines << text(note);
    clusters << names;
    file = text(m.presets_file.string());
  }
  if (!file.isEmpty()) lines << tr("Saved in %1.").arg(file);
  setStatus(lines.join(QStringLiteral("\n")));
  emit calibrated(file, clusters);
}

// A row per fitted quantity (and rank count), with the quality of its fit.
void CalibrationPanel::showFit(const plan::Calibration& fit, const QString& origin) {
  auto add = [this, &origin](int ranks, const QString& quantity, const QString& fitted,
                             const QString& quality) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    table_->setItem(row, 0, new QTableWidgetItem(QString::number(ranks)));
    table_->setItem(row, 1, new QTableWidgetItem(origin + quantity));
    table_->setItem(row, 2, new QTableWidgetItem(fitted));
    table_->setItem(row, 3, new QTableWidgetItem(quality));
  };
  for (const plan::DeviceFit& d : fit.devices) {
    for (const plan::GemmCurve& g : d.gemm) {
      add(d.ranks, tr("%1 GEMM").arg(text(std::string(to_string(g.precision)))),
          text(format_rate(g.peak * g.efficiency, "FLOP/s")), quality_text(g.quality));
    }
    // The rows clusterscope calibrate prints beside the GEMMs: the fixed
    // part of a GEMM's time, and what each op's timing adds (CPU engine).
    if (!d.gemm.empty()) add(d.ranks, tr("GEMM ramp"), text(format_seconds(d.ramp)), QString());
    if (fit.engine == "cpu" && d.launch > 0) {
      add(d.ranks, tr("timing of an op"), text(format_seconds(d.launch)),
          tr("measured: the tracer's clock reads"));
    }
    if (!d.gemm.empty() && fit.engine != "cpu")
      add(d.ranks, tr("GEMM traffic hidden"),
          QStringLiteral("%1 %").arg(100 * d.gemm_memory_overlap, 0, 'f', 1), QString());
    if (d.memory_rate) {
      add(d.ranks, tr("memory streaming"), text(format_rate(*d.memory_rate, "B/s")),
          quality_text(d.memory_quality));
    }
    for (const plan::LoopFit& l : d.loops) {
      const bool attention = l.kind.starts_with("attention");
      add(d.ranks, text(l.kind),
          attention ? tr("%1 GFLOP/s").arg(l.value, 0, 'f', 2)
                    : tr("%1 ns/element").arg(l.value, 0, 'f', 2),
          l.quality.points.empty() ? optimizer_text(d.loop_costs)
          : l.by_count.empty()
              ? quality_text(l.quality)
              : tr("by parameter count: %1").arg(text(plan::by_count_text(l.by_count))));
    }
    if (d.link) {
      add(d.ranks, tr("link latency (α) / bus bandwidth"),
          text(format_seconds(d.link->latency) + " / " + format_rate(d.link->bandwidth, "B/s")),
          quality_text(d.link->quality));
    }
    if (d.cold_link) {
      add(d.ranks, tr("caches cold: link latency (α) / bus bandwidth"),
          text(format_seconds(d.cold_link->latency) + " / " +
               format_rate(d.cold_link->bandwidth, "B/s")),
          quality_text(d.cold_link->quality));
      if (const std::string by_size = plan::bandwidth_by_size_text(d.cold_link->by_size);
          !by_size.empty()) {
        add(d.ranks, tr("caches cold: bus bandwidth by message size"), text(by_size), QString());
      }
    }
  }
  table_->resizeColumnsToContents();
  // A list of sizes or of parameter counts made its column as wide as
  // itself, and the quality column went off the window's edge.
  for (const auto& [column, widest] : {std::pair{1, 240}, std::pair{2, 160}})
    table_->setColumnWidth(column, std::min(table_->columnWidth(column), widest));
}

}  // namespace cs::gui
