#include "app/gui/runs_panel.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QFormLayout>
#include <QGraphicsLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLineEdit>
#include <QLineSeries>
#include <QListWidget>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTextBrowser>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <csignal>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "app/calibration/calibration_workflow.h"
#include "app/gui/plain_text.h"
#include "app/gui/project.h"
#include "app/gui/theme.h"
#include "app/gui/workspace.h"
#include "core/format.h"
#include "core/host_probe.h"
#include "core/model_json.h"
#include "core/trace_analysis.h"
#include "profiler/plan_run.h"
#include "profiler/process_tree.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

QString q(std::string_view s) {
  return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

QChartView* lineChart(const QString& title, const QString& unit, QLineSeries* series,
                      QWidget* parent) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->addSeries(series);
  chart->createDefaultAxes();
  chart->legend()->hide();
  for (QAbstractAxis* axis : chart->axes(Qt::Vertical))
    axis->setTitleText(unit);
  for (QAbstractAxis* axis : chart->axes(Qt::Horizontal))
    axis->setTitleText(QObject::tr("step"));
  // Room for the axes' labels: at 160 px Qt Charts elided each to "…".
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->layout()->setContentsMargins(0, 0, 0, 0);
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumHeight(220);
  return view;
}

// Fits the chart's axes to its series.
void fitAxes(QLineSeries* series) {
  const QList<QPointF> points = series->points();
  if (points.isEmpty()) return;
  double x1 = points.front().x(), x2 = x1, y1 = points.front().y(), y2 = y1;
  for (const QPointF& p : points) {
    x1 = std::min(x1, p.x());
    x2 = std::max(x2, p.x());
    y1 = std::min(y1, p.y());
    y2 = std::max(y2, p.y());
  }
  // A flat line (every step's loss alike) gets a range about its value.
  const double pad = std::max({1e-9, (y2 - y1) * 0.1, std::abs(y2) * 0.01});
  QChart* chart = series->chart();
  for (QAbstractAxis* axis : chart->axes(Qt::Horizontal))
    if (auto* values = qobject_cast<QValueAxis*>(axis))
      setRoundTicks(values, x1, std::max(x1 + 1, x2), true);
  for (QAbstractAxis* axis : chart->axes(Qt::Vertical))
    if (auto* values = qobject_cast<QValueAxis*>(axis))
      setRoundTicks(values, std::max(0.0, y1 - pad), y2 + pad);
}

}  // namespace

