#include "app/gui/theme.h"

#include <QAbstractAxis>
#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QLegend>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

namespace cs::gui {

namespace {
bool g_dark = false;

QPalette darkPalette() {
  QPalette p;
  const QColor window(0x2b, 0x2d, 0x30);
  const QColor base(0x1e, 0x1f, 0x22);
  const QColor text(0xdf, 0xe1, 0xe5);
  const QColor disabled(0x80, 0x80, 0x80);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(0x33, 0x35, 0x38));
  p.setColor(QPalette::ToolTipBase, window);
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, window);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, Qt::red);
  p.setColor(QPalette::Link, QColor(0x58, 0x9d, 0xf6));
  p.setColor(QPalette::Highlight, QColor(0x2f, 0x65, 0xca));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::PlaceholderText, disabled);
  p.setColor(QPalette::Disabled, QPalette::Text, disabled);
  p.setColor(QPalette::Disabled, QPalette::ButtonText, disabled);
  p.setColor(QPalette::Disabled, QPalette::WindowText, disabled);
  return p;
}

QPalette lightPalette() {
  QPalette p = QApplication::style()->standardPalette();  // Fusion's own
  p.setColor(QPalette::AlternateBase, QColor(0xf0, 0xf2, 0xf5));
  return p;
}

}  // namespace

void applyTheme(bool dark) {
  g_dark = dark;
  if (QApplication::style()->name() != QLatin1String("fusion"))
    QApplication::setStyle(QStringLiteral("Fusion"));
  QApplication::setPalette(dark ? darkPalette() : lightPalette());
}

bool isDarkTheme() {
  return g_dark;
}

void applyChartTheme(QWidget* root) {
  const QPalette pal = QApplication::palette();
  const QColor base = pal.color(QPalette::Base);
  const QColor text = pal.color(QPalette::Text);
  QColor grid = text;
  grid.setAlpha(50);
  for (QChartView* view : root->findChildren<QChartView*>()) {
    QChart* chart = view->chart();
    view->setBackgroundBrush(base);
    chart->setBackgroundBrush(base);
    chart->setTitleBrush(text);
    chart->legend()->setLabelColor(text);
    for (QAbstractAxis* axis : chart->axes()) {
      axis->setLabelsColor(text);
      axis->setTitleBrush(text);
      axis->setGridLineColor(grid);
      axis->setLinePenColor(grid);
    }
  }
}

void setRoundTicks(QValueAxis* axis, double lo, double hi, bool whole) {
  if (!(hi > lo)) hi = lo + (whole ? 1 : 1e-3);
  const double target = (hi - lo) / 5;
  const double power = std::pow(10.0, std::floor(std::log10(target)));
  double step = 10 * power;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= target) {
      step = m * power;
      break;
    }
  }
  if (whole) step = std::max(1.0, std::round(step));
  const double first = std::floor(lo / step + 1e-9) * step;
  const double last = std::ceil(hi / step - 1e-9) * step;
  // Fixed ticks while the range and the interval change: dynamic ones laid
  // out the new range at the old interval first (a range of 5 at an earlier
  // interval of 2e-10: billions of ticks, and the app hung).
  axis->setTickType(QValueAxis::TicksFixed);
  axis->setRange(first, last);
  axis->setTickAnchor(first);
  axis->setTickInterval(step);
  axis->setTickType(QValueAxis::TicksDynamic);
  const int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  axis->setLabelFormat(QStringLiteral("%.") + QString::number(decimals) + QStringLiteral("f"));
}

}  // namespace cs::gui
