#pragma once
// A bar across the top of the window for what needs attention (a file that
// would not open, a preset missing, a crash to recover from), with its
// actions as buttons: a panel instead of a modal dialog.

#include <QFrame>
#include <QString>
#include <functional>
#include <vector>

#include "app/gui/message_level.h"

class QLabel;
class QHBoxLayout;

namespace cs::gui {

class MessageBar : public QFrame {
  Q_OBJECT

 public:
  explicit MessageBar(QWidget* parent = nullptr);

  struct Action {
    QString text;
    std::function<void()> run;
  };
  // Shows at most kShownLines lines of at most kShownLineChars characters
  // (a project of 300 bad clusters, 900 lines, made the window 13,000 px
  // tall); a longer text gets "Show all", a window with the whole of it.
  void show(const QString& text, MessageLevel level, std::vector<Action> actions = {});
  void dismiss();
  QString text() const;  // whole, as given to show()
  static constexpr int kShownLines = 12;
  static constexpr int kShownLineChars = 400;
  MessageLevel level() const { return level_; }

 private:
  QLabel* icon_;
  QLabel* label_;
  QHBoxLayout* buttons_;
  QString text_;
  MessageLevel level_ = MessageLevel::info;
};

}  // namespace cs::gui
