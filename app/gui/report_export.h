#pragma once
// Exports of the current plan: its estimate as a PDF (QPdfWriter) or as one
// self-contained HTML file with the charts inline as SVG (QSvgGenerator), and
// the plan as the JSON document `clusterscope run` and `clusterscope plan`
// read. Files are written whole or not at all (QSaveFile).

#include <QString>
#include <functional>
#include <vector>

#include "core/result.h"

class QPainter;
class QRectF;
class QSizeF;

namespace cs::gui {

struct PlanAnalysis;

// Draws extra figures into a report (the predicted timeline): the size it
// wants at a width, and how to paint it.
struct ReportFigure {
  QString title;
  std::function<double(double width)> height;
  std::function<void(QPainter&, const QRectF&)> paint;
};

// `plan_name`: the plan's name in the project, the report's title (else
// the model and the cluster are).
Status exportPdf(const QString& path, const PlanAnalysis& analysis,
                 const std::vector<ReportFigure>& figures = {}, const QString& plan_name = {});
Status exportHtml(const QString& path, const PlanAnalysis& analysis,
                  const std::vector<ReportFigure>& figures = {}, const QString& plan_name = {});
Status exportPlanJson(const QString& path, const PlanAnalysis& analysis);

// Whether an export may be written at `path`, said before anything is
// drawn: its folder exists, and it is no folder, read-only file or SQLite
// database (trace::check_export_path).
Status checkExportTarget(const QString& path);
// Writes `bytes` as `path` whole, or leaves an earlier file as it was and
// says why (a full disk included). Every export of the app writes this way.
Status writeWhole(const QString& path, const QByteArray& bytes);
// The bytes of a PDF that QPdfWriter wrote to `file`, if it is whole (ends
// with %%EOF); errors name `path`, where it was to go.
Result<QByteArray> completePdf(const QString& file, const QString& path);

// The report's HTML text (what exportHtml writes).
QString reportHtml(const PlanAnalysis& analysis, const std::vector<ReportFigure>& figures,
                   const QString& plan_name = {});
// An SVG document of a drawing, for inline use in HTML: from its <svg> element
// on, no XML declaration.
QByteArray svgOf(const QSizeF& size, const std::function<void(QPainter&, const QRectF&)>& paint);

}  // namespace cs::gui