RunsPanel::RunsPanel(Workspace* workspace, QWidget* parent)
    : QWidget(parent), workspace_(workspace) {
  setObjectName(QStringLiteral("runs_panel"));
  // The panel's long column scrolls: its own minimum (777 px) set the main
  // window's, taller than a 1280x800 screen.
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll_ = scroll;
  scroll->setObjectName(QStringLiteral("runs_scroll"));
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* content = new QWidget(scroll);
  auto* layout = new QVBoxLayout(content);

  auto* form = new QFormLayout;
  backend_ = new QComboBox(this);
  backend_->addItem(tr("Automatic (CUDA when a GPU is here)"), QStringLiteral("auto"));
  backend_->addItem(tr("CPU engine (OpenBLAS + MPI)"), QStringLiteral("cpu"));
  backend_->addItem(tr("CUDA engine"), QStringLiteral("cuda"));
  form->addRow(tr("Engine"), backend_);
  engine_ = new QLabel(this);
  engine_->setObjectName(QStringLiteral("runs_engine"));
  engine_->setWordWrap(true);
  form->addRow(QString(), engine_);
  ranks_warning_ = new QLabel(this);
  ranks_warning_->setObjectName(QStringLiteral("runs_ranks_warning"));
  ranks_warning_->setWordWrap(true);
  ranks_warning_->setTextFormat(Qt::PlainText);
  ranks_warning_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  ranks_warning_->hide();
  form->addRow(QString(), ranks_warning_);
  placement_ = new QComboBox(this);
  placement_->addItem(tr("This machine"), int(launch::Placement::local));
  placement_->addItem(tr("Hosts of a hostfile"), int(launch::Placement::hostfile));
  placement_->addItem(tr("Slurm job"), int(launch::Placement::slurm));
  form->addRow(tr("Where"), placement_);
  hostfile_ = new QLineEdit(this);
  hostfile_->setPlaceholderText(tr("hostfile path (Open MPI format)"));
  hostfile_->setEnabled(false);
  form->addRow(tr("Hostfile"), hostfile_);
  // The Slurm job's own settings, as `clusterscope run --slurm-*` takes them.
  slurm_partition_ = new QLineEdit(this);
  slurm_partition_->setObjectName(QStringLiteral("runs_slurm_partition"));
  slurm_partition_->setPlaceholderText(tr("the cluster's default"));
  slurm_account_ = new QLineEdit(this);
  slurm_account_->setObjectName(QStringLiteral("runs_slurm_account"));
  slurm_account_->setPlaceholderText(tr("your default"));
  slurm_time_ = new QLineEdit(this);
  slurm_time_->setObjectName(QStringLiteral("runs_slurm_time"));
  slurm_time_->setPlaceholderText(tr("as sbatch takes it: 30, 1:00:00, 2-00:00:00"));
  form->addRow(tr("Slurm partition"), slurm_partition_);
  form->addRow(tr("Slurm account"), slurm_account_);
  form->addRow(tr("Slurm time limit"), slurm_time_);
  for (QLineEdit* field : {slurm_partition_, slurm_account_, slurm_time_})
    field->setEnabled(false);
  folder_ = new QLineEdit(this);
  folder_->setText(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
                   QStringLiteral("/runs"));
  form->addRow(tr("Run stores in"), folder_);
  steps_ = new QSpinBox(this);
  steps_->setRange(1, 1000000);
  steps_->setValue(20);
  form->addRow(tr("Steps"), steps_);
  hang_ = new QSpinBox(this);
  hang_->setRange(0, 86400);
  hang_->setValue(300);
  hang_->setSuffix(tr(" s without progress is a hang (0: never)"));
  form->addRow(tr("Hang after"), hang_);
  layout->addLayout(form);

  auto* buttons = new QHBoxLayout;
  launch_button_ = new QPushButton(tr("Launch the current plan"), this);
  cancel_button_ = new QPushButton(tr("Cancel"), this);
  cancel_button_->setObjectName(QStringLiteral("runs_cancel"));
  cancel_button_->setEnabled(false);
  open_button_ = new QPushButton(tr("Open the run"), this);
  open_button_->setEnabled(false);
  buttons->addWidget(launch_button_);
  buttons->addWidget(cancel_button_);
  buttons->addWidget(open_button_);
  buttons->addStretch(1);
  layout->addLayout(buttons);

  auto* profile_row = new QHBoxLayout;
  profile_command_ = new QLineEdit(this);
  profile_command_->setObjectName(QStringLiteral("runs_profile_command"));
  profile_command_->setPlaceholderText(
      tr("A CUDA program to profile, e.g. torchrun --nproc-per-node 2 train.py"));
  profile_capture_range_ = new QCheckBox(tr("Only between cudaProfilerStart and Stop"), this);
  profile_capture_range_->setObjectName(QStringLiteral("runs_profile_capture_range"));
  profile_capture_range_->setToolTip(
      tr("Record only what the program runs between its cudaProfilerStart and cudaProfilerStop "
         "calls (torch.cuda.profiler.start() and stop(), Megatron-LM's --profile), as "
         "nsys profile --capture-range=cudaProfilerApi"));
  profile_plan_ = new QCheckBox(tr("Predict with the current plan"), this);
  profile_plan_->setObjectName(QStringLiteral("runs_profile_plan"));
  profile_plan_->setToolTip(
      tr("The program runs the current plan: its prediction goes into the run store, and the "
         "run view holds the run against it part by part (clusterscope profile --plan; mark "
         "the program's steps with NVTX ranges named step N)"));
  profile_button_ = new QPushButton(tr("Profile a command"), this);
  profile_button_->setObjectName(QStringLiteral("runs_profile"));
  profile_row->addWidget(profile_command_, 1);
  profile_row->addWidget(profile_plan_);
  profile_row->addWidget(profile_capture_range_);
  profile_row->addWidget(profile_button_);
  layout->addLayout(profile_row);

  auto* progress_row = new QHBoxLayout;
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  eta_ = new QLabel(this);
  progress_row->addWidget(progress_, 1);
  progress_row->addWidget(eta_);
  layout->addLayout(progress_row);

  auto* split = new QSplitter(Qt::Vertical, this);
  // One above the other, each as wide as the dock: side by side, each was
  // 200 px wide and every axis label read "…".
  auto* charts = new QWidget(split);
  auto* charts_layout = new QVBoxLayout(charts);
  charts_layout->setContentsMargins(0, 0, 0, 0);
  loss_ = new QLineSeries(this);
  step_time_ = new QLineSeries(this);
  loss_view_ = lineChart(tr("Loss (rank 0)"), tr("loss"), loss_, charts);
  time_view_ = lineChart(tr("Step time (rank 0)"), tr("s"), step_time_, charts);
  charts_layout->addWidget(loss_view_);
  charts_layout->addWidget(time_view_);
  rank_table_ = new QTableWidget(0, 6, split);
  rank_table_->setObjectName(QStringLiteral("runs_ranks"));
  rank_table_->setHorizontalHeaderLabels(
      {tr("rank"), tr("state"), tr("step"), tr("loss"), tr("step time"), tr("detail")});
  rank_table_->verticalHeader()->hide();
  rank_table_->horizontalHeader()->setStretchLastSection(true);
  report_ = new QTextBrowser(split);
  report_->setObjectName(QStringLiteral("runs_report"));
  report_->setPlaceholderText(tr("The report of the last run comes here."));
  history_ = new QListWidget(split);
  history_->setObjectName(QStringLiteral("runs_history"));
  history_->setToolTip(tr("Runs of this project: double-click to open one"));
  layout->addWidget(split, 1);
  scroll->setWidget(content);
  outer->addWidget(scroll);

  timer_ = new QTimer(this);
  timer_->setInterval(100);
  connect(timer_, &QTimer::timeout, this, &RunsPanel::poll);
  // Both show their own failure: the button has nothing to add.
  connect(launch_button_, &QPushButton::clicked, this, [this] { (void)launch(); });
  connect(cancel_button_, &QPushButton::clicked, this, &RunsPanel::cancel);
  connect(profile_button_, &QPushButton::clicked, this,
          [this] { (void)profileCommand(QProcess::splitCommand(profile_command_->text())); });
  connect(open_button_, &QPushButton::clicked, this, [this] {
    if (!store_.isEmpty()) emit openRunRequested(store_);
  });
  connect(history_, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
    const QString store = item->data(Qt::UserRole).toString();
    if (store.isEmpty()) {
      report_->setPlainText(tr("That run made no run store: %1").arg(item->toolTip()));
      return;
    }
    emit openRunRequested(store);
  });
  connect(placement_, &QComboBox::currentIndexChanged, this, [this] {
    hostfile_->setEnabled(placement_->currentData().toInt() == int(launch::Placement::hostfile));
    const bool slurm = placement_->currentData().toInt() == int(launch::Placement::slurm);
    for (QLineEdit* field : {slurm_partition_, slurm_account_, slurm_time_})
      field->setEnabled(slurm);
    refreshRanksWarning();
  });
  connect(backend_, &QComboBox::currentIndexChanged, this, [this] {
    engine_->setText(describeEngine());
    refreshRanksWarning();
  });
  connect(workspace_, &Workspace::projectChanged, this, &RunsPanel::refreshHistory);
  connect(workspace_, &Workspace::projectChanged, this, &RunsPanel::refreshRanksWarning);
  gpu_here_ = !probe_host().gpus.empty();
  engine_->setText(describeEngine());
  refreshHistory();
  refreshRanksWarning();
}

