#include "app/gui/workload_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QVBoxLayout>

#include "app/gui/field_widgets.h"
#include "app/gui/workspace.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/shown_name.h"
#include "planners/formulas.h"
#include "planners/seed_formulas.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

constexpr int kOpenFileItem = 1;  // of the preset list: "Open a workload file…"

struct FieldSpec {
  const char* pointer;
  const char* label;
  FieldEdit::Kind kind;
  bool transformer;  // shown for transformers, else for generic models
};

constexpr FieldSpec kFields[] = {
    {"/display_name", "Name", FieldEdit::Kind::text, true},
    {"/layers", "&Layers", FieldEdit::Kind::integer, true},
    {"/hidden", "&Hidden size", FieldEdit::Kind::integer, true},
    {"/heads", "Attention heads", FieldEdit::Kind::integer, true},
    {"/kv_heads", "KV heads", FieldEdit::Kind::integer, true},
    {"/ffn_hidden", "FFN size", FieldEdit::Kind::integer, true},
    {"/seq_len", "&Sequence length", FieldEdit::Kind::integer, true},
    {"/vocab", "Vocabulary", FieldEdit::Kind::integer, true},
    {"/training_tokens", "Tokens to train", FieldEdit::Kind::number, true},
    {"/parameters", "Parameters", FieldEdit::Kind::number, false},
    {"/forward_flops_per_sample", "Forward FLOPs / sample", FieldEdit::Kind::number, false},
    {"/activation_bytes_per_sample", "Activation bytes / sample", FieldEdit::Kind::number, false},
    {"/dataset_samples", "Samples in the data set", FieldEdit::Kind::number, false},
    {"/epochs", "Epochs", FieldEdit::Kind::number, false},
};

}  // namespace

QString WorkloadPanel::figuresHtml(const Workload& w) {
  const double params = parameter_count(w);
  QString rows;
  auto row = [&rows](const QString& k, const QString& v) {
    rows += QStringLiteral("<tr><td>%1</td><td align=right><b>%2</b></td></tr>").arg(k, v);
  };
  row(tr("Parameters"), q(format_count(params)));
  if (w.kind == WorkloadKind::transformer) {
    const TransformerShape& s = w.transformer;
    // Training FLOPs of one token, of this shape (grouped-query attention,
    // the MLP's width, gated or not): what the planner's MFU counts.
    const double per_token = plan::model_flops_per_token(s);
    row(tr("Training FLOPs per token"), q(format_rate(per_token, "FLOP")));
    row(tr("  forward only"), q(format_rate(per_token / 3, "FLOP")));
    // P counts every parameter, the embedding too, as `clusterscope plan`'s
    // 6PD does (docs/planner.md); Kaplan et al.'s N leaves the embedding out,
    // so "6N (Kaplan et al.)" named a larger figure than theirs.
    row(tr("  6P (P: every parameter)"), q(format_rate(plan::six_pd_flops(params, 1), "FLOP")));
    if (w.training_tokens > 0) {
      row(tr("Training FLOPs, all tokens"), q(format_rate(per_token * w.training_tokens, "FLOP")));
    }
  } else {
    row(tr("Training FLOPs per sample"),
        q(format_rate(plan::training_flops(w.generic.forward_flops_per_sample, 1), "FLOP")));
    const double samples = training_samples(w);
    if (samples > 0) {
      row(tr("Training FLOPs, all epochs"),
          q(format_rate(plan::training_flops(w.generic.forward_flops_per_sample, samples),
                        "FLOP")));
    }
  }
  return QStringLiteral("<table cellspacing=1 width=100%>%1</table>").arg(rows);
}

