#pragma once
// Helpers for the GUI suites: screenshots saved into the build tree and
// checked to show something (not one flat colour) with real glyphs, typing
// into fields as a user does, and an isolated settings and autosave area.

#include <QImage>
#include <QList>
#include <QMessageBox>
#include <QPoint>
#include <QString>

class QFont;
class QLineEdit;
class QWidget;

namespace cs::gui::test {

// Test-mode QStandardPaths and QSettings, emptied: no test sees another's files.
void isolateSettings();

// Grabs `widget`, saves it as <build>/screenshots/<name>.png and returns it.
QImage saveScreenshot(QWidget* widget, const QString& name, int height = 0);

// Distinct colours in the image, and the share of its most common colour.
int distinctColours(const QImage& image, double* dominant_share = nullptr);

// True when `font` draws "A" and "B" as different, non-empty pictures (a
// missing font draws every glyph as the same box, or nothing).
bool glyphsRender(const QFont& font);

// Replaces the field's text by typing `text` key by key.
void typeInto(QLineEdit* edit, const QString& text);

// Asks `widget` for its tooltip at `at` (its own coordinates), as a pointer
// resting there does, the last tooltip hidden first; returns the tooltip's
// text, "" when none shows. A tooltip that grows later (the timeline's event
// facts) is read again from QToolTip::text().
QString toolTipAt(QWidget* widget, const QPoint& at);

// The widest picture inlined in an HTML page (`<svg width=...>`), in CSS
// pixels (a width in mm at 96 pixels an inch), as a browser lays it out;
// 0 when there is none.
double widestSvgPixels(const QString& html);

// The page's column, its body's CSS max-width in pixels; 0 when none is set.
double bodyMaxWidthPixels(const QString& html);

// Answers the message boxes that open next, in order, with these buttons
// (a box without the button asked for is refused).
void answerBoxes(QList<QMessageBox::StandardButton> answers);

}  // namespace cs::gui::test
