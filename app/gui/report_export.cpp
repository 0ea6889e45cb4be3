#include "app/gui/report_export.h"

#include <QBuffer>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTextDocument>

#include "app/gui/analysis.h"
#include "app/gui/estimate_view.h"
#include "app/gui/project.h"
#include "app/gui/stacked_bar.h"
#include "core/format.h"
#include "core/shown_name.h"
#include "core/trace_export.h"

namespace cs::gui {

namespace {

QString q(std::string_view s) {
  return QString::fromUtf8(s.data(), int(s.size()));
}
constexpr double kChartWidth = 720;

using Rows = std::vector<std::pair<QString, QString>>;

template <typename Named>
QString shownName(const Named& x) {
  return q(shown_name(x));
}

// From the cluster as it is: its name is the preset's, which edits of its
// nodes or GPU leave as it was ("DGX H100 pod, 4 nodes" over a 2-node A100
// plan's figures).
QString titleOf(const Plan& p) {
  const Cluster& c = p.cluster;
  const QString on =
      c.gpu ? QObject::tr("%1 × %2 %3").arg(c.nodes).arg(c.gpus_per_node).arg(shownName(*c.gpu))
            : shownName(c);
  return QObject::tr("%1 on %2").arg(shownName(p.workload), on);
}

// The report's title, the plan's name where it has one, and the line under
// it: the model on the cluster (when the title is the name), when the
// report was made (in UTC, as the run report says it) and by what.
struct Heading {
  QString title;
  QString line;
};
Heading headingOf(const Plan& p, const QString& plan_name) {
  const QString made =
      QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")) +
      QStringLiteral(" UTC · ClusterScope " CLUSTERSCOPE_VERSION);
  if (plan_name.trimmed().isEmpty()) return {titleOf(p), made};
  return {plan_name, titleOf(p) + QStringLiteral(" · ") + made};
}

// The hardware and the model the figures are for.
Rows hardwareRows(const Plan& plan) {
  const Cluster& c = plan.cluster;
  Rows rows{{QObject::tr("cluster"), shownName(c)}};
  if (c.gpu) {
    rows.push_back({QObject::tr("GPUs"), QObject::tr("%1 nodes × %2 %3 = %4 (%5 each)")
                                             .arg(c.nodes)
                                             .arg(c.gpus_per_node)
                                             .arg(shownName(*c.gpu))
                                             .arg(c.total_gpus())
                                             .arg(q(format_bytes(c.gpu->memory_bytes)))});
  }
  auto link = [](const Link& l) {
    return QStringLiteral("%1, %2").arg(shownName(l), q(format_rate(l.bandwidth, "B/s")));
  };
  rows.push_back({QObject::tr("inside a node"), link(c.intra_node)});
  if (c.inter_node) rows.push_back({QObject::tr("between nodes"), link(*c.inter_node)});
  if (c.price_per_gpu_hour > 0) {
    rows.push_back({QObject::tr("price per GPU-hour"),
                    QStringLiteral("$%1").arg(c.price_per_gpu_hour, 0, 'f', 2)});
  }
  rows.push_back({QObject::tr("model"), QObject::tr("%1, %2 parameters")
                                            .arg(shownName(plan.workload),
                                                 q(format_count(parameter_count(plan.workload))))});
  return rows;
}

Rows planRows(const Plan& plan) {
  const ParallelPlan& p = plan.parallel;
  return {
      {QObject::tr("GPUs used"),
       QStringLiteral("%1 of %2").arg(p.world_size()).arg(plan.cluster.total_gpus())},
      {QObject::tr("data parallel (DP)"), QString::number(p.dp)},
      {QObject::tr("tensor parallel (TP)"), QString::number(p.tp)},
      {QObject::tr("pipeline stages (PP)"), QString::number(p.pp)},
      {QObject::tr("virtual stages"), QString::number(p.virtual_stages)},
      {QObject::tr("sequence parallel"),
       p.sequence_parallel ? QObject::tr("on") : QObject::tr("off")},
      {QObject::tr("ZeRO stage"), QString::number(p.zero_stage)},
      {QObject::tr("micro-batch / global batch"),
       QStringLiteral("%1 / %2").arg(p.micro_batch).arg(p.global_batch)},
      {QObject::tr("recomputation"), q(to_string(p.recompute))},
      {QObject::tr("precision"), q(to_string(plan.precision.compute))},
      {QObject::tr("fused attention"), p.flash_attention ? QObject::tr("on") : QObject::tr("off")},
  };
}

// The parts the bar draws: as its legend, none that is zero ("PP comm 0 s"
// on a plan without pipeline stages).
Rows breakdownRows(const BarData& bar) {
  Rows rows;
  for (const BarPart& part : bar.parts) {
    if (part.value > 0) rows.emplace_back(part.label, bar.format(part.value));
  }
  rows.emplace_back(QObject::tr("total"), bar.summary());
  return rows;
}

Rows noteRows(const PlanAnalysis& a) {
  Rows rows;
  for (const Problem& p : a.problems)
    rows.emplace_back(q(p.pointer), q(p.message));
  if (!a.memory.message.empty()) rows.emplace_back(QObject::tr("memory"), q(a.memory.message));
  if (a.estimate) {
    const plan::SeedCommunication& s = a.estimate->seed_communication;
    if (s.ranks > 1) {
      rows.emplace_back(
          QObject::tr("gradient exchange"),
          QObject::tr("%1 over %2 ranks at %3: the seed article's S·N/B + L·(N−1) gives %4, a "
                      "flat ring all-reduce %5; the planner's data-parallel communication (by "
                      "link tier, bucketed) %6")
              .arg(q(format_rate(s.gradient_bytes, "B")))
              .arg(s.ranks)
              .arg(q(format_rate(s.bandwidth, "B/s")), q(format_seconds(s.simple_seconds)),
                   q(format_seconds(s.ring_seconds)),
                   q(format_seconds(a.estimate->communication.dp_seconds))));
    }
    for (const std::string& n : a.estimate->notes)
      rows.emplace_back(QObject::tr("note"), q(n));
  }
  if (!a.estimate && a.problems.empty() && !a.error.empty())
    rows.emplace_back(QObject::tr("error"), q(a.error));
  return rows;
}

QString htmlTable(const Rows& rows) {
  QString out = QStringLiteral("<table>");
  for (const auto& [k, v] : rows) {
    out +=
        QStringLiteral("<tr><th>%1</th><td>%2</td></tr>").arg(k.toHtmlEscaped(), v.toHtmlEscaped());
  }
  return out + QStringLiteral("</table>");
}

// Writes blocks down a PDF's pages.
class PdfFlow {
 public:
  PdfFlow(QPdfWriter& writer, QPainter& painter) : writer_(writer), painter_(painter) {
    page_ = QRectF(QPointF(0, 0), QSizeF(writer.width(), writer.height()));
    y_ = 0;
  }
  double width() const { return page_.width(); }
  void need(double height) {
    if (y_ + height > page_.height() && y_ > 0) {
      writer_.newPage();
      y_ = 0;
    }
  }
  void text(const QString& t, double scale = 1.0, bool bold = false) {
    QFont f = base_font_;
    f.setPointSizeF(f.pointSizeF() * scale);
    f.setBold(bold);
    painter_.setFont(f);
    const QRectF bounds = painter_.boundingRect(QRectF(0, 0, width(), 1e6), Qt::TextWordWrap, t);
    need(bounds.height());
    painter_.setPen(Qt::black);
    painter_.drawText(QRectF(0, y_, width(), bounds.height()), Qt::TextWordWrap, t);
    y_ += bounds.height() + 4;
    painter_.setFont(base_font_);
  }
  void table(const Rows& rows) {
    painter_.setFont(base_font_);
    const QFontMetricsF fm(base_font_);
    const double key_width = width() * 0.32;
    for (const auto& [k, v] : rows) {
      const QRectF vb =
          painter_.boundingRect(QRectF(0, 0, width() - key_width, 1e6), Qt::TextWordWrap, v);
      const double h = std::max(fm.height(), vb.height());
      need(h);
      painter_.setPen(QColor(0x55, 0x55, 0x55));
      painter_.drawText(QRectF(0, y_, key_width - 8, h), Qt::AlignLeft | Qt::AlignTop, k);
      painter_.setPen(Qt::black);
      painter_.drawText(QRectF(key_width, y_, width() - key_width, h), Qt::TextWordWrap, v);
      y_ += h + 2;
    }
    y_ += 6;
  }
  void figure(double height, const std::function<void(QPainter&, const QRectF&)>& paint) {
    need(height);
    painter_.save();
    painter_.setFont(base_font_);
    paint(painter_, QRectF(0, y_, width(), height));
    painter_.restore();
    y_ += height + 8;
  }
  void setFont(const QFont& f) { base_font_ = f; }

