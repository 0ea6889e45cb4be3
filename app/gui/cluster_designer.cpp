#include "app/gui/cluster_designer.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "app/gui/field_widgets.h"
#include "app/gui/topology_view.h"
#include "app/gui/workspace.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/presets.h"
#include "core/shown_name.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}
QString jsonString(const QString& s) {
  return '"' + s + '"';
}  // preset names are plain ASCII

QString totalsHtml(const Cluster& c) {
  const ClusterTotals t = totals(c);
  auto rate = [](double v) { return q(format_rate(v, "FLOP/s")); };
  auto bw = [](double v) { return q(format_rate(v, "B/s")); };
  QString peak;
  const std::pair<const char*, double> rates[] = {{"FP8", t.peak.fp8},   {"BF16", t.peak.bf16},
                                                  {"FP16", t.peak.fp16}, {"TF32", t.peak.tf32},
                                                  {"FP32", t.peak.fp32}, {"INT8", t.peak.int8}};
  for (const auto& [name, value] : rates) {
    if (value <= 0) continue;
    peak += QStringLiteral("<tr><td>&nbsp;&nbsp;%1</td><td align=right>%2</td></tr>")
                .arg(name, name == std::string_view("INT8") ? q(format_rate(value, "OP/s"))
                                                            : rate(value));
  }
  QString rows;
  auto row = [&rows](const QString& k, const QString& v) {
    rows += QStringLiteral("<tr><td>%1</td><td align=right><b>%2</b></td></tr>").arg(k, v);
  };
  row(QObject::tr("GPUs"), q(format_count(t.gpus)));
  rows += QStringLiteral("<tr><td colspan=2>%1</td></tr>").arg(QObject::tr("Peak, dense")) + peak;
  row(QObject::tr("GPU memory"), q(format_bytes(t.gpu_memory_bytes)));
  if (c.gpus_per_node > 1)
    row(QObject::tr("Per GPU, inside a node"), bw(t.per_gpu_intra_bandwidth));
  if (c.nodes > 1) {
    row(nic_share_capped_by_host_link(c) ? QObject::tr("Per GPU, between nodes (its PCIe link)")
                                         : QObject::tr("Per GPU, between nodes"),
        bw(t.per_gpu_inter_bandwidth));
    row(QObject::tr("Bisection"), bw(t.bisection_bandwidth));
  }
  row(QObject::tr("Power"), q(format_rate(t.power_watts, "W")));
  if (t.price_per_hour > 0) {
    row(QObject::tr("Price"),
        QStringLiteral("$%1 / h").arg(QString::fromStdString(format_count(t.price_per_hour))));
  }
  return QStringLiteral("<table cellspacing=1 width=100%>%1</table>").arg(rows);
}

// The network preset to offer when a cluster grows past one node.
QString defaultNetwork(const PresetCatalog& catalog) {
  if (catalog.find_link("ib-ndr")) return QStringLiteral("ib-ndr");
  for (const Link& l : catalog.links()) {
    if (l.kind == LinkKind::infiniband || l.kind == LinkKind::roce ||
        l.kind == LinkKind::ethernet) {
      return q(l.name);
    }
  }
  return {};
}

// The edits' value at `pointer` (JSON text), or nullptr.
const QString* editAt(const std::vector<std::pair<QString, QString>>& edits, const char* pointer) {
  for (const auto& [p, value] : edits) {
    if (p == QLatin1String(pointer)) return &value;
  }
  return nullptr;
}