void RunsPanel::refreshRanksWarning() {
  // The CLI's own check and limit (profiler/plan_run.h), said before the
  // launch rather than after it: 32 ranks on 2 cores started with no word.
  QString text;
  const QString backend = backend_->currentData().toString();
  const bool cpu =
      backend == QStringLiteral("cpu") || (backend == QStringLiteral("auto") && !gpu_here_);
  auto plan = workspace_->project().resolved_plan();
  if (cpu && plan && placement_->currentData().toInt() == int(launch::Placement::local)) {
    const launch::LocalCapacity capacity = launch::local_capacity();
    if (Status refused = launch::check_local_cpu_ranks(plan.value(), "cpu", capacity); !refused) {
      text = tr("This plan will not start here: %1").arg(q(refused.message()));
    } else if (const std::string warning =
                   launch::local_cpu_ranks_warning(plan.value(), "cpu", capacity);
               !warning.empty()) {
      text = tr("Warning: %1.").arg(q(warning));
    }
  }
  ranks_warning_->setText(text);
  ranks_warning_->setVisible(!text.isEmpty());
}

RunsPanel::~RunsPanel() {
  // Closing does not wait on what does not stop: each is asked to stop, given
  // a moment, then ended, keeping what it recorded. (A profiled command that
  // ignored SIGTERM held the close 10 s, then was left running; ranks that
  // did not stop held it for their whole grace, 40 s.)
  constexpr int kGraceMs = 2000;
  if (profiler_) {
    profiler_->disconnect(this);
    // SIGTERM, which clusterscope profile passes on to the command and all
    // it started: killed at once, it left the command running with no one
    // to stop it.
    profiler_->terminate();
    const auto group = pid_t(profiler_->processId());
    if (!profiler_->waitForFinished(kGraceMs) && group > 0) {
      // The command and what it started are killed; it then gathers what
      // they recorded. They are all below clusterscope profile (a subreaper),
      // even those that left its process group (setsid), which a kill of the
      // group missed: they ran on after the app had closed.
      profiler::signal_descendants(group, SIGKILL);
      if (!profiler_->waitForFinished(kGraceMs)) {
        ::kill(-group, SIGKILL);
        profiler_->waitForFinished(kGraceMs);
      }
    }
  }
  if (launcher_) {
    // The ranks close their stores; those that have not after a moment are
    // killed. The launcher's destructor then merges what they committed.
    launcher_->cancel();
    QElapsedTimer waited;
    waited.start();
    while (!launcher_->finished() && waited.elapsed() < kGraceMs)
      QThread::msleep(20);
    if (!launcher_->finished()) launcher_->kill();
  }
  launcher_.reset();
}