 private:
  QPdfWriter& writer_;
  QPainter& painter_;
  QRectF page_;
  double y_ = 0;
  QFont base_font_;
};

}  // namespace

Status checkExportTarget(const QString& path) {
  const QFileInfo target(path);
  if (!target.absoluteDir().exists()) {
    return Error{(path + ": its folder " + QDir::toNativeSeparators(target.absolutePath()) +
                  " does not exist")
                     .toStdString()};
  }
  return trace::check_export_path(path.toStdString());
}

Status writeWhole(const QString& path, const QByteArray& bytes) {
  // QSaveFile renames over a read-only file too, and left it writable.
  if (Status s = checkExportTarget(path); !s) return s;
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    return Error{(path + ": cannot write: " + file.errorString()).toStdString()};
  }
  // Flushed before the commit, which can miss a failed flush: on a full disk
  // an earlier file was replaced by an empty one, reported as written.
  if (file.write(bytes) != bytes.size() || !file.flush()) {
    const QString why = file.errorString();
    file.cancelWriting();
    return Error{(path + ": cannot write (" + why + "; disk full?): the file is as it was")
                     .toStdString()};
  }
  if (!file.commit()) {
    return Error{(path + ": cannot write: " + file.errorString()).toStdString()};
  }
  if (QFileInfo(path).size() != bytes.size()) {
    return Error{(path + ": written short (disk full?)").toStdString()};
  }
  return {};
}