// Adds to `edits` what keeps the cluster whole when its shape changes, in
// the same undo step: a network once there is more than one node, and a NIC
// a node for it; a GPU model once nodes hold GPUs, none once they do not;
// and the link between a node's GPUs that another GPU model comes with,
// unless one of the user's own choosing is there, and no price or board
// power of the GPU it replaces (as `--gpu` over a preset). Without them, 2
// nodes of a one-GPU machine were refused for its 0 NICs, GPUs in a
// CPU-only node for its missing link, and RTX 4090s put in a DGX H100 kept
// its NVLink 4 and were costed at its H100 price.
void keepWhole(const Cluster& c, const PresetCatalog& catalog,
               std::vector<std::pair<QString, QString>>& edits) {
  auto count = [&](const char* pointer, int now) {
    bool ok = false;
    const QString* v = editAt(edits, pointer);
    const int n = v ? v->toInt(&ok) : 0;
    return ok ? n : now;
  };
  const int nodes = count("/nodes", c.nodes);
  const int gpus = count("/gpus_per_node", c.gpus_per_node);

  const QString* network = editAt(edits, "/inter_node");
  if (!network && nodes > 1 && !c.inter_node) {
    const QString net = defaultNetwork(catalog);
    if (!net.isEmpty()) edits.push_back({QStringLiteral("/inter_node"), jsonString(net)});
  }
  network = editAt(edits, "/inter_node");
  const bool network_added = network && *network != QLatin1String("null") && !c.inter_node;
  if (network_added && c.nics_per_node == 0 && !editAt(edits, "/nics_per_node")) {
    edits.push_back({QStringLiteral("/nics_per_node"), QString::number(std::max(1, gpus))});
  }

  const QString* gpu_edit = editAt(edits, "/gpu");
  if (!gpu_edit && gpus == 0 && c.gpu) {
    edits.push_back({QStringLiteral("/gpu"), QStringLiteral("null")});
  } else if (!gpu_edit && gpus > 0 && !c.gpu && !catalog.gpus().empty()) {
    edits.push_back({QStringLiteral("/gpu"), jsonString(q(catalog.gpus().front().name))});
  }
  gpu_edit = editAt(edits, "/gpu");
  // Read before the edits grow: a push_back moves them (gpu_edit then
  // pointed at freed memory).
  const bool gpu_removed = gpu_edit && *gpu_edit == QLatin1String("null");
  const GpuSpec* new_gpu = nullptr;
  if (gpu_edit && gpu_edit->startsWith('"')) {
    new_gpu = catalog.find_gpu(gpu_edit->mid(1, gpu_edit->size() - 2).toStdString());
  }
  if (new_gpu && !editAt(edits, "/intra_node") && (gpus > 1 || !c.intra_node.name.empty())) {
    // The new GPU's own, unless the user chose another for the old GPU (a
    // link left from GPUs removed is theirs: H100s out and back as V100s
    // kept NVLink 4).
    const bool chosen =
        c.gpu && !c.intra_node.name.empty() && c.intra_node.name != node_link_preset(*c.gpu);
    const std::string link = node_link_preset(*new_gpu);
    if (!chosen && link != c.intra_node.name && catalog.find_link(link)) {
      edits.push_back({QStringLiteral("/intra_node"), jsonString(q(link))});
    }
  }
  if (c.gpu && (gpu_removed || (new_gpu && new_gpu->name != c.gpu->name))) {
    for (const char* figure : {"/price_per_gpu_hour", "/power_per_gpu_watts"}) {
      if (!editAt(edits, figure)) edits.push_back({QLatin1String(figure), QStringLiteral("0")});
    }
  }
}

// What a part of the cluster is called in its box: its display name, else its name.
template <class Part>
QString shownName(const Part& part) {
  return q(shown_name(part));
}

// The name a part (a GPU, a link) of `preset`'s name has: the preset's while
// its figures are the preset's, else that with kEditedMark, so that an H100
// edited to 40 GiB is not called "NVIDIA H100 SXM5 80GB" (and edited back,
// it is the preset's again). A part that is no preset keeps its name.
template <class Part>
void markIfEdited(Part& part, const Part* preset) {
  if (!preset) return;
  Part as_preset = part;
  as_preset.display_name = preset->display_name;
  const bool edited = to_json(as_preset) != to_json(*preset);
  part.display_name =
      edited ? label_with_suffix(shown_name(*preset), kEditedMark) : preset->display_name;
}

constexpr int kOpenFileItem = 1;  // of the preset list: "Open a cluster file…"

// The box items of the cluster's own parts (a part from a file, a part
// edited): made for the cluster shown, and picking one again changes nothing.
constexpr int kOwnPartRole = Qt::UserRole + 1;

}  // namespace

