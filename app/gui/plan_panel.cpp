#include "app/gui/plan_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QIntValidator>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QStandardItemModel>
#include <QVBoxLayout>

#include "app/gui/field_widgets.h"
#include "app/gui/plain_text.h"
#include "app/gui/workspace.h"
#include "core/format.h"
#include "core/shown_name.h"

namespace cs::gui {

using plan::Control;

namespace {

QString q(std::string_view s) {
  return QString::fromUtf8(s.data(), int(s.size()));
}
const QColor kBad(0xd0, 0x30, 0x30);
const QColor kTight(0xc0, 0x70, 0x00);

// The label a value has when the planner offered no options yet.
QString valueLabel(Control c, int value) {
  switch (c) {
    case Control::sequence_parallel:
    case Control::flash_attention:
    case Control::overlap_grad_reduce:
      return value ? QObject::tr("on") : QObject::tr("off");
    case Control::recompute:
      return q(to_string(Recompute(value)));
    case Control::precision:
      return q(to_string(Precision(value)));
    default:
      return QString::number(value);
  }
}

}  // namespace

int controlValue(const ParallelPlan& p, const PrecisionPlan& precision, Control c) {
  switch (c) {
    case Control::tp:
      return p.tp;
    case Control::pp:
      return p.pp;
    case Control::dp:
      return p.dp;
    case Control::virtual_stages:
      return p.virtual_stages;
    case Control::sequence_parallel:
      return p.sequence_parallel ? 1 : 0;
    case Control::zero_stage:
      return p.zero_stage;
    case Control::micro_batch:
      return p.micro_batch;
    case Control::global_batch:
      return p.global_batch;
    case Control::recompute:
      return int(p.recompute);
    case Control::precision:
      return int(precision.compute);
    case Control::flash_attention:
      return p.flash_attention ? 1 : 0;
    case Control::overlap_grad_reduce:
      return p.overlap_grad_reduce ? 1 : 0;
  }
  return 0;
}

QString controlLabel(Control c) {
  switch (c) {
    case Control::tp:
      return QObject::tr("&Tensor parallel (TP)");
    case Control::pp:
      return QObject::tr("&Pipeline stages (PP)");
    case Control::dp:
      return QObject::tr("&Data parallel (DP)");
    case Control::virtual_stages:
      return QObject::tr("Virtual stages");
    case Control::sequence_parallel:
      return QObject::tr("Sequence parallel");
    case Control::zero_stage:
      return QObject::tr("&ZeRO stage");
    case Control::micro_batch:
      return QObject::tr("&Micro-batch");
    case Control::global_batch:
      return QObject::tr("&Global batch");
    case Control::recompute:
      return QObject::tr("&Recomputation");
    case Control::precision:
      return QObject::tr("Pre&cision");
    case Control::flash_attention:
      return QObject::tr("Fused attention");
    case Control::overlap_grad_reduce:
      return QObject::tr("Gradient reduction in backward");
  }
  return {};
}

PlanPanel::PlanPanel(Workspace* workspace, AnalysisService* analysis, QWidget* parent)
    : QWidget(parent), workspace_(workspace), analysis_(analysis) {
  setObjectName(QStringLiteral("planPanel"));
  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);

  name_ = new QLineEdit;
  name_->setObjectName(QStringLiteral("planName"));
  // Well within the project reader's bound on names (kMaxLabelCharacters),
  // with room for the number a copy's name gains.
  name_->setMaxLength(1000);
  connect(name_, &QLineEdit::editingFinished, this, [this] {
    Project after = workspace_->project();
    ProjectPlan* p = after.current();
    // A pasted tab, newline or escape code reads as a space: the project
    // reader refuses them in names (the project saved would not open).
    QString name = name_->text();
    for (QChar& c : name) {
      if (c.unicode() < 0x20 || c.unicode() == 0x7f) c = u' ';
    }
    name = name.trimmed();
    // Only a name typed for this plan (refresh() shows the plan's own name
    // once the plan or its name changes under the field).
    if (!p || !name_->isModified() || after.current_plan != name_plan_) return;
    if (name.isEmpty() || name.toStdString() == p->name) return;
    // Runs are recorded with their plan's name: two plans of one name could
    // not be told apart in the runs' list.
    for (const ProjectPlan& other : after.plans) {
      if (&other != p && other.name == name.toStdString()) {
        emit workspace_->message(
            tr("Another plan is named %1: the runs' list tells plans apart by name. The plan "
               "keeps its name.")
                .arg(name),
            MessageLevel::warning);
        name_->setText(QString::fromStdString(p->name));
        name_->setModified(false);
        return;
      }
    }
    p->name = name.toStdString();
    workspace_->edit(tr("Rename plan"), std::move(after));
  });
  form->addRow(tr("Plan"), name_);

