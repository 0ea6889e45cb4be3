#pragma once
// Small widgets shared by the panels: a line edit that carries a JSON field
// and marks a bad value in place with the reason, and a combo box that names
// presets.

#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QString>
#include <QWidget>
#include <string>
#include <string_view>

class QComboBox;
class QFormLayout;

namespace cs {
class PresetCatalog;
}

namespace cs::gui {

// A value field bound to a JSON pointer of the document a panel edits. The
// user's text is passed on as typed; the panel answers with setProblem().
class FieldEdit : public QWidget {
  Q_OBJECT

 public:
  enum class Kind { integer, number, text };
  FieldEdit(QString pointer, Kind kind, QWidget* parent = nullptr);

  const QString& pointer() const { return pointer_; }
  Kind kind() const { return kind_; }
  QLineEdit* lineEdit() const { return edit_; }
  QString text() const { return edit_->text(); }

  // Shows `value` unless the user is typing a value not yet accepted here.
  void showValue(const QString& value);
  // Marks the field as wrong with `reason` under it, or clears the mark.
  void setProblem(const QString& reason);
  QString problem() const { return problem_; }
  bool hasProblem() const { return !problem_.isEmpty(); }

  // The text as a JSON value ("12", "1.5e9", "\"name\""); a number field
  // with no number gives the text quoted, so the reader says what is wrong.
  QString jsonValue() const;

 protected:
  // Undo and redo keys go to the project's undo stack, not the line edit's
  // own: every keystroke is an edit of the project already, and the line
  // edit's undo made a step that changed nothing and left redo disabled.
  bool eventFilter(QObject* watched, QEvent* event) override;

 signals:
  void edited(const QString& pointer, const QString& json_value);

 private:
  QString pointer_;
  Kind kind_;
  QLineEdit* edit_;
  QLabel* reason_;
  QString problem_;
  QString shown_;  // the model's value, as last shown
};

// A number box that takes any number a CLI option of type double takes
// ("0.000001", "1e-6", "-2.5E3"), kept as typed, and shows a value in the
// fewest digits that read back the same: QDoubleSpinBox's fixed decimals
// rounded a narrow quantisation range to 0.
class NumberSpinBox : public QDoubleSpinBox {
  Q_OBJECT

 public:
  explicit NumberSpinBox(QWidget* parent = nullptr);
  QString textFromValue(double value) const override;
  double valueFromText(const QString& text) const override;
  QValidator::State validate(QString& text, int& pos) const override;

 private:
  QString numberIn(QString text) const;  // the text without prefix and suffix
};

// A label's room for its shortcut letter: underlined, that letter is laid
// out apart from the next one, which the width measured as one word does
// not allow for ("Tensor parallel (TP" lost its parenthesis).
void roomForMnemonic(QLabel* label);

// Adds a labelled row to a form.
void addRow(QFormLayout* form, const QString& label, QWidget* field, const QString& tip = {});

// A preset list's item: `shown` (the preset's display name) with its name
// as data. Where a preset of the user's own stands in place of the shipped
// one of that name (PresetCatalog::replacement_file), the item says so,
// its tooltip naming the file: a calibrated "h100-sxm" read as the
// datasheet's. `kind`: "gpu", "link", "workload" or "cluster".
void addPresetItem(QComboBox* box, const PresetCatalog& catalog, std::string_view kind,
                   const std::string& name, const QString& shown);
// The item's display name without that mark.
inline constexpr int kPresetShownRole = Qt::UserRole + 2;

}  // namespace cs::gui