ClusterDesigner::ClusterDesigner(Workspace* workspace, QWidget* parent)
    : QWidget(parent), workspace_(workspace) {
  setObjectName(QStringLiteral("clusterDesigner"));

  preset_ = new QComboBox;
  preset_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  preset_->setMinimumContentsLength(12);
  preset_->setObjectName(QStringLiteral("clusterPreset"));
  preset_->setToolTip(tr("Replaces the current cluster with a preset (undoable)"));
  connect(preset_, &QComboBox::activated, this, [this](int index) {
    preset_->setCurrentIndex(0);
    if (index == kOpenFileItem) {
      const QString path = QFileDialog::getOpenFileName(
          this, tr("Open a cluster"), {}, tr("Cluster or plan JSON (*.json);;All files (*)"));
      if (!path.isEmpty()) openClusterFile(path);
    } else if (index > kOpenFileItem) {
      applyPreset(preset_->itemData(index).toString());
    }
  });
  copy_ = new QPushButton(tr("Copy for this plan"));
  copy_->setObjectName(QStringLiteral("clusterCopy"));
  connect(copy_, &QPushButton::clicked, this, [this] { copyForCurrentPlan(); });

  gpu_ = new QComboBox;
  gpu_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  gpu_->setMinimumContentsLength(12);
  gpu_->setObjectName(QStringLiteral("gpuModel"));
  intra_ = new QComboBox;
  intra_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  intra_->setMinimumContentsLength(12);
  intra_->setObjectName(QStringLiteral("intraLink"));
  inter_ = new QComboBox;
  inter_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  inter_->setMinimumContentsLength(12);
  inter_->setObjectName(QStringLiteral("interLink"));
  fillPresetLists();
  auto onCombo = [this](QComboBox* box, const QString& pointer, const QString& what) {
    connect(box, &QComboBox::activated, this, [this, box, pointer, what](int) {
      if (refreshing_) return;
      // The cluster's own part picked again: picked as the preset of its
      // name, it undid the part's edits (and one from a file was refused).
      if (box->currentData(kOwnPartRole).toBool()) return;
      const QString name = box->currentData().toString();
      editFields(tr("Change %1 to %2").arg(what, box->currentText()),
                 {{pointer, name.isEmpty() ? QStringLiteral("null") : jsonString(name)}}, {});
    });
  };
  onCombo(gpu_, QStringLiteral("/gpu"), tr("GPU"));
  onCombo(intra_, QStringLiteral("/intra_node"), tr("node link"));
  onCombo(inter_, QStringLiteral("/inter_node"), tr("network"));

  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  auto add = [&](const QString& label, const char* pointer, FieldEdit::Kind kind,
                 const QString& tip = {}) {
    auto* f = new FieldEdit(QString::fromLatin1(pointer), kind);
    fields_[f->pointer()] = f;
    connect(f, &FieldEdit::edited, this, &ClusterDesigner::onFieldEdited);
    addRow(form, label, f, tip);
  };
  add(tr("Name"), "/display_name", FieldEdit::Kind::text);
  add(tr("&Nodes"), "/nodes", FieldEdit::Kind::integer);
  add(tr("&GPUs per node"), "/gpus_per_node", FieldEdit::Kind::integer);
  addRow(form, tr("GPU model"), gpu_);
  add(tr("GPU memory (GiB)"), "/gpu/memory_gib", FieldEdit::Kind::number);
  addRow(form, tr("Link inside a node"), intra_);
  add(tr("  bandwidth (Gbit/s)"), "/intra_node/bandwidth_gbps", FieldEdit::Kind::number,
      tr("Per direction, per GPU port"));
  add(tr("  latency (µs)"), "/intra_node/latency_us", FieldEdit::Kind::number);
  addRow(form, tr("Network between nodes"), inter_);
  add(tr("  bandwidth (Gbit/s)"), "/inter_node/bandwidth_gbps", FieldEdit::Kind::number,
      tr("Per direction, per NIC"));
  add(tr("  latency (µs)"), "/inter_node/latency_us", FieldEdit::Kind::number);
  add(tr("NICs per node"), "/nics_per_node", FieldEdit::Kind::integer);
  add(tr("Price per GPU-hour ($)"), "/price_per_gpu_hour", FieldEdit::Kind::number);
  add(tr("Power per GPU (W; 0: the TDP)"), "/power_per_gpu_watts", FieldEdit::Kind::number,
      tr("Board power used for energy; 0 uses the GPU's TDP"));

  problem_ = new QLabel;
  problem_->setObjectName(QStringLiteral("clusterProblem"));
  problem_->setWordWrap(true);
  problem_->setTextFormat(Qt::PlainText);
  problem_->setStyleSheet(QStringLiteral("color: #d03030;"));
  problem_->setVisible(false);
  totals_ = new QLabel;
  totals_->setObjectName(QStringLiteral("clusterTotals"));
  totals_->setTextFormat(Qt::RichText);

  auto* top = new QWidget;
  auto* top_layout = new QVBoxLayout(top);
  auto* preset_row = new QHBoxLayout;
  preset_row->addWidget(preset_, 1);
  preset_row->addWidget(copy_);
  top_layout->addLayout(preset_row);
  top_layout->addLayout(form);
  top_layout->addWidget(problem_);
  top_layout->addWidget(totals_);
  top_layout->addStretch();
  auto* scroll = new QScrollArea;
  scroll->setWidget(top);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);

  topology_ = new TopologyView;
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(scroll);
  splitter->addWidget(topology_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(splitter);

  connect(workspace_, &Workspace::projectChanged, this, &ClusterDesigner::refresh);
  // Presets a calibration saved are offered at once (the app had to be
  // restarted for the planner to be given them).
  connect(workspace_, &Workspace::presetsChanged, this, [this] {
    fillPresetLists();
    shown_.clear();  // the boxes select the cluster's parts again
    refresh();
  });
  refresh();
}