  cluster_ = new QComboBox;
  cluster_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  cluster_->setMinimumContentsLength(12);
  cluster_->setObjectName(QStringLiteral("planCluster"));
  workload_ = new QComboBox;
  workload_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  workload_->setMinimumContentsLength(12);
  workload_->setObjectName(QStringLiteral("planWorkload"));
  connect(cluster_, &QComboBox::activated, this, [this](int) {
    Project after = workspace_->project();
    if (!after.current()) return;
    after.current()->cluster = cluster_->currentData().toString().toStdString();
    workspace_->edit(tr("Use cluster %1").arg(cluster_->currentText()), std::move(after));
  });
  connect(workload_, &QComboBox::activated, this, [this](int) {
    Project after = workspace_->project();
    if (!after.current()) return;
    after.current()->workload = workload_->currentData().toString().toStdString();
    workspace_->edit(tr("Use workload %1").arg(workload_->currentText()), std::move(after));
  });
  form->addRow(tr("Cluster"), cluster_);
  form->addRow(tr("Workload"), workload_);
  shape_ = new QLabel;
  shape_->setObjectName(QStringLiteral("planShape"));
  shape_->setWordWrap(true);
  form->addRow(shape_);

  for (int i = 0; i < kControlCount; ++i) {
    const auto c = Control(i);
    auto* box = new QComboBox;
    box->setObjectName(QStringLiteral("control_") + q(plan::to_string(c)));
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(6);
    if (c == Control::global_batch) {
      box->setEditable(true);
      box->setInsertPolicy(QComboBox::NoInsert);
      box->lineEdit()->setValidator(new QIntValidator(1, 1 << 30, box));
      // On Enter and when the focus leaves: a batch typed and left (Tab, a
      // click on another control) stayed in the box while the estimate was
      // still the old batch's.
      connect(box->lineEdit(), &QLineEdit::editingFinished, this, [this, box, c] {
        if (refreshing_) return;
        bool ok = false;
        const int v = box->currentText().toInt(&ok);
        if (ok) setControl(c, v);
      });
    }
    connect(box, &QComboBox::activated, this, [this, box, c](int index) {
      if (refreshing_) return;
      bool ok = false;
      const int v = box->itemData(index).toInt(&ok);
      if (ok) setControl(c, v);
    });
    auto* reason = new QLabel;
    reason->setObjectName(QStringLiteral("reason_") + q(plan::to_string(c)));
    reason->setWordWrap(true);
    QFont small = reason->font();
    small.setPointSizeF(small.pointSizeF() * 0.9);
    reason->setFont(small);
    auto* cell = new QWidget;
    auto* v = new QVBoxLayout(cell);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(1);
    v->addWidget(box);
    v->addWidget(reason);
    auto* label = new QLabel(controlLabel(c));
    label->setBuddy(box);
    roomForMnemonic(label);
    form->addRow(label, cell);
    boxes_[std::size_t(i)] = box;
    reasons_[std::size_t(i)] = reason;
  }

  problems_ = new QLabel;
  problems_->setObjectName(QStringLiteral("planProblems"));
  problems_->setWordWrap(true);
  problems_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // Rich text always: the lines are escaped HTML, and one line alone (no
  // <br>) was taken for plain text ("needs tp &gt;= 2").
  problems_->setTextFormat(Qt::RichText);

  auto* inner = new QWidget;
  auto* v = new QVBoxLayout(inner);
  v->addLayout(form);
  v->addWidget(problems_);
  v->addStretch();
  auto* scroll = new QScrollArea;
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(scroll);

