#pragma once

#include <QString>
#include <QTextDocument>
#include <string>
#include <string_view>

#include "core/elided_name.h"

namespace cs::gui {

// A tooltip of plain text that may hold a name, a path or a message from the
// user or a trace: Qt takes a tooltip for rich text when it looks like it
// (a kernel named "<b>x</b>" came out bold, "<img src=...>" as a picture).
// Such a text is escaped and its lines kept; any other is left as it is.
inline QString plainToolTip(const QString& text) {
  if (!Qt::mightBeRichText(text)) return text;
  return QStringLiteral("<p style=\"white-space:pre\">%1</p>").arg(text.toHtmlEscaped());
}

// A name of the store (a kernel, a collective, a range, a call, a lane) as
// a table, the timeline, a tooltip or a report shows it: elided past
// kShownNameChars characters (core/elided_name.h), so that no text layout
// measures a name of 200,000 characters. The Selection tab's details, a
// summary row's Qt::UserRole and the CSV and Chrome trace exports have it
// whole.
inline QString elidedName(std::string_view name) {
  const std::string shown = elided_name(name);
  return QString::fromUtf8(shown.data(), qsizetype(shown.size()));
}
inline QString elidedName(const QString& name) {
  // No more characters than UTF-16 units: whole without a conversion.
  if (name.size() <= qsizetype(kShownNameChars)) return name;
  return elidedName(std::string_view(name.toStdString()));
}

}  // namespace cs::gui