FieldEdit* ClusterDesigner::field(const QString& pointer) const {
  auto it = fields_.find(pointer);
  return it == fields_.end() ? nullptr : it->second;
}

bool ClusterDesigner::applyPreset(const QString& name) {
  if (!workspace_->project().current_cluster()) return false;
  auto preset = workspace_->catalog().cluster(name.toStdString());
  if (!preset) {
    problem_->setText(q(preset.message()));
    problem_->setVisible(true);
    return false;
  }
  use(std::move(preset).value(), tr("Load cluster preset %1").arg(name));
  return true;
}

bool ClusterDesigner::openClusterFile(const QString& path) {
  if (!workspace_->project().current_cluster()) return false;
  auto fail = [this](const std::string& why) {
    problem_->setText(tr("Could not open the cluster: %1").arg(q(why)));
    problem_->setVisible(true);
    return false;
  };
  // Named as given, as the CLI names --cluster FILE; errors say where in it.
  if (Status s = refuse_named_pipe(path.toStdString(), "cluster"); !s) return fail(s.message());
  auto c = cluster_from_file(path.toStdString(), workspace_->catalog());
  if (!c) return fail(c.message());
  use(std::move(c).value(), tr("Open cluster %1").arg(QFileInfo(path).fileName()));
  return true;
}

void ClusterDesigner::use(Cluster cluster, const QString& text) {
  if (!workspace_->project().current_cluster()) return;
  Project after = workspace_->project();
  use_for_current_plan(after, std::move(cluster));
  workspace_->edit(text, std::move(after));
}

bool ClusterDesigner::copyForCurrentPlan() {
  const Project& project = workspace_->project();
  const Cluster* current = project.current_cluster();
  if (!current) return false;
  const QString text =
      tr("Copy cluster %1 for plan %2").arg(shownName(*current), q(project.current()->name));
  Project after = project;
  copy_cluster_for_current_plan(after);
  workspace_->edit(text, std::move(after));
  return true;
}

QString recounted_name(const QString& name, int nodes, int gpus, int new_nodes, int new_gpus) {
  QString out = name;
  const auto plural = [](int count, const QString& one) {
    return QStringLiteral("%1 %2%3").arg(count).arg(one).arg(count == 1 ? "" : "s");
  };
  // Whole words only: "14 nodes" is not "4 nodes".
  out.replace(QRegularExpression(QStringLiteral("\\b%1 nodes?\\b").arg(nodes)),
              plural(new_nodes, QStringLiteral("node")));
  out.replace(QRegularExpression(QStringLiteral("\\(%1 GPUs?\\)").arg(gpus)),
              QStringLiteral("(%1)").arg(plural(new_gpus, QStringLiteral("GPU"))));
  return out;
}