  connect(workspace_, &Workspace::projectChanged, this, &PlanPanel::refresh);
  connect(analysis_, &AnalysisService::analysed, this, &PlanPanel::showAnalysis);
  refresh();
  if (analysis_->latest()) showAnalysis(analysis_->latest());
}

void PlanPanel::setControl(Control c, int value) {
  Project after = workspace_->project();
  ProjectPlan* p = after.current();
  if (!p) return;
  if (controlValue(p->parallel, p->precision, c) == value) return;
  plan::set_control(p->parallel, p->precision, c, value);  // as its options were tried
  workspace_->edit(tr("Set %1 to %2").arg(controlLabel(c).remove('&'), valueLabel(c, value)),
                   std::move(after));
}

void PlanPanel::refresh() {
  const Project& project = workspace_->project();
  const ProjectPlan* p = project.current();
  setEnabled(p != nullptr);
  refreshing_ = true;
  // The lists change rarely; rebuilt only when they do.
  auto fill = [](QComboBox* box, const auto& items) {
    bool same = box->count() == int(items.size());
    for (int i = 0; same && i < box->count(); ++i) {
      const auto& item = items[std::size_t(i)];
      same = box->itemData(i).toString() == q(item.name) && box->itemText(i) == q(shown_name(item));
    }
    if (same) return;
    box->clear();
    for (const auto& item : items) {
      box->addItem(q(shown_name(item)), q(item.name));
    }
  };
  fill(cluster_, project.clusters);
  fill(workload_, project.workloads);
  if (!p) {
    name_->clear();
    refreshing_ = false;
    return;
  }
  // The user's typing is kept while the field still names the plan it was
  // typed for. Once another plan is shown (Ctrl+PgDown, a new plan) or this
  // one's name changes (Undo from the toolbar, which leaves the focus in
  // the field), the field shows the plan's name: the text typed for one plan
  // renamed the next, and an undone rename was made again as the field lost
  // the focus.
  const bool typing = name_->hasFocus() && name_->isModified() &&
                      project.current_plan == name_plan_ && p->name == name_shown_;
  if (!typing) {
    name_->setText(q(p->name));
    name_plan_ = project.current_plan;
    name_shown_ = p->name;
  }
  cluster_->setCurrentIndex(cluster_->findData(q(p->cluster)));
  workload_->setCurrentIndex(workload_->findData(q(p->workload)));
  // Show the new values at once; the options follow with the analysis.
  for (int i = 0; i < kControlCount; ++i) {
    QComboBox* box = boxes_[std::size_t(i)];
    const int value = controlValue(p->parallel, p->precision, Control(i));
    const int index = box->findData(value);
    if (index >= 0) {
      box->setCurrentIndex(index);
    } else {
      box->addItem(valueLabel(Control(i), value), value);
      box->setCurrentIndex(box->count() - 1);
    }
  }
  const Cluster* cluster = project.current_cluster();
  const int used = p->parallel.world_size();
  const int total = cluster ? cluster->total_gpus() : 0;
  shape_->setText(tr("%1 × %2 × %3 = %4 of %5 GPUs · %6 micro-batches per step")
                      .arg(p->parallel.dp)
                      .arg(p->parallel.tp)
                      .arg(p->parallel.pp)
                      .arg(used)
                      .arg(total)
                      .arg(p->parallel.dp > 0 && p->parallel.micro_batch > 0
                               ? QString::number(double(p->parallel.global_batch) /
                                                     (double(p->parallel.dp) *
                                                      p->parallel.micro_batch),
                                                 'g', 4)
                               : QStringLiteral("?")));
  refreshing_ = false;
}

