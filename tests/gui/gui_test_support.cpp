#include "gui_test_support.h"

#include <QAbstractButton>
#include <QApplication>
#include <QCoreApplication>
#include <QDir>
#include <QFont>
#include <QHash>
#include <QHelpEvent>
#include <QLineEdit>
#include <QPainter>
#include <QPointer>
#include <QRegularExpression>
#include <QSettings>
#include <QStandardPaths>
#include <QTest>
#include <QTimer>
#include <QToolTip>
#include <QWidget>
#include <algorithm>
#include <memory>

namespace cs::gui::test {

void isolateSettings() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("ClusterScopeTests"));
  QCoreApplication::setApplicationName(QCoreApplication::applicationName());
  QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).removeRecursively();
  QSettings().clear();
}

QImage saveScreenshot(QWidget* widget, const QString& name, int height) {
  QDir().mkpath(QStringLiteral(CS_SCREENSHOT_DIR));
  // Layouts settle in posted events: grabbed at once, a field whose
  // problem line had just gone was drawn a few pixels high.
  QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
  QImage image = widget->grab().toImage();
  if (height > 0) {  // the top `height` pixels (device-independent) only
    const int rows = int(height * image.devicePixelRatio());
    image = image.copy(0, 0, image.width(), std::min(image.height(), rows));
  }
  image.save(QStringLiteral(CS_SCREENSHOT_DIR "/%1.png").arg(name));
  return image;
}

int distinctColours(const QImage& image, double* dominant_share) {
  QHash<QRgb, int> counts;
  const QImage rgb = image.convertToFormat(QImage::Format_RGB32);
  for (int y = 0; y < rgb.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(rgb.constScanLine(y));
    for (int x = 0; x < rgb.width(); ++x)
      ++counts[line[x]];
  }
  int most = 0;
  for (int c : counts)
    most = std::max(most, c);
  if (dominant_share) {
    *dominant_share = rgb.isNull() ? 1.0 : double(most) / (double(rgb.width()) * rgb.height());
  }
  return int(counts.size());
}

bool glyphsRender(const QFont& font) {
  auto draw = [&](const QString& text) {
    QImage image(40, 40, QImage::Format_RGB32);
    image.fill(Qt::white);
    QPainter p(&image);
    QFont f = font;
    f.setPixelSize(24);
    p.setFont(f);
    p.setPen(Qt::black);
    p.drawText(image.rect(), Qt::AlignCenter, text);
    return image;
  };
  const QImage a = draw(QStringLiteral("A"));
  const QImage b = draw(QStringLiteral("B"));
  return a != b && distinctColours(a) > 1 && distinctColours(b) > 1;
}

void typeInto(QLineEdit* edit, const QString& text) {
  edit->setFocus();
  edit->selectAll();
  QTest::keyClick(edit, Qt::Key_Backspace);
  QTest::keyClicks(edit, text);
}

QString toolTipAt(QWidget* widget, const QPoint& at) {
  // The last tooltip gone at once: hideText keeps it 300 ms, and a place
  // with no tooltip of its own read as the last place's.
  for (QWidget* w : QApplication::topLevelWidgets())
    if (w->inherits("QTipLabel") && w->isVisible()) w->close();
  QToolTip::hideText();
  QHelpEvent help(QEvent::ToolTip, at, widget->mapToGlobal(at));
  QCoreApplication::sendEvent(widget, &help);
  return QToolTip::isVisible() ? QToolTip::text() : QString();
}

void answerBoxes(QList<QMessageBox::StandardButton> answers) {
  auto* timer = new QTimer;
  auto answered = std::make_shared<QPointer<QMessageBox>>();
  QObject::connect(timer, &QTimer::timeout, [timer, answers, answered]() mutable {
    auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
    if (!box || box == answered->data() || answers.isEmpty()) return;
    *answered = box;
    // A box without that button is refused (a question other than the one
    // expected), not a null button clicked.
    if (QAbstractButton* button = box->button(answers.takeFirst())) {
      button->click();
    } else {
      box->reject();
    }
    // Stopped at once: deleted only once control is back in an outer event
    // loop, it went on to answer the next box too (from an empty list).
    if (answers.isEmpty()) {
      timer->stop();
      timer->deleteLater();
    }
  });
  timer->start(20);
}

double widestSvgPixels(const QString& html) {
  double widest = 0;
  static const QRegularExpression svg(
      QStringLiteral("<svg\\b[^>]*?\\swidth=\"([0-9.]+)(mm|px)?\""));
  for (auto it = svg.globalMatch(html); it.hasNext();) {
    const QRegularExpressionMatch m = it.next();
    const double width = m.captured(1).toDouble();
    widest = std::max(widest, m.captured(2) == QLatin1String("mm") ? width * 96 / 25.4 : width);
  }
  return widest;
}

double bodyMaxWidthPixels(const QString& html) {
  static const QRegularExpression body(QStringLiteral("body\\{[^}]*max-width:([0-9.]+)px"));
  const QRegularExpressionMatch m = body.match(html);
  return m.hasMatch() ? m.captured(1).toDouble() : 0;
}

}  // namespace cs::gui::test
