#pragma once

#include <QString>
#include <QTextDocument>

namespace cs::gui {

// A tooltip of plain text that may hold a name, a path or a message from the
// user or a trace: Qt takes a tooltip for rich text when it looks like it
// (a kernel named "<b>x</b>" came out bold, "<img src=...>" as a picture).
// Such a text is escaped and its lines kept; any other is left as it is.
inline QString plainToolTip(const QString& text) {
  if (!Qt::mightBeRichText(text)) return text;
  return QStringLiteral("<p style=\"white-space:pre\">%1</p>").arg(text.toHtmlEscaped());
}

}  // namespace cs::gui
