#include "app/gui/field_widgets.h"

#include <QComboBox>
#include <QFormLayout>
#include <QKeyEvent>
#include <QLocale>
#include <QRegularExpression>
#include <QVBoxLayout>
#include <cmath>
#include <limits>

#include "app/gui/plain_text.h"
#include "core/presets.h"

namespace cs::gui {

namespace {
// A JSON string literal.
QString quoted(const QString& text) {
  QString out = QStringLiteral("\"");
  for (const QChar c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c.unicode() < 0x20) {
      out += QStringLiteral("\\u%1").arg(c.unicode(), 4, 16, QChar('0'));
    } else {
      out += c;
    }
  }
  return out + '"';
}

// A whole number's digits in groups of three from 10,000 on, as counts read
// elsewhere in the app: "2,000,000,000,000" tokens, not 2000000000000.
QString grouped(QString digits) {
  const int first = digits.startsWith(QLatin1Char('-')) ? 1 : 0;
  if (digits.size() - first < 5) return digits;
  for (int i = int(digits.size()) - 3; i > first; i -= 3)
    digits.insert(i, QLatin1Char(','));
  return digits;
}

// A number as typed or shown, without its group commas. Only commas that
// group the whole part in threes are read so: "1,5" (a decimal comma) or
// "2,50" stays as typed, not a number, where it read as 15 and 250.
QString ungrouped(QString text) {
  static const QRegularExpression groups(
      QStringLiteral(R"(^[+-]?\d{1,3}(,\d{3})+(\.\d*)?([eE][+-]?\d+)?$)"));
  if (!text.contains(QLatin1Char(',')) || !groups.match(text.trimmed()).hasMatch()) return text;
  return text.remove(QLatin1Char(','));
}
}  // namespace

FieldEdit::FieldEdit(QString pointer, Kind kind, QWidget* parent)
    : QWidget(parent), pointer_(std::move(pointer)), kind_(kind) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(1);
  edit_ = new QLineEdit(this);
  edit_->setObjectName(pointer_);
  reason_ = new QLabel(this);
  reason_->setWordWrap(true);
  reason_->setTextFormat(Qt::PlainText);
  reason_->setVisible(false);
  QFont small = reason_->font();
  small.setPointSizeF(small.pointSizeF() * 0.9);
  reason_->setFont(small);
  layout->addWidget(edit_);
  layout->addWidget(reason_);
  if (kind_ != Kind::text) edit_->setAlignment(Qt::AlignRight);
  connect(edit_, &QLineEdit::textEdited, this, [this] { emit edited(pointer_, jsonValue()); });
  edit_->installEventFilter(this);
  // Left with a value the model refused, the field goes back to the one the
  // figures use: "1e9" stayed in red while the energy was the last good
  // keystroke's ("1": 1 W).
  connect(edit_, &QLineEdit::editingFinished, this, [this] {
    if (!hasProblem()) return;
    edit_->setText(shown_);
    setProblem({});
  });
}

bool FieldEdit::eventFilter(QObject* watched, QEvent* event) {
  if (watched == edit_ &&
      (event->type() == QEvent::ShortcutOverride || event->type() == QEvent::KeyPress)) {
    auto* key = static_cast<QKeyEvent*>(event);
    if (key->matches(QKeySequence::Undo) || key->matches(QKeySequence::Redo)) {
      // Not accepted as an override, the key reaches the window's Undo and
      // Redo shortcuts; as a key press it never reaches the line edit.
      event->ignore();
      return true;
    }
  }
  return QWidget::eventFilter(watched, event);
}

void FieldEdit::showValue(const QString& value) {
  QString shown = value;
  bool is_number = false;
  const double v = value.toDouble(&is_number);
  if (is_number && kind_ != Kind::text) {
    // To 12 significant digits: a unit's round trip (1000 us stored as
    // 0.001 s) leaves 1000.0000000000001, which was shown and then typed on.
    const double rounded = QString::number(v, 'g', 12).toDouble();
    // Whole numbers without the JSON writer's ".0".
    shown = rounded == std::floor(rounded) && std::abs(rounded) < 1e15
                ? grouped(QString::number(rounded, 'f', 0))
                : QString::number(rounded, 'g', 12);
  }
  shown_ = shown;
  if (edit_->hasFocus()) {
    // The user is typing: keep their text while it means the same value.
    if (hasProblem()) return;
    bool typed_ok = false;
    const double typed = ungrouped(edit_->text()).toDouble(&typed_ok);
    if (kind_ != Kind::text && is_number && typed_ok &&
        std::abs(typed - v) <= 1e-12 * std::max(1.0, std::abs(v)))
      return;
  }
  if (edit_->text() != shown) {
    edit_->setText(shown);
    // A long value shows its start (a cluster's name showed only its end).
    if (!edit_->hasFocus()) edit_->setCursorPosition(0);
  }
}

