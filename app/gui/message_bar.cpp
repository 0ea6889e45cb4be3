#include "app/gui/message_bar.h"

#include <QDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QToolButton>
#include <QVBoxLayout>

namespace cs::gui {

MessageBar::MessageBar(QWidget* parent) : QFrame(parent) {
  setObjectName(QStringLiteral("messageBar"));
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(8, 4, 4, 4);
  icon_ = new QLabel;
  label_ = new QLabel;
  label_->setObjectName(QStringLiteral("messageText"));
  label_->setWordWrap(true);
  label_->setTextFormat(Qt::PlainText);  // messages name files, runs and kernels as written
  label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  buttons_ = new QHBoxLayout;
  auto* close = new QToolButton;
  close->setText(QStringLiteral("✕"));
  close->setToolTip(tr("Dismiss"));
  close->setAutoRaise(true);
  connect(close, &QToolButton::clicked, this, &MessageBar::dismiss);
  layout->addWidget(icon_);
  layout->addWidget(label_, 1);
  layout->addLayout(buttons_);
  layout->addWidget(close, 0, Qt::AlignTop);
  setVisible(false);
}

void MessageBar::show(const QString& text, MessageLevel level, std::vector<Action> actions) {
  level_ = level;
  text_ = text;
  QStringList lines = text.split(QLatin1Char('\n'));
  // One line past the limit is shown rather than said to be there.
  const qsizetype more = lines.size() > kShownLines + 1 ? lines.size() - kShownLines : 0;
  bool cut = more > 0;
  if (cut) lines.resize(kShownLines);
  for (QString& line : lines) {
    if (line.size() <= kShownLineChars) continue;
    line = line.left(kShownLineChars) + QStringLiteral("…");
    cut = true;
  }
  if (more > 0) lines << tr("… and %1 more lines").arg(more);
  label_->setText(lines.join(QLatin1Char('\n')));
  if (cut) {
    actions.push_back({tr("Show all"), [this, text] {
                         auto* window = new QDialog(this->window());
                         window->setObjectName(QStringLiteral("messageWhole"));
                         window->setAttribute(Qt::WA_DeleteOnClose);
                         window->setWindowTitle(tr("Message"));
                         auto* whole = new QPlainTextEdit(text, window);
                         whole->setReadOnly(true);
                         (new QVBoxLayout(window))->addWidget(whole);
                         window->resize(800, 500);
                         window->show();
                       }});
  }
  QColor tint;
  switch (level) {
    case MessageLevel::info:
      tint = QColor(0x3d, 0x7e, 0xc7);
      icon_->setText(QStringLiteral("ℹ"));
      break;
    case MessageLevel::warning:
      tint = QColor(0xc0, 0x80, 0x00);
      icon_->setText(QStringLiteral("⚠"));
      break;
    case MessageLevel::error:
      tint = QColor(0xd0, 0x30, 0x30);
      icon_->setText(QStringLiteral("✖"));
      break;
  }
  QPalette pal = palette();
  QColor background = pal.color(QPalette::Window);
  background = QColor::fromRgbF(0.85 * background.redF() + 0.15 * tint.redF(),
                                0.85 * background.greenF() + 0.15 * tint.greenF(),
                                0.85 * background.blueF() + 0.15 * tint.blueF());
  pal.setColor(QPalette::Window, background);
  setPalette(pal);
  while (QLayoutItem* item = buttons_->takeAt(0)) {
    if (QWidget* w = item->widget()) w->deleteLater();  // it may be the one being clicked
    delete item;
  }
  for (Action& a : actions) {
    auto* b = new QPushButton(a.text);
    connect(b, &QPushButton::clicked, this, [this, run = std::move(a.run)] {
      const std::function<void()> action = run;  // the button may go while it runs
      dismiss();
      action();
    });
    buttons_->addWidget(b);
  }
  setVisible(true);
}

void MessageBar::dismiss() {
  setVisible(false);
}

QString MessageBar::text() const {
  return isVisible() ? text_ : QString();
}

}  // namespace cs::gui