WorkloadPanel::WorkloadPanel(Workspace* workspace, QWidget* parent)
    : QWidget(parent), workspace_(workspace) {
  setObjectName(QStringLiteral("workloadPanel"));
  preset_ = new QComboBox;
  preset_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  preset_->setMinimumContentsLength(12);
  preset_->setObjectName(QStringLiteral("workloadPreset"));
  fillPresetList();
  // Presets read again (a calibration saved some) are offered at once.
  connect(workspace_, &Workspace::presetsChanged, this, &WorkloadPanel::fillPresetList);
  connect(preset_, &QComboBox::activated, this, [this](int index) {
    preset_->setCurrentIndex(0);
    if (index == kOpenFileItem) {
      const QString path = QFileDialog::getOpenFileName(
          this, tr("Open a workload"), {}, tr("Workload or plan JSON (*.json);;All files (*)"));
      if (!path.isEmpty()) openWorkloadFile(path);
    } else if (index > kOpenFileItem) {
      applyPreset(preset_->itemData(index).toString());
    }
  });
  copy_ = new QPushButton(tr("Copy for this plan"));
  copy_->setObjectName(QStringLiteral("workloadCopy"));
  connect(copy_, &QPushButton::clicked, this, [this] { copyForCurrentPlan(); });

  auto* form = form_ = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  for (const FieldSpec& spec : kFields) {
    auto* f = new FieldEdit(QString::fromLatin1(spec.pointer), spec.kind);
    f->setProperty("transformer", spec.transformer);
    fields_[f->pointer()] = f;
    connect(f, &FieldEdit::edited, this, [this](const QString& pointer, const QString& value) {
      edit(tr("Edit workload %1").arg(pointer.mid(1).replace('_', ' ')), pointer, value, true);
    });
    addRow(form, tr(spec.label), f);
  }
  gated_ = new QCheckBox(tr("Gated MLP (SwiGLU)"));
  gated_->setObjectName(QStringLiteral("/gated_mlp"));
  tied_ = new QCheckBox(tr("LM head tied to the embedding"));
  tied_->setObjectName(QStringLiteral("/tied_embeddings"));
  dropout_ = new QCheckBox(tr("Dropout (its masks kept for backward)"));
  dropout_->setObjectName(QStringLiteral("/dropout"));
  dropout_->setToolTip(
      tr("GPT and BERT train with dropout after attention and the MLP; "
         "LLaMA trains without"));
  for (QCheckBox* box : {gated_, tied_, dropout_}) {
    connect(box, &QCheckBox::toggled, this, [this, box](bool on) {
      if (refreshing_) return;
      // Named with the state it is put in: "Undo Dropout" said neither which.
      edit(tr("%1: %2").arg(box->text(), on ? tr("on") : tr("off")), box->objectName(),
           on ? QStringLiteral("true") : QStringLiteral("false"), false);
    });
    form->addRow(box);
  }

  problem_ = new QLabel;
  problem_->setWordWrap(true);
  problem_->setTextFormat(Qt::PlainText);
  problem_->setStyleSheet(QStringLiteral("color: #d03030;"));
  problem_->setVisible(false);
  figures_ = new QLabel;
  figures_->setObjectName(QStringLiteral("workloadFigures"));
  figures_->setTextFormat(Qt::RichText);

  auto* inner = new QWidget;
  auto* v = new QVBoxLayout(inner);
  auto* preset_row = new QHBoxLayout;
  preset_row->addWidget(preset_, 1);
  preset_row->addWidget(copy_);
  v->addLayout(preset_row);
  v->addLayout(form);
  v->addWidget(problem_);
  v->addWidget(figures_);
  v->addStretch();
  auto* scroll = new QScrollArea;
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(scroll);

  connect(workspace_, &Workspace::projectChanged, this, &WorkloadPanel::refresh);
  refresh();
}

void WorkloadPanel::fillPresetList() {
  const PresetCatalog& catalog = workspace_->catalog();
  preset_->clear();
  preset_->addItem(tr("Load a model preset…"));
  preset_->addItem(tr("Open a workload file…"));  // kOpenFileItem
  preset_->setItemData(kOpenFileItem,
                       tr("A workload JSON document, or a plan's workload (as clusterscope "
                          "plan --model FILE reads them)"),
                       Qt::ToolTipRole);
  for (const Workload& m : catalog.models())
    addPresetItem(preset_, catalog, "workload", m.name, q(shown_name(m)));
}

FieldEdit* WorkloadPanel::field(const QString& pointer) const {
  auto it = fields_.find(pointer);
  return it == fields_.end() ? nullptr : it->second;
}

bool WorkloadPanel::applyPreset(const QString& name) {
  if (!workspace_->project().current_workload()) return false;
  const Workload* preset = workspace_->catalog().find_model(name.toStdString());
  if (!preset) {
    problem_->setText(q(workspace_->catalog().unknown_name_message(
        "model preset", name.toStdString(), workspace_->catalog().model_names())));
    problem_->setVisible(true);
    return false;
  }
  use(*preset, tr("Load model preset %1").arg(name));
  return true;
}

bool WorkloadPanel::openWorkloadFile(const QString& path) {
  if (!workspace_->project().current_workload()) return false;
  auto fail = [this](const std::string& why) {
    problem_->setText(tr("Could not open the workload: %1").arg(q(why)));
    problem_->setVisible(true);
    return false;
  };
  // Named as given, as the CLI names --model FILE; errors say where in it.
  if (Status s = refuse_named_pipe(path.toStdString(), "workload"); !s) return fail(s.message());
  auto w = workload_from_file(path.toStdString(), workspace_->catalog());
  if (!w) return fail(w.message());
  use(std::move(w).value(), tr("Open workload %1").arg(QFileInfo(path).fileName()));
  return true;
}