void FieldEdit::setProblem(const QString& reason) {
  if (reason == problem_) return;
  problem_ = reason;
  reason_->setText(reason);
  reason_->setVisible(!reason.isEmpty());
  edit_->setToolTip(plainToolTip(reason));
  // A red frame and text at the field; the reason, in the same colour, under it.
  edit_->setStyleSheet(
      reason.isEmpty() ? QString() : QStringLiteral("QLineEdit { border: 2px solid #d03030; }"));
  reason_->setStyleSheet(QStringLiteral("color: #d03030;"));
}

QString FieldEdit::jsonValue() const {
  if (kind_ == Kind::text) return quoted(edit_->text().trimmed());
  // A number with group commas, as shown, reads as one.
  const QString t = ungrouped(edit_->text().trimmed());
  bool ok = false;
  if (kind_ == Kind::integer) {
    const qlonglong v = t.toLongLong(&ok);
    if (ok) return QString::number(v);
  }
  const double d = t.toDouble(&ok);
  if (ok && std::isfinite(d)) return QString::number(d, 'g', 17);
  // Not a number: quoted, so that the core reader reports "must be a number".
  return quoted(edit_->text().trimmed());
}

NumberSpinBox::NumberSpinBox(QWidget* parent) : QDoubleSpinBox(parent) {
  // The most a double holds: setValue rounds to the decimals (none lost).
  setDecimals(std::numeric_limits<double>::max_exponent10 + std::numeric_limits<double>::digits10);
}

QString NumberSpinBox::textFromValue(double value) const {
  QLocale c = QLocale::c();
  c.setNumberOptions(QLocale::OmitGroupSeparator);
  return c.toString(value, 'g', QLocale::FloatingPointShortest);
}

QString NumberSpinBox::numberIn(QString text) const {
  if (!suffix().isEmpty() && text.endsWith(suffix())) text.chop(suffix().size());
  if (!prefix().isEmpty() && text.startsWith(prefix())) text.remove(0, prefix().size());
  return text.trimmed();
}

double NumberSpinBox::valueFromText(const QString& text) const {
  return QLocale::c().toDouble(numberIn(text));
}

QValidator::State NumberSpinBox::validate(QString& text, int& pos) const {
  Q_UNUSED(pos);
  const QString number = numberIn(text);
  bool ok = false;
  const double value = QLocale::c().toDouble(number, &ok);
  if (ok && std::isfinite(value))
    return value >= minimum() && value <= maximum() ? QValidator::Acceptable
                                                    : QValidator::Intermediate;
  // On the way to a number: "", "-", "1.", "1e", "1e-".
  static const QRegularExpression partial(QStringLiteral(R"(^[+-]?(\d*\.?\d*)([eE][+-]?\d*)?$)"));
  return partial.match(number).hasMatch() ? QValidator::Intermediate : QValidator::Invalid;
}

void roomForMnemonic(QLabel* label) {
  if (!label->text().contains(QLatin1Char('&'))) return;
  label->setMinimumWidth(label->sizeHint().width() + label->fontMetrics().averageCharWidth());
}

void addRow(QFormLayout* form, const QString& label, QWidget* field, const QString& tip) {
  auto* l = new QLabel(label);
  l->setBuddy(field);
  roomForMnemonic(l);
  if (!tip.isEmpty()) {
    l->setToolTip(tip);
    field->setToolTip(tip);
  }
  form->addRow(l, field);
}

void addPresetItem(QComboBox* box, const PresetCatalog& catalog, std::string_view kind,
                   const std::string& name, const QString& shown) {
  const std::filesystem::path file = catalog.replacement_file(kind, name);
  box->addItem(file.empty() ? shown : QObject::tr("%1 (your preset)").arg(shown),
               QString::fromStdString(name));
  const int i = box->count() - 1;
  box->setItemData(i, shown, kPresetShownRole);
  if (!file.empty()) {
    box->setItemData(
        i,
        plainToolTip(QObject::tr("Your preset from %1, in place of the shipped %2 of that name")
                         .arg(QString::fromStdString(file.string()),
                              QString::fromUtf8(kind.data(), int(kind.size())))),
        Qt::ToolTipRole);
  }
}

}  // namespace cs::gui