void ClusterDesigner::onFieldEdited(const QString& pointer, const QString& value) {
  const Cluster* c = workspace_->project().current_cluster();
  if (!c) return;
  std::vector<std::pair<QString, QString>> edits{{pointer, value}};
  bool ok = false;
  const int n = value.toInt(&ok);
  // A name that counts the nodes or GPUs ("DGX H100 pod, 4 nodes (32
  // GPUs)") counts the new ones: the old count no longer names this cluster.
  if (ok && n > 0 &&
      (pointer == QLatin1String("/nodes") || pointer == QLatin1String("/gpus_per_node"))) {
    const bool nodes = pointer == QLatin1String("/nodes");
    const int new_nodes = nodes ? n : c->nodes;
    const int new_per_node = nodes ? c->gpus_per_node : n;
    const QString name = q(c->display_name);
    const QString renamed = recounted_name(name, c->nodes, c->nodes * c->gpus_per_node, new_nodes,
                                           new_nodes * new_per_node);
    if (renamed != name) edits.push_back({QStringLiteral("/display_name"), jsonString(renamed)});
  }
  const FieldEdit* f = field(pointer);
  const QString label = f ? pointer.mid(1).replace('/', ' ').replace('_', ' ') : pointer;
  editFields(tr("Edit cluster %1").arg(label), std::move(edits),
             QStringLiteral("cluster %1 %2").arg(q(c->name), pointer));
}

void ClusterDesigner::showProblems(const std::vector<Problem>& problems,
                                   const std::vector<std::pair<QString, QString>>& edits) {
  // Each problem at its own field; the edited field says why its value was
  // refused even when the rule broken sits elsewhere ("/inter_node: ...").
  QStringList general;
  QStringList elsewhere;
  for (const Problem& p : problems) {
    const QString line =
        QStringLiteral("%1: %2").arg(p.pointer.empty() ? "/" : q(p.pointer), q(p.message));
    if (FieldEdit* f = field(q(p.pointer))) {
      f->setProblem(q(p.message));
    } else {
      general << line;
    }
    bool edited_here = false;
    for (const auto& [pointer, value] : edits)
      edited_here = edited_here || pointer == q(p.pointer);
    if (!edited_here) elsewhere << line;
  }
  for (const auto& [pointer, value] : edits) {
    FieldEdit* f = field(pointer);
    if (!f) continue;
    bool own = false;
    for (const Problem& p : problems)
      own = own || q(p.pointer) == pointer;
    if (!own) f->setProblem(elsewhere.join('\n'));
  }
  problem_->setText(general.join('\n'));
  problem_->setVisible(!general.isEmpty());
}

void ClusterDesigner::editFields(const QString& text,
                                 std::vector<std::pair<QString, QString>> edits,
                                 const QString& merge_key) {
  const Project& project = workspace_->project();
  const Cluster* current = project.current_cluster();
  if (!current) return;
  keepWhole(*current, workspace_->catalog(), edits);
  std::vector<FieldValue> values;
  for (const auto& [pointer, value] : edits)
    values.push_back({pointer.toStdString(), value.toStdString()});
  std::vector<Problem> problems;
  auto edited = edit_cluster(*current, values, workspace_->catalog(), &problems);
  if (!edited) {
    showProblems(problems, edits);
    return;
  }
  // A part's figures edited: its name says so, as a cluster's name
  // follows its counts (recounted_name).
  auto touched = [&](const QString& part) {
    return std::any_of(edits.begin(), edits.end(), [&](const auto& e) {
      return e.first == part || e.first.startsWith(part + '/');  // not /gpus_per_node
    });
  };
  const PresetCatalog& catalog = workspace_->catalog();
  Cluster& c = edited.value();
  if (c.gpu && touched(QStringLiteral("/gpu"))) markIfEdited(*c.gpu, catalog.find_gpu(c.gpu->name));
  if (touched(QStringLiteral("/intra_node")))
    markIfEdited(c.intra_node, catalog.find_link(c.intra_node.name));
  if (c.inter_node && touched(QStringLiteral("/inter_node")))
    markIfEdited(*c.inter_node, catalog.find_link(c.inter_node->name));
  for (const auto& [pointer, value] : edits) {
    if (FieldEdit* f = field(pointer)) f->setProblem({});
  }
  problem_->setVisible(false);
  std::string before_json;
  std::string after_json;
  cluster_fields(*current, {}, &before_json);
  cluster_fields(edited.value(), {}, &after_json);
  if (before_json == after_json) return;  // the value it already had: no undo step
  Project after = project;
  after.clusters[std::size_t(project.cluster_index(current->name))] = std::move(edited).value();
  workspace_->edit(text, std::move(after), merge_key);
}