QString RunsPanel::describeEngine() const {
  const QString backend = backend_->currentData().toString();
  if (backend == QStringLiteral("cpu")) return tr("The CPU engine runs (OpenBLAS + MPI).");
  if (backend == QStringLiteral("cuda")) return tr("The CUDA engine runs (NCCL between GPUs).");
  const HostInfo host = probe_host();
  return host.gpus.empty()
             ? tr("No GPU here (%1): the CPU engine runs (OpenBLAS + MPI).").arg(q(host.gpu_status))
             : tr("%1: the CUDA engine runs.").arg(q(host.gpu_status));
}

Status RunsPanel::launch() {
  auto fail = [this](const std::string& message) {
    report_->setPlainText(tr("The run was not started: %1").arg(q(message)));
    return Status(Error{message});
  };
  if (launcher_) return fail("a run is going; cancel it or wait for it to end");
  auto plan = workspace_->project().resolved_plan();
  if (!plan) return fail(plan.message());
  launch::PlanRunOptions options;
  options.backend = backend_->currentData().toString().toStdString();
  options.steps = steps_->value();
  options.hang_timeout = std::chrono::seconds(hang_->value());
  options.placement = launch::Placement(placement_->currentData().toInt());
  options.hostfile = hostfile_->text().toStdString();
  options.slurm.partition = slurm_partition_->text().trimmed().toStdString();
  options.slurm.account = slurm_account_->text().trimmed().toStdString();
  options.slurm.time_limit = slurm_time_->text().trimmed().toStdString();
  if (options.placement == launch::Placement::hostfile && options.hostfile.empty())
    return fail("hostfile: no file given");
  const QString folder = folder_->text();
  if (!QDir().mkpath(folder)) return fail(folder.toStdString() + ": cannot create the folder");
  started_ = QDateTime::currentDateTimeUtc().toString(Qt::ISODate);
  const QString stamp =
      QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
  options.run_store = QDir(folder).filePath(QStringLiteral("run-%1.db").arg(stamp)).toStdString();
  options.command_line = "clusterscope-ui: Runs ▸ Launch";
  options.settings_are_flags = false;
  auto run = launch::plan_run(plan.value(), options);
  if (!run) return fail(run.message());
  calib::note_plan_problems(plan.value(), run->notes);
  // The planner's estimate of this very run, in its store, as `clusterscope
  // run` records it: the run view then holds the plan against the measurement.
  if (options.placement == launch::Placement::local)
    calib::add_prediction(run->spec, run->notes, workspace_->catalog(), plan.value(), run->backend);

  auto launcher = std::make_unique<launch::Launcher>(run->spec);
  if (Status s = launcher->start(); !s) return fail(s.message());
  launcher_ = std::move(launcher);
  cancel_asked_ = false;
  store_ = q(run->spec.run_store);
  const ProjectPlan* current = workspace_->project().current();
  plan_name_ = current ? q(current->name) : QString();
  run_title_ = q(run->spec.title);
  total_steps_ = options.steps;
  rank0_step_seconds_.clear();
  rank_steps_.assign(std::size_t(run->spec.ranks), -1);
  last_report_.reset();
  loss_->clear();
  step_time_->clear();
  rank_table_->setRowCount(run->spec.ranks);
  for (int r = 0; r < run->spec.ranks; ++r)
    setRankRow(r, tr("starting"));
  progress_->setRange(0, total_steps_);
  progress_->setValue(0);
  eta_->setText(tr("starting…"));
  QString text =
      (run->spec.ranks == 1 ? tr("<b>%1</b> — %2 rank, %3 steps, %4 engine<br>store: %5")
                            : tr("<b>%1</b> — %2 ranks, %3 steps, %4 engine<br>store: %5"))
          .arg(q(run->spec.title).toHtmlEscaped(), QString::number(run->spec.ranks),
               QString::number(total_steps_), q(run->backend), store_.toHtmlEscaped());
  run_notes_.clear();
  for (const std::string& note : run->notes) {
    run_notes_ << q(note);
    text += QStringLiteral("<br>note: ") + q(note).toHtmlEscaped();
  }
  report_->setHtml(text);
  engine_->setText(run->backend == "cpu" ? tr("The CPU engine runs (OpenBLAS + MPI).")
                                         : tr("The CUDA engine runs."));
  launch_button_->setEnabled(false);
  cancel_button_->setEnabled(true);
  open_button_->setEnabled(false);
  timer_->start();
  emit runStarted(store_);
  return {};
}