Result<QByteArray> completePdf(const QString& file, const QString& path) {
  QFile in(file);
  if (!in.open(QIODevice::ReadOnly)) {
    return Error{(path + ": the PDF was not written (" + in.errorString() + ")").toStdString()};
  }
  const QByteArray bytes = in.readAll();
  // A PDF ends with its trailer's %%EOF; one cut short by a full disk does not.
  if (!bytes.trimmed().endsWith("%%EOF")) {
    return Error{(path + ": the PDF could not be written whole (disk full?): the file is as it "
                         "was")
                     .toStdString()};
  }
  return bytes;
}

QByteArray svgOf(const QSizeF& size, const std::function<void(QPainter&, const QRectF&)>& paint) {
  QBuffer buffer;
  buffer.open(QIODevice::WriteOnly);
  QSvgGenerator generator;
  generator.setOutputDevice(&buffer);
  // At a CSS pixel's resolution (96 per inch), as the screen draws it: the
  // size is written in mm, and at the generator's default 72 a picture
  // drawn `size` wide showed a third wider in a browser, past the report's
  // column (the run's timeline 1333 px in a page of 1100 px).
  generator.setResolution(96);
  generator.setSize(size.toSize());
  generator.setViewBox(QRectF(QPointF(0, 0), size));
  QPainter painter(&generator);
  paint(painter, QRectF(QPointF(0, 0), size));
  painter.end();
  // From <svg on: QSvgGenerator opens with an XML declaration, which is not
  // HTML where the SVG is inlined (a validator's error, text in some viewers).
  const QByteArray& svg = buffer.data();
  const qsizetype start = svg.indexOf("<svg");
  return start >= 0 ? svg.mid(start) : svg;
}

QString reportHtml(const PlanAnalysis& a, const std::vector<ReportFigure>& figures,
                   const QString& plan_name) {
  const Heading heading = headingOf(a.plan, plan_name);
  QString body;
  body += QStringLiteral("<h1>%1</h1>").arg(heading.title.toHtmlEscaped());
  body += QStringLiteral("<p class=sub>%1</p>").arg(heading.line.toHtmlEscaped());
  body += QStringLiteral("<h2>%1</h2>").arg(QObject::tr("Cluster and model")) +
          htmlTable(hardwareRows(a.plan));
  body += QStringLiteral("<h2>%1</h2>").arg(QObject::tr("Plan")) + htmlTable(planRows(a.plan));
  if (a.estimate) {
    const plan::Estimate& e = *a.estimate;
    body += QStringLiteral("<h2>%1</h2><div class=tiles>").arg(QObject::tr("Estimate"));
    for (const auto& [caption, value] : EstimateView::headlineFigures(e, a.plan)) {
      body += QStringLiteral("<div class=tile><b>%1</b><br>%2</div>")
                  .arg(value.toHtmlEscaped(), caption.toHtmlEscaped());
    }
    body += QStringLiteral("</div>");
    QFont font;
    for (const BarData& bar : {memoryBar(e), timeBar(e)}) {
      const double h = stackedBarHeight(bar, font, kChartWidth) + 8;
      const QByteArray svg = svgOf(QSizeF(kChartWidth, h), [&](QPainter& p, const QRectF& r) {
        p.fillRect(r, Qt::white);
        paintStackedBar(p, r.adjusted(4, 4, -4, -4), bar, Qt::black, QColor(0xf4, 0xf4, 0xf4));
      });
      body += QStringLiteral("<figure>%1</figure>").arg(QString::fromUtf8(svg));
      body += QStringLiteral("<h3>%1</h3>").arg(bar.title.toHtmlEscaped()) +
              htmlTable(breakdownRows(bar));
    }
    for (const ReportFigure& f : figures) {
      const double h = f.height(kChartWidth);
      body += QStringLiteral("<h2>%1</h2><figure>%2</figure>")
                  .arg(f.title.toHtmlEscaped(),
                       QString::fromUtf8(svgOf(QSizeF(kChartWidth, h), f.paint)));
    }
  }
  const Rows notes = noteRows(a);
  if (!notes.empty())
    body += QStringLiteral("<h2>%1</h2>").arg(QObject::tr("Notes")) + htmlTable(notes);
  return QStringLiteral(
             "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%1</title><style>"
             "body{font-family:sans-serif;max-width:760px;margin:2em auto;color:#222}"
             "h1{font-size:1.5em}.sub{color:#777}th{text-align:left;color:#555;font-weight:normal;"
             "padding-right:2em}td{font-variant-numeric:tabular-nums}.tiles{display:flex;flex-wrap:"
             "wrap;gap:1.5em}.tile b{font-size:1.3em}figure{margin:1em 0}"
             "</style></head><body>\n%2\n</body></html>\n")
      .arg(heading.title.toHtmlEscaped(), body);
}

