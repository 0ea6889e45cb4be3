#include "app/gui/critical_path_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <memory>
#include <string>
#include <vector>

#include <QtConcurrent/QtConcurrentRun>

#include "app/gui/plain_text.h"
#include "core/format.h"
#include "core/kernel_names.h"
#include "core/trace_analysis.h"
#include "core/trace_critical_path.h"
#include "core/trace_reader.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

QTableWidget* make_table(QWidget* parent, const char* name, const QStringList& header) {
  auto* t = new QTableWidget(0, int(header.size()), parent);
  t->setObjectName(QString::fromLatin1(name));
  t->setHorizontalHeaderLabels(header);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->verticalHeader()->hide();
  t->horizontalHeader()->setStretchLastSection(true);
  return t;
}

QTableWidgetItem* number_item(const QString& text, double value) {
  auto* item = new QTableWidgetItem(text);
  item->setData(Qt::UserRole, value);
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

struct Computed {
  QString error;
  trace::CriticalPathSummary summary;
  std::vector<QString> names;  // of summary.operations, in order
};

}  // namespace

CriticalPathView::CriticalPathView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("critical_path_summary"));
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);
  layout->addWidget(summary_);
  auto* split = new QSplitter(Qt::Horizontal, this);
  parts_ = make_table(split, "critical_path_parts", {tr("Part"), tr("Per step"), tr("Share")});
  ranks_ = make_table(split, "critical_path_ranks", {tr("Rank"), tr("Per step"), tr("Share")});
  operations_ = make_table(split, "critical_path_operations",
                           {tr("Operation"), tr("Part"), tr("Count"), tr("Per step"), tr("Share")});
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 1);
  split->setStretchFactor(2, 4);
  layout->addWidget(split, 1);
  summary_->setText(tr("No run is open."));
}

void CriticalPathView::setStore(const QString& path) {
  const std::uint64_t job = ++job_;
  for (QTableWidget* t : {parts_, ranks_, operations_})
    t->setRowCount(0);
  if (path.isEmpty()) {
    summary_->setText(tr("No run is open."));
    return;
  }
  summary_->setText(tr("Finding each step's critical path…"));
  QtConcurrent::run(&jobs_, [store = path.toStdString()] {
    Computed out;
    auto reader = trace::TraceReader::open(store);
    if (!reader) {
      out.error = q(reader.message());
      return out;
    }
    auto sum = trace::summarize_critical_paths(**reader);
    if (!sum) {
      out.error = q(sum.message());
      return out;
    }
    out.summary = std::move(sum).value();
    for (const auto& op : out.summary.operations)
      out.names.push_back(q((*reader)->string(op.name)));
    return out;
  }).then(this, [this, job](const Computed& out) {
    if (job != job_) return;  // another store was opened since
    if (!out.error.isEmpty()) {
      summary_->setText(tr("No critical path: %1").arg(out.error));
      emit ready(out.error);
      return;
    }
    const trace::CriticalPathSummary& sum = out.summary;
    if (sum.steps == 0) {
      const QString why = tr("the run records no events");
      summary_->setText(tr("No critical path: %1").arg(why));
      emit ready(why);
      return;
    }
    summary_->setText(
        tr("The chain of operations, across the ranks, that set each step's length (HTA's "
           "critical path): where a collective or a pipeline receive waited, the path goes on "
           "through the rank it waited for, so waiting is never on it. Mean of %1; the mean step "
           "%2.")
            .arg(q(trace::describe_steps(sum.steps, sum.warm_up)),
                 q(format_seconds(sum.step_ns * 1e-9))));
    const auto share = [&](double ns) {
      const double percent = sum.step_ns > 0 ? 100.0 * ns / sum.step_ns : 0.0;
      return number_item(q(format_fixed(percent, 1)) + QStringLiteral(" %"), percent);
    };
    const auto time = [](double ns) { return number_item(q(format_seconds(ns * 1e-9)), ns); };
    parts_->setRowCount(int(sum.parts.size()));
    for (int row = 0; row < int(sum.parts.size()); ++row) {
      const auto& [part, ns] = sum.parts[std::size_t(row)];
      auto* name = new QTableWidgetItem(q(std::string(part)));
      name->setToolTip(part == "memory" ? tr("copies and sets") : q(trace::describe_part(part)));
      parts_->setItem(row, 0, name);
      parts_->setItem(row, 1, time(ns));
      parts_->setItem(row, 2, share(ns));
    }
    ranks_->setRowCount(int(sum.ranks.size()));
    for (int row = 0; row < int(sum.ranks.size()); ++row) {
      const auto& [rank, ns] = sum.ranks[std::size_t(row)];
      ranks_->setItem(row, 0, number_item(QString::number(rank), rank));
      ranks_->setItem(row, 1, time(ns));
      ranks_->setItem(row, 2, share(ns));
    }
    operations_->setRowCount(int(sum.operations.size()));
    for (int row = 0; row < int(sum.operations.size()); ++row) {
      const auto& op = sum.operations[std::size_t(row)];
      const QString& full = out.names[std::size_t(row)];
      // Whole where it is short ("dp all-reduce" has no return type to drop);
      // a long kernel name without its return type and parameters, and
      // either no longer than the tables show a name (elidedName).
      const std::string whole = full.toStdString();
      auto* name = new QTableWidgetItem(
          display_width(whole) <= 60 ? full : elidedName(trace::kernel_short_name(whole)));
      name->setToolTip(plainToolTip(elidedName(full)));
      operations_->setItem(row, 0, name);
      operations_->setItem(row, 1, new QTableWidgetItem(q(std::string(op.part))));
      operations_->setItem(row, 2, number_item(QString::number(op.count), double(op.count)));
      operations_->setItem(row, 3, time(op.per_step_ns));
      operations_->setItem(row, 4, share(op.per_step_ns));
    }
    for (QTableWidget* t : {parts_, ranks_, operations_})
      t->resizeColumnsToContents();
    emit ready({});
  });
}

CriticalPathView::~CriticalPathView() {
  jobs_.waitForDone();
}

}  // namespace cs::gui