void RunsPanel::cancel() {
  if (!launcher_ || !cancel_asked_) {
    stop();
    return;
  }
  // Again while the ranks close their stores: killed, as a second Ctrl-C
  // does to clusterscope run (a second Cancel did nothing while ranks that
  // did not stop had their 30 s of grace).
  eta_->setText(tr("killing the ranks…"));
  launcher_->kill();
}

void RunsPanel::stop() {
  if (profiler_ && profiler_->state() != QProcess::NotRunning) {
    // clusterscope profile passes SIGTERM on to the command, then keeps what
    // was recorded.
    eta_->setText(tr("stopping the profiled command…"));
    profiler_->terminate();
  }
  if (!launcher_) return;
  cancel_asked_ = true;
  eta_->setText(tr("cancelling: the ranks close their stores… (Cancel again to kill them)"));
  launcher_->cancel();
}

std::vector<launch::RankStatus> RunsPanel::ranks() const {
  return launcher_ ? launcher_->ranks() : std::vector<launch::RankStatus>();
}

int RunsPanel::lossPoints() const {
  return int(loss_->count());
}

int RunsPanel::stepTimePoints() const {
  return int(step_time_->count());
}

void RunsPanel::setRankRow(int rank, const QString& state, const QString& detail) {
  if (rank < 0 || rank >= rank_table_->rowCount()) return;
  auto set = [this, rank](int column, const QString& text) {
    auto* item = rank_table_->item(rank, column);
    if (!item) {
      item = new QTableWidgetItem;
      item->setFlags(item->flags() & ~Qt::ItemIsEditable);
      rank_table_->setItem(rank, column, item);
    }
    item->setText(text);
    return item;
  };
  set(0, QString::number(rank));
  QTableWidgetItem* state_item = set(1, state);
  // A failed rank's cell is tinted; the others have none (an invalid
  // colour's brush painted them black).
  if (state == tr("failed")) {
    state_item->setBackground(QColor(0xff, 0xc8, 0xc8));
  } else {
    state_item->setData(Qt::BackgroundRole, QVariant());
  }
  if (!detail.isEmpty()) set(5, detail);
}

