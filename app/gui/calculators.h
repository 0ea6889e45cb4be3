#pragma once
// The seed articles' two calculators, next to the plan they explain:
//  - communication cost: the articles' simple T = S·N/B + L·(N−1) beside the
//    ring all-reduce 2(N−1)/N·S/B + 2(N−1)·L, over a range of bandwidths;
//  - INT8 quantisation: scale, zero point, how values map to integers and
//    back, and the error, clamping included, across a range.

#include <QWidget>
#include <memory>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineSeries;
class QSpinBox;
class QTableWidget;
class QTabWidget;
class QChartView;

namespace cs::gui {

struct PlanAnalysis;

class CommunicationCalculator : public QWidget {
  Q_OBJECT

 public:
  explicit CommunicationCalculator(QWidget* parent = nullptr);

  QDoubleSpinBox* bytesBox() const { return megabytes_; }  // S in MB
  QSpinBox* devicesBox() const { return devices_; }
  QDoubleSpinBox* bandwidthBox() const { return bandwidth_; }  // B in GB/s
  QDoubleSpinBox* latencyBox() const { return latency_; }      // L in µs
  QLabel* resultLabel() const { return result_; }
  QLineSeries* simpleSeries() const { return simple_; }
  QLineSeries* ringSeries() const { return ring_; }

  // Fills S, N, B and L from the plan's data-parallel gradients.
  void usePlan(const PlanAnalysis& analysis);

 private:
  void recompute();

  QDoubleSpinBox* megabytes_;
  QSpinBox* devices_;
  QDoubleSpinBox* bandwidth_;
  QDoubleSpinBox* latency_;
  QDoubleSpinBox* low_;
  QDoubleSpinBox* high_;
  QLabel* result_;
  QChartView* chart_view_;
  QLineSeries* simple_;
  QLineSeries* ring_;
};

class QuantizationCalculator : public QWidget {
  Q_OBJECT

 public:
  explicit QuantizationCalculator(QWidget* parent = nullptr);

  QDoubleSpinBox* minBox() const { return min_; }
  QDoubleSpinBox* maxBox() const { return max_; }
  QDoubleSpinBox* valueBox() const { return value_; }
  QSpinBox* bitsBox() const { return bits_; }
  QComboBox* modeBox() const { return mode_; }
  QLabel* scaleLabel() const { return scale_; }
  QLabel* zeroPointLabel() const { return zero_point_; }
  QLabel* valueLabel() const { return mapping_; }
  QTableWidget* table() const { return table_; }
  QLineSeries* errorSeries() const { return error_; }

 private:
  void recompute();

  QDoubleSpinBox* min_;
  QDoubleSpinBox* max_;
  QDoubleSpinBox* value_;
  QSpinBox* bits_;
  QComboBox* mode_;
  QLabel* scale_;
  QLabel* zero_point_;
  QLabel* range_;
  QLabel* mapping_;
  QTableWidget* table_;
  QChartView* chart_view_;
  QLineSeries* dequantized_;
  QLineSeries* error_;
};

// Both, as tabs. The communication calculator opens on the articles'
// example; "Follow the current plan" fills it from each plan the app
// analyses, until a figure is edited by hand.
class Calculators : public QWidget {
  Q_OBJECT

 public:
  explicit Calculators(QWidget* parent = nullptr);
  CommunicationCalculator* communication() const { return communication_; }
  QuantizationCalculator* quantization() const { return quantization_; }
  QTabWidget* tabs() const { return tabs_; }
  QCheckBox* followPlanBox() const { return follow_plan_; }
  void setAnalysis(std::shared_ptr<const PlanAnalysis> analysis);

 private:
  void fillFromPlan();

  QTabWidget* tabs_;
  QCheckBox* follow_plan_;
  bool filling_ = false;  // the plan, not the user, is setting the figures
  CommunicationCalculator* communication_;
  QuantizationCalculator* quantization_;
  std::shared_ptr<const PlanAnalysis> analysis_;
};

}  // namespace cs::gui