void PlanPanel::showAnalysis(const std::shared_ptr<const PlanAnalysis>& a) {
  const ProjectPlan* p = workspace_->project().current();
  if (!a || !p || !a->has_plan) {
    problems_->setText(a ? q(a->error).toHtmlEscaped() : QString());
    return;
  }
  refreshing_ = true;
  for (int i = 0; i < kControlCount; ++i) {
    const auto c = Control(i);
    QComboBox* box = boxes_[std::size_t(i)];
    QLabel* reason = reasons_[std::size_t(i)];
    const auto& options = a->optionsOf(c);
    const int current = controlValue(a->plan.parallel, a->plan.precision, c);

    // The items: rebuilt only when the options changed (after most edits,
    // most controls offer the same values for the same reasons).
    auto& shown = shown_options_[std::size_t(i)];
    const bool same = shown.size() == options.size() &&
                      std::equal(shown.begin(), shown.end(), options.begin(),
                                 [](const plan::ControlOption& x, const plan::ControlOption& y) {
                                   return x.value == y.value && x.valid == y.valid &&
                                          x.fits == y.fits && x.label == y.label &&
                                          x.reason == y.reason;
                                 });
    int valid = 0;
    int fitting = 0;
    QStringList why_not;
    for (const plan::ControlOption& o : options) {
      valid += o.valid ? 1 : 0;
      fitting += o.fits ? 1 : 0;
      if (!o.valid || !o.fits) why_not << QStringLiteral("%1: %2").arg(q(o.label), q(o.reason));
    }
    if (!same || box->findData(current) < 0) {
      shown = options;
      box->clear();
      auto* model = qobject_cast<QStandardItemModel*>(box->model());
      for (const plan::ControlOption& o : options) {
        QString text = q(o.label);
        if (!o.valid) {
          text += QStringLiteral("  ✗ ") + q(o.reason);
        } else if (!o.fits) {
          text += QStringLiteral("  ⚠ ") + q(o.reason);
        }
        box->addItem(text, o.value);
        QStandardItem* item = model ? model->item(box->count() - 1) : nullptr;
        if (!item) continue;
        item->setToolTip(o.reason.empty() ? tr("valid, fits in memory") : q(o.reason));
        if (!o.valid) {
          item->setFlags(item->flags() & ~Qt::ItemIsEnabled);
        } else if (!o.fits) {
          item->setForeground(kTight);
        }
      }
      if (box->findData(current) < 0) {
        box->addItem(valueLabel(c, current), current);
        shown.clear();  // an extra item: rebuild next time
      }
      box->setToolTip(why_not.isEmpty()
                          ? tr("Every value is valid and fits")
                          : plainToolTip(tr("Why the others are not:\n") + why_not.join('\n')));
      reason->setToolTip(plainToolTip(why_not.join('\n')));
    }
    box->setCurrentIndex(box->findData(current));
    if (c == Control::global_batch) box->setEditText(QString::number(current));

    // The line under it: the current value's own problem, else how many
    // values are open.
    QString problem;
    const std::string pointer(plan::json_pointer(c));
    for (const Problem& pr : a->problems) {
      if (pr.pointer == pointer) problem = q(pr.message);
    }
    const bool bad = !problem.isEmpty();
    // While another control has a problem, no value's memory is known.
    const QString text =
        bad               ? QStringLiteral("✗ ") + problem
        : options.empty() ? QString()
        : !a->problems.empty()
            ? tr("%1 of %2 values valid; what fits, once the plan's problem is fixed")
                  .arg(valid)
                  .arg(options.size())
            : tr("%1 of %2 values valid, %3 fit").arg(valid).arg(options.size()).arg(fitting);
    reason->setText(text);
    if (reason->property("bad").toBool() != bad) {
      reason->setProperty("bad", bad);
      reason->setStyleSheet(bad ? QStringLiteral("color: #d03030;") : QString());
    }
  }
  refreshing_ = false;

  QStringList lines;
  for (const Problem& pr : a->problems) {
    lines << QStringLiteral("✗ %1: %2").arg(q(pr.pointer), q(pr.message)).toHtmlEscaped();
  }
  if (!a->memory.message.empty())
    lines << (QStringLiteral("⚠ ") + q(a->memory.message)).toHtmlEscaped();
  if (a->estimate) {
    for (const std::string& note : a->estimate->notes)
      lines << ("• " + q(note)).toHtmlEscaped();
  }
  problems_->setText(lines.join(QStringLiteral("<br>")));
}

}  // namespace cs::gui