void RunsPanel::poll() {
  if (!launcher_) return;
  for (const launch::LaunchEvent& e : launcher_->take_events())
    handle(e);
  if (launcher_->finished()) finish();
}

void RunsPanel::handle(const launch::LaunchEvent& e) {
  using Kind = launch::LaunchEvent::Kind;
  switch (e.kind) {
    case Kind::started:
      report_->append(tr("started: %1").arg(q(e.text)).toHtmlEscaped());
      break;
    case Kind::rank_started:
      setRankRow(e.rank, tr("running"), q(e.text));
      break;
    case Kind::step: {
      if (e.rank >= 0 && e.rank < int(rank_steps_.size()))
        rank_steps_[std::size_t(e.rank)] = e.step;
      setRankRow(e.rank, tr("running"));
      if (auto* item = rank_table_->item(e.rank, 0); item) {
        rank_table_->setItem(e.rank, 2, new QTableWidgetItem(QString::number(e.step + 1)));
        rank_table_->setItem(e.rank, 3, new QTableWidgetItem(QString::number(e.loss, 'f', 4)));
        rank_table_->setItem(e.rank, 4, new QTableWidgetItem(q(format_seconds(e.step_seconds))));
      }
      if (e.rank == 0) {
        loss_->append(e.step + 1, e.loss);
        step_time_->append(e.step + 1, e.step_seconds);
        fitAxes(loss_);
        fitAxes(step_time_);
        rank0_step_seconds_.push_back(e.step_seconds);
      }
      // Progress: the slowest rank's finished steps.
      const int done =
          rank_steps_.empty() ? 0 : *std::min_element(rank_steps_.begin(), rank_steps_.end()) + 1;
      progress_->setValue(std::clamp(done, 0, total_steps_));
      if (!rank0_step_seconds_.empty()) {
        const double per_step = trace::expected_step_seconds(rank0_step_seconds_);
        eta_->setText(tr("step %1 of %2 · ETA %3")
                          .arg(done)
                          .arg(total_steps_)
                          .arg(q(format_seconds(per_step * double(total_steps_ - done)))));
      }
      break;
    }
    case Kind::rank_done:
      setRankRow(e.rank, tr("done"));
      break;
    case Kind::rank_failed:
      setRankRow(e.rank, tr("failed"), q(e.text));
      report_->append(tr("rank %1 failed: %2").arg(e.rank).arg(q(e.text)).toHtmlEscaped());
      break;
    case Kind::message:
      report_->append(q(e.text).toHtmlEscaped());
      break;
    case Kind::hung:
      report_->append(tr("no progress: the run is hung. %1").arg(q(e.text)).toHtmlEscaped());
      break;
    case Kind::stopping:
      eta_->setText(tr("stopping: the ranks close their stores… (Cancel again to kill them)"));
      break;
    case Kind::merging:
      eta_->setText(tr("merging the rank stores…"));
      break;
    case Kind::sample:  // a calibration's, not a run's
      break;
    case Kind::finished:
      break;
  }
}