Status exportHtml(const QString& path, const PlanAnalysis& a,
                  const std::vector<ReportFigure>& figures, const QString& plan_name) {
  if (!a.has_plan) return Error{"nothing to export: " + a.error};
  return writeWhole(path, reportHtml(a, figures, plan_name).toUtf8());
}

Status exportPdf(const QString& path, const PlanAnalysis& a,
                 const std::vector<ReportFigure>& figures, const QString& plan_name) {
  const Heading heading = headingOf(a.plan, plan_name);
  if (!a.has_plan) return Error{"nothing to export: " + a.error};
  if (Status s = checkExportTarget(path); !s) return s;
  // Drawn to a temporary file first: a failed export leaves no half PDF.
  const QString temporary = path + QStringLiteral(".part");
  {
    QPdfWriter writer(temporary);
    writer.setPageSize(QPageSize(QPageSize::A4));
    writer.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout::Millimeter);
    writer.setResolution(96);  // the drawings' pixel sizes read as screen pixels
    writer.setTitle(heading.title);
    writer.setCreator(QStringLiteral("ClusterScope " CLUSTERSCOPE_VERSION));
    QPainter painter;
    if (!painter.begin(&writer)) {
      QFile::remove(temporary);
      return Error{(path + ": cannot write a PDF here").toStdString()};
    }
    QFont font = painter.font();
    font.setPointSizeF(9);
    PdfFlow flow(writer, painter);
    flow.setFont(font);
    flow.text(heading.title, 1.8, true);
    flow.text(heading.line, 0.9);
    flow.text(QObject::tr("Cluster and model"), 1.3, true);
    flow.table(hardwareRows(a.plan));
    flow.text(QObject::tr("Plan"), 1.3, true);
    flow.table(planRows(a.plan));
    if (a.estimate) {
      const plan::Estimate& e = *a.estimate;
      flow.text(QObject::tr("Estimate"), 1.3, true);
      flow.table(EstimateView::headlineFigures(e, a.plan));
      for (const BarData& bar : {memoryBar(e), timeBar(e)}) {
        flow.figure(stackedBarHeight(bar, font, flow.width()), [&](QPainter& p, const QRectF& r) {
          paintStackedBar(p, r, bar, Qt::black, QColor(0xf4, 0xf4, 0xf4));
        });
        flow.table(breakdownRows(bar));
      }
      for (const ReportFigure& f : figures) {
        flow.text(f.title, 1.3, true);
        flow.figure(f.height(flow.width()), f.paint);
      }
    }
    const Rows notes = noteRows(a);
    if (!notes.empty()) {
      flow.text(QObject::tr("Notes"), 1.3, true);
      flow.table(notes);
    }
    painter.end();
  }
  auto pdf = completePdf(temporary, path);
  QFile::remove(temporary);
  if (!pdf) return pdf.error();
  return writeWhole(path, *pdf);
}

Status exportPlanJson(const QString& path, const PlanAnalysis& a) {
  if (!a.has_plan) return Error{"nothing to export: " + a.error};
  return writeWhole(path, QByteArray::fromStdString(plan_to_json_text(a.plan)));
}

}  // namespace cs::gui
