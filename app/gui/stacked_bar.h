#pragma once
// A horizontal stacked bar with a title, an optional capacity line and a
// legend: memory per GPU by part against the GPU's memory, step time by
// part. Painted by a plain function so that the same drawing goes to the
// screen, a PDF and an SVG.

#include <QColor>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <vector>

class QPainter;

namespace cs::plan {
struct Estimate;
}

namespace cs::gui {

struct BarPart {
  QString label;
  double value = 0;
  QColor color;
  QString detail;  // tooltip: what the part holds
};

struct BarData {
  QString title;  // "Memory per GPU"
  std::vector<BarPart> parts;
  double capacity = 0;  // drawn as a line when > 0 (GPU memory)
  enum class Unit { bytes, seconds } unit = Unit::bytes;

  double total() const;
  QString format(double value) const;
  QString summary() const;  // "61.2 GiB of 80 GiB (77 %)", "12.3 s"
};

BarData memoryBar(const plan::Estimate& estimate);
BarData timeBar(const plan::Estimate& estimate);

// Height the bar needs at `width` (title, bar, legend rows).
double stackedBarHeight(const BarData& data, const QFont& font, double width);
void paintStackedBar(QPainter& painter, const QRectF& area, const BarData& data, const QColor& text,
                     const QColor& base);

class StackedBarWidget : public QWidget {
  Q_OBJECT

 public:
  explicit StackedBarWidget(QWidget* parent = nullptr);
  void setData(BarData data, std::uint64_t job);
  void clear();
  const BarData& data() const { return data_; }
  std::uint64_t paintedJob() const { return painted_job_; }
  QSize sizeHint() const override;
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;

 signals:
  void painted(std::uint64_t job);

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;  // tooltips per part

 private:
  BarData data_;
  std::uint64_t job_ = 0;
  std::uint64_t painted_job_ = 0;
};

}  // namespace cs::gui