void RunsPanel::finish() {
  timer_->stop();
  const launch::RunReport r = launcher_->wait();
  // What the launcher queued after the last poll took its events (the last
  // steps, a rank's end): the run can end between that take and the
  // finished() that brought us here.
  for (const launch::LaunchEvent& e : launcher_->take_events())
    handle(e);
  launcher_.reset();
  last_report_ = r;
  const QString outcome = q(to_string(r.outcome));
  QString html = tr("<h3>Run %1</h3><p>%2</p>").arg(outcome, q(r.message).toHtmlEscaped());
  if (r.failure) {
    html += tr("<p><b>rank %1</b> on %2 (pid %3): %4</p>")
                .arg(r.failure->rank)
                .arg(q(r.failure->host).toHtmlEscaped())
                .arg(r.failure->pid)
                .arg(q(r.failure->description).toHtmlEscaped());
    if (!r.failure->last_lines.empty()) {
      html += tr("<p>Its last lines:</p><pre>");
      for (const std::string& line : r.failure->last_lines)
        html += q(line).toHtmlEscaped() + QLatin1Char('\n');
      html += QStringLiteral("</pre>");
    }
  }
  if (!r.merge_note.empty()) html += tr("<p>Stores: %1</p>").arg(q(r.merge_note).toHtmlEscaped());
  // What was said before the run started (the model as the engines reshaped
  // it, why the store holds no prediction, a rule the plan breaks) stays:
  // the end's report took its place, and a run of a few seconds left no
  // time to read it.
  if (!run_notes_.isEmpty()) {
    QStringList lines;
    for (const QString& note : run_notes_)
      lines << QStringLiteral("note: ") + note.toHtmlEscaped();
    html += QStringLiteral("<p>%1</p>").arg(lines.join(QStringLiteral("<br>")));
  }
  if (!r.slurm_script.empty())
    html += tr("<p>Slurm script: %1 %2</p>")
                .arg(q(r.slurm_script).toHtmlEscaped(), q(r.slurm_job).toHtmlEscaped());
  const bool openable = !r.run_store.empty() && QFileInfo::exists(q(r.run_store));
  html += openable ? tr("<p>The run store opens with “Open the run”%1.</p>")
                         .arg(r.outcome == launch::Outcome::completed ? QString()
                                                                      : tr(" (what was recorded)"))
                   : tr("<p>No run store was made.</p>");
  report_->setHtml(html);
  for (const launch::RankStatus& s : r.ranks)
    setRankRow(s.rank, q(to_string(s.state)));
  eta_->setText(outcome);
  if (openable) store_ = q(r.run_store);
  open_button_->setEnabled(openable);
  launch_button_->setEnabled(true);
  cancel_button_->setEnabled(profiling());  // a profiled command may still be going
  // The report, which names a failed rank, is brought into view: it stood
  // below the launch settings, out of sight.
  QTimer::singleShot(0, this, [this] { scroll_->ensureWidgetVisible(report_, 0, 0); });

  // A Slurm job makes its store when it ends; a run that made none is
  // recorded without one (its entry said "no such file" when opened).
  const bool store_to_come =
      r.outcome == launch::Outcome::submitted || r.outcome == launch::Outcome::script_only;
  // The history names what ran (a CPU run of a scaled model read "LLaMA-2
  // 7B on 32 H100"), and keeps the plan it came from.
  recordRun(run_title_, plan_name_, openable || store_to_come ? store_ : QString(), outcome,
            q(r.message));
  emit runFinished(outcome, store_);
}

void RunsPanel::recordRun(const QString& title, const QString& plan, const QString& store,
                          const QString& outcome, const QString& message) {
  // Into the project's history, saved with the project (not an undo step).
  ProjectRun run;
  run.title = title.toStdString();
  run.store = store.toStdString();
  run.outcome = outcome.toStdString();
  run.message = message.toStdString();
  run.started = started_.toStdString();
  run.plan = plan.toStdString();
  workspace_->recordRun(std::move(run));
}