void WorkloadPanel::use(Workload w, const QString& text) {
  if (!workspace_->project().current_workload()) return;
  Project after = workspace_->project();
  use_for_current_plan(after, std::move(w));
  workspace_->edit(text, std::move(after));
}

bool WorkloadPanel::copyForCurrentPlan() {
  const Project& project = workspace_->project();
  const Workload* current = project.current_workload();
  if (!current) return false;
  const QString text =
      tr("Copy workload %1 for plan %2").arg(q(shown_name(*current)), q(project.current()->name));
  Project after = project;
  copy_workload_for_current_plan(after);
  workspace_->edit(text, std::move(after));
  return true;
}

void WorkloadPanel::edit(const QString& text, const QString& pointer, const QString& value,
                         bool typing) {
  const Project& project = workspace_->project();
  const Workload* current = project.current_workload();
  if (!current) return;
  std::vector<Problem> problems;
  auto edited = edit_workload(*current, {{pointer.toStdString(), value.toStdString()}}, &problems);
  if (!edited) {
    // Each problem at its own field; the edited field says why its value was
    // refused even when the rule broken sits at another ("/hidden: ...").
    QStringList general;
    QStringList elsewhere;
    bool own = false;
    for (const Problem& p : problems) {
      const QString line =
          QStringLiteral("%1: %2").arg(p.pointer.empty() ? "/" : q(p.pointer), q(p.message));
      if (FieldEdit* f = field(q(p.pointer))) {
        f->setProblem(q(p.message));
      } else {
        general << line;
      }
      if (q(p.pointer) == pointer) {
        own = true;
      } else {
        elsewhere << line;
      }
    }
    if (FieldEdit* f = field(pointer); f && !own) f->setProblem(elsewhere.join('\n'));
    problem_->setText(general.join('\n'));
    problem_->setVisible(!general.isEmpty());
    return;
  }
  if (FieldEdit* f = field(pointer)) f->setProblem({});
  problem_->setVisible(false);
  std::string before_json;
  std::string after_json;
  workload_fields(*current, {}, &before_json);
  workload_fields(edited.value(), {}, &after_json);
  if (before_json == after_json) return;  // the value it already had: no undo step
  Project after = project;
  after.workloads[std::size_t(project.workload_index(current->name))] = std::move(edited).value();
  workspace_->edit(
      text, std::move(after),
      typing ? QStringLiteral("workload %1 %2").arg(q(current->name), pointer) : QString());
}

void WorkloadPanel::refresh() {
  const Workload* w = workspace_->project().current_workload();
  setEnabled(w != nullptr);
  if (!w) {
    shown_.clear();
    figures_->setText(tr("No workload: the project has no plan."));
    return;
  }
  std::vector<std::string> pointers;
  for (const auto& [pointer, f] : fields_)
    pointers.push_back(pointer.toStdString());
  std::string whole;
  const std::vector<std::string> values = workload_fields(*w, pointers, &whole);
  problem_->setVisible(false);  // a refused edit's message lasts until the next change
  const Project& project = workspace_->project();
  const int sharing = plans_using_workload(project, w->name);
  copy_->setEnabled(sharing > 1);
  copy_->setToolTip(sharing > 1 ? tr("%1 plans use this workload: an edit changes each. Gives "
                                     "plan %2 a copy of its own to edit.")
                                      .arg(sharing)
                                      .arg(q(project.current()->name))
                                : tr("Only this plan uses this workload."));
  if (whole == shown_) return;  // an edit elsewhere: nothing here changed
  shown_ = whole;
  refreshing_ = true;
  const bool transformer = w->kind == WorkloadKind::transformer;
  std::size_t i = 0;
  for (auto& [pointer, f] : fields_) {
    const std::string& value = values[i++];
    const bool shown = pointer == QLatin1String("/display_name") ||
                       f->property("transformer").toBool() == transformer;
    form_->setRowVisible(f, shown);
    if (!(f->lineEdit()->hasFocus() && f->hasProblem())) f->setProblem({});
    f->showValue(q(value));
  }
  form_->setRowVisible(gated_, transformer);
  form_->setRowVisible(tied_, transformer);
  form_->setRowVisible(dropout_, transformer);
  gated_->setChecked(w->transformer.gated_mlp);
  tied_->setChecked(w->transformer.tied_embeddings);
  dropout_->setChecked(w->transformer.dropout);
  refreshing_ = false;
  problem_->setVisible(false);
  figures_->setText(figuresHtml(*w));
}

}  // namespace cs::gui