void ClusterDesigner::fillPresetLists() {
  const PresetCatalog& catalog = workspace_->catalog();
  for (QComboBox* box : {preset_, gpu_, intra_, inter_})
    box->clear();
  preset_->addItem(tr("Load a preset…"));
  preset_->addItem(tr("Open a cluster file…"));  // kOpenFileItem
  preset_->setItemData(kOpenFileItem,
                       tr("A cluster JSON document, or a plan's cluster (as clusterscope "
                          "plan --cluster FILE reads them)"),
                       Qt::ToolTipRole);
  // As `--cluster this-machine` gives it: its GPUs, detected when loaded.
  preset_->addItem(tr("This machine (its GPUs, detected now)"), q(std::string(kThisMachine)));
  for (const Cluster& c : catalog.clusters())
    addPresetItem(preset_, catalog, "cluster", c.name, shownName(c));
  for (const GpuSpec& g : catalog.gpus())
    addPresetItem(gpu_, catalog, "gpu", g.name, shownName(g));
  inter_->addItem(tr("none (one node)"), QString());
  for (const Link& l : catalog.links()) {
    addPresetItem(intra_, catalog, "link", l.name, shownName(l));
    addPresetItem(inter_, catalog, "link", l.name, shownName(l));
  }
}

void ClusterDesigner::refresh() {
  const Cluster* c = workspace_->project().current_cluster();
  setEnabled(c != nullptr);
  if (!c) {
    shown_.clear();
    totals_->setText(tr("No cluster: the project has no plan."));
    return;
  }
  std::vector<std::string> pointers;
  for (const auto& [pointer, f] : fields_)
    pointers.push_back(pointer.toStdString());
  std::string whole;
  const std::vector<std::string> values = cluster_fields(*c, pointers, &whole);
  problem_->setVisible(false);  // a refused edit's message lasts until the next change
  const Project& project = workspace_->project();
  const int sharing = plans_using_cluster(project, c->name);
  copy_->setEnabled(sharing > 1);
  copy_->setToolTip(sharing > 1 ? tr("%1 plans use this cluster: an edit changes each. Gives "
                                     "plan %2 a copy of its own to edit.")
                                      .arg(sharing)
                                      .arg(q(project.current()->name))
                                : tr("Only this plan uses this cluster."));
  if (whole == shown_) return;  // an edit elsewhere: nothing here changed
  shown_ = whole;
  refreshing_ = true;
  std::size_t i = 0;
  for (auto& [pointer, f] : fields_) {
    const std::string& value = values[i++];
    const bool present = !value.empty() || pointer == QLatin1String("/display_name");
    f->setEnabled(present);
    if (!(f->lineEdit()->hasFocus() && f->hasProblem())) f->setProblem({});
    f->showValue(q(value));
  }
  // The preset's item where the part is the preset as it is (by its name
  // and what it is called), else an item of its own: a part from a file, or
  // one edited ("NVIDIA H100 SXM5 80GB (edited)"; the preset's item showed
  // for an H100 of 40 GiB).
  auto select = [](QComboBox* box, const QString& name, const QString& shown) {
    for (int k = box->count() - 1; k >= 0; --k) {
      if (box->itemData(k, kOwnPartRole).toBool()) box->removeItem(k);  // the last cluster's
    }
    int index = -1;
    for (int k = 0; k < box->count() && index < 0; ++k) {
      if (box->itemData(k).toString() == name &&
          box->itemData(k, kPresetShownRole).toString() == shown)
        index = k;
    }
    if (index < 0 && !name.isEmpty()) {
      box->addItem(shown, name);
      index = box->count() - 1;
      box->setItemData(index, true, kOwnPartRole);
    }
    box->setCurrentIndex(std::max(0, index));
  };
  gpu_->setEnabled(c->gpus_per_node > 0);
  if (c->gpu) select(gpu_, q(c->gpu->name), shownName(*c->gpu));
  select(intra_, q(c->intra_node.name), shownName(c->intra_node));
  select(inter_, c->inter_node ? q(c->inter_node->name) : QString(),
         c->inter_node ? shownName(*c->inter_node) : QString());
  refreshing_ = false;
  problem_->setVisible(false);
  totals_->setText(totalsHtml(*c));
  topology_->setCluster(*c);
}

}  // namespace cs::gui