Status RunsPanel::profileCommand(const QStringList& command) {
  auto fail = [this](const QString& message) {
    report_->setPlainText(tr("Nothing was profiled: %1").arg(message));
    return Status(Error{message.toStdString()});
  };
  if (command.isEmpty()) return fail(tr("no command given"));
  if (profiler_) return fail(tr("a command is being profiled"));
  // CLUSTERSCOPE_CLI names the program to run, as it is (a build of the CLI
  // elsewhere); else the one beside the app, else on PATH.
  QString program = qEnvironmentVariable("CLUSTERSCOPE_CLI");
  if (program.isEmpty()) {
    program = QCoreApplication::applicationDirPath() + QStringLiteral("/clusterscope");
    if (!QFileInfo(program).isExecutable())
      program = QStandardPaths::findExecutable(QStringLiteral("clusterscope"));
  }
  if (program.isEmpty())
    return fail(tr("the clusterscope program was not found beside this one or on PATH"));
  const QString folder = folder_->text();
  if (!QDir().mkpath(folder)) return fail(tr("%1: cannot create the folder").arg(folder));
  started_ = QDateTime::currentDateTimeUtc().toString(Qt::ISODate);
  const QString store = QDir(folder).filePath(
      QStringLiteral("profile-%1.db")
          .arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"))));
  QStringList arguments{QStringLiteral("profile"), QStringLiteral("--out"), store};
  QString plan_written;  // removed again when no store comes beside it
  if (profile_plan_->isChecked()) {
    // The plan beside the store, as a run's (and a record of what the run
    // was held against).
    auto plan = workspace_->project().resolved_plan();
    if (!plan) return fail(tr("the current plan: %1").arg(q(plan.message())));
    const std::string plan_file = launch::run_store_stem(store.toStdString()) + ".plan.json";
    if (Status written = write_json_file(plan_file, to_json(plan.value())); !written)
      return fail(q(written.message()));
    plan_written = q(plan_file);
    arguments << QStringLiteral("--plan") << plan_written;
  }
  if (profile_capture_range_->isChecked())
    arguments << QStringLiteral("--capture-range") << QStringLiteral("cudaProfilerApi");
  profiler_ = new QProcess(this);
  profiler_->setProcessChannelMode(QProcess::MergedChannels);
  // A process group of its own, which the command joins: closing the app
  // can end them all, where the command outlives clusterscope profile.
  profiler_->setChildProcessModifier([] { ::setpgid(0, 0); });
  const QString title = QFileInfo(command.front()).fileName();
  // The panel back to idle, after the process ended or could not start.
  auto ended = [this] {
    profiler_->deleteLater();
    profiler_ = nullptr;
    profile_button_->setEnabled(true);
    // A run launched meanwhile keeps its Cancel and its progress line: the
    // button went off, and the run could not be stopped from the panel.
    cancel_button_->setEnabled(running());
    if (!running()) eta_->clear();
  };
  // A program that cannot start (missing, not executable) gets no finished
  // signal: the panel stayed busy for good, Profile off.
  connect(profiler_, &QProcess::errorOccurred, this,
          [this, ended, program, title, plan_written](QProcess::ProcessError error) {
            if (error != QProcess::FailedToStart) return;  // finished follows the others
            const QString message =
                tr("%1 could not be started: %2").arg(program, profiler_->errorString());
            ended();
            if (!plan_written.isEmpty()) QFile::remove(plan_written);
            report_->setPlainText(tr("Nothing was profiled (%1): %2").arg(title, message));
            emit profileFinished(QString(), message);
          });
  connect(profiler_, &QProcess::finished, this,
          [this, ended, store, title, plan_written](int code) {
            const QString output = QString::fromLocal8Bit(profiler_->readAll());
            ended();
            const bool written = QFileInfo::exists(store);
            // The plan is a record of what the store was held against: with no
            // store it records nothing, and was left behind at every try (a machine
            // without a GPU, a command that ran no CUDA).
            if (!written && !plan_written.isEmpty()) QFile::remove(plan_written);
            report_->setPlainText(
                (written ? tr("Profiled %1 (exit status %2).\n").arg(title, QString::number(code))
                         : tr("Profiling %1 wrote no run store (exit status %2).\n")
                               .arg(title, QString::number(code))) +
                output);
            if (written) {
              store_ = store;
              open_button_->setEnabled(true);
              recordRun(tr("profile: %1").arg(title), tr("profile: %1").arg(title), store,
                        code == 0 ? QStringLiteral("complete") : QStringLiteral("failed"),
                        output.trimmed().section(QLatin1Char('\n'), -1));
            }
            emit profileFinished(written ? store : QString(), output);
          });
  profile_button_->setEnabled(false);
  cancel_button_->setEnabled(true);
  report_->setPlainText(tr("Profiling: %1").arg(command.join(QLatin1Char(' '))));
  profiler_->start(program, arguments + QStringList{QStringLiteral("--")} + command);
  return {};
}

void RunsPanel::refreshHistory() {
  history_->clear();
  const Project& project = workspace_->project();
  for (auto it = project.runs.rbegin(); it != project.runs.rend(); ++it) {
    const QString store = it->store.empty() ? tr("no store") : QFileInfo(q(it->store)).fileName();
    auto* item = new QListWidgetItem(
        tr("%1 · %2 · %3 — %4").arg(q(it->started), q(it->plan), q(it->outcome), store), history_);
    item->setData(Qt::UserRole, q(it->store));
    item->setToolTip(plainToolTip(q(it->message)));
  }
}

}  // namespace cs::gui
