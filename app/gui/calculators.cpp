#include "app/gui/calculators.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>
#include <cmath>
#include <limits>

#include "app/gui/analysis.h"
#include "app/gui/field_widgets.h"
#include "core/format.h"
#include "planners/seed_formulas.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

// decimals < 0: any number, as the CLI takes it (NumberSpinBox).
QDoubleSpinBox* spin(double lo, double hi, double value, int decimals, const QString& suffix,
                     const char* name) {
  QDoubleSpinBox* box = decimals < 0 ? new NumberSpinBox : new QDoubleSpinBox;
  box->setObjectName(QString::fromLatin1(name));
  box->setRange(lo, hi);
  if (decimals >= 0) box->setDecimals(decimals);
  box->setValue(value);
  box->setSuffix(suffix);
  box->setKeyboardTracking(true);
  return box;
}

QChartView* chartView(QChart* chart) {
  auto* view = new QChartView(chart);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumSize(240, 180);
  chart->legend()->setAlignment(Qt::AlignBottom);
  return view;
}

enum class QuantMode { article, unsigned_range, signed_range, symmetric };

}  // namespace

// --- communication cost ------------------------------------------------------

CommunicationCalculator::CommunicationCalculator(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("communicationCalculator"));
  // The article's example: S = 100 MB, N = 8, B = 10 GB/s, L = 0.1 ms.
  megabytes_ = spin(0.001, 1e9, 100, 3, QStringLiteral(" MB"), "commBytes");
  devices_ = new QSpinBox;
  devices_->setObjectName(QStringLiteral("commDevices"));
  devices_->setRange(1, 1 << 20);
  devices_->setValue(8);
  bandwidth_ = spin(0.001, 1e6, 10, 3, QStringLiteral(" GB/s"), "commBandwidth");
  // In microseconds to the nanosecond: a plan's link latency (0.25 us)
  // read 0.0003 ms in milliseconds to 4 places, 20 % off.
  latency_ = spin(0, 1e9, 100, 3, QStringLiteral(" µs"), "commLatency");
  low_ = spin(0.001, 1e6, 1, 3, QStringLiteral(" GB/s"), "commLow");
  high_ = spin(0.001, 1e6, 100, 3, QStringLiteral(" GB/s"), "commHigh");
  result_ = new QLabel;
  result_->setObjectName(QStringLiteral("commResult"));
  result_->setWordWrap(true);
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* form = new QFormLayout;
  form->addRow(tr("Gradient size S"), megabytes_);
  form->addRow(tr("Devices N"), devices_);
  form->addRow(tr("Bandwidth B"), bandwidth_);
  form->addRow(tr("Latency L"), latency_);
  auto* range = new QHBoxLayout;
  range->addWidget(low_);
  range->addWidget(new QLabel(tr("to")));
  range->addWidget(high_);
  form->addRow(tr("Chart bandwidths"), range);
  form->addRow(result_);

  auto* chart = new QChart;
  chart->setTitle(tr("Communication time against bandwidth"));
  simple_ = new QLineSeries;
  simple_->setName(tr("articles: S·N/B + L·(N−1)"));
  ring_ = new QLineSeries;
  ring_->setName(tr("ring all-reduce: 2(N−1)/N·S/B + 2(N−1)·L"));
  chart->addSeries(simple_);
  chart->addSeries(ring_);
  auto* x = new QLogValueAxis;
  x->setTitleText(tr("bandwidth (GB/s)"));
  x->setLabelFormat(QStringLiteral("%g"));
  x->setBase(10);
  auto* y = new QLogValueAxis;
  y->setTitleText(tr("seconds"));
  y->setLabelFormat(QStringLiteral("%g"));
  y->setBase(10);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QLineSeries* s : {simple_, ring_}) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  chart_view_ = chartView(chart);

  auto* left = new QWidget;
  left->setLayout(form);
  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(left);
  splitter->addWidget(chart_view_);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(splitter);

  for (QDoubleSpinBox* box : {megabytes_, bandwidth_, latency_, low_, high_}) {
    connect(box, &QDoubleSpinBox::valueChanged, this, &CommunicationCalculator::recompute);
  }
  connect(devices_, &QSpinBox::valueChanged, this, &CommunicationCalculator::recompute);
  recompute();
}

void CommunicationCalculator::usePlan(const PlanAnalysis& a) {
  // Each plan without an exchange says why: a plan that cannot run (tp 3
  // of 32 heads) and an inference plan were said to have DP = 1.
  if (!a.estimate) {
    result_->setText(
        tr("The current plan cannot run (the Plan panel says why): it has no "
           "gradient exchange to fill these in from."));
    return;
  }
  if (a.estimate->inference) {
    result_->setText(tr("The current plan is inference: it computes no gradients to exchange."));
    return;
  }
  if (a.estimate->seed_communication.ranks < 2) {
    result_->setText(tr("The current plan has no data-parallel gradient exchange (DP = 1)."));
    return;
  }
  const plan::SeedCommunication& s = a.estimate->seed_communication;
  megabytes_->setValue(s.gradient_bytes / 1e6);
  devices_->setValue(s.ranks);
  bandwidth_->setValue(s.bandwidth / 1e9);
  latency_->setValue(s.latency * 1e6);
  // The same figures as before change no box: the result of the plan
  // before (a DP = 1 note) would stay.
  recompute();
}

void CommunicationCalculator::recompute() {
  const double bytes = megabytes_->value() * 1e6;
  const int n = devices_->value();
  const double latency = latency_->value() * 1e-6;
  const double b = bandwidth_->value() * 1e9;
  const double simple = plan::simple_communication_seconds(bytes, n, b, latency);
  const double ring = plan::ring_all_reduce_seconds(bytes, n, b, latency);
  // Small S over many GPUs: the ring's 2(N−1) latencies outweigh the bytes
  // it saves ("0.5× faster" said it was slower).
  const QString ratio =
      ring > 0 && simple >= ring
          ? tr("so it is %1× faster here.").arg(QString::number(simple / ring, 'f', 1))
      : ring > 0 ? tr("yet it is %1× slower here: its 2(N−1) latencies outweigh the bytes it "
                      "saves.")
                       .arg(QString::number(ring / simple, 'f', 1))
                 : QStringLiteral("—");
  result_->setText(
      tr("<b>Articles' model</b>: T = S·N/B + L·(N−1) = <b>%1</b><br>"
         "<b>Ring all-reduce</b>: each GPU sends 2(N−1)/N·S = %2, T = <b>%3</b><br>"
         "The simple model counts every GPU's S crossing one link; a ring moves under 2·S per GPU "
         "whatever N is, %4")
          // In the unit S is given in (MB, not MiB).
          .arg(q(format_seconds(simple)),
               q(format_rate(2.0 * (n - 1) / std::max(1, n) * bytes, "B")), q(format_seconds(ring)),
               ratio));

  // Log-spaced bandwidths: a few hundred points, pushed with replace().
  QList<QPointF> s_points;
  QList<QPointF> r_points;
  double lo = std::min(low_->value(), high_->value());
  double hi = std::max(low_->value(), high_->value());
  if (hi <= lo) hi = lo * 10;
  constexpr int kPoints = 200;
  double y_min = INFINITY;
  double y_max = 0;
  for (int i = 0; i <= kPoints; ++i) {
    const double gbs = lo * std::pow(hi / lo, double(i) / kPoints);
    const double t_s = plan::simple_communication_seconds(bytes, n, gbs * 1e9, latency);
    const double t_r = plan::ring_all_reduce_seconds(bytes, n, gbs * 1e9, latency);
    if (t_s > 0) s_points.append({gbs, t_s});
    if (t_r > 0) r_points.append({gbs, t_r});
    for (double t : {t_s, t_r}) {
      if (t > 0) {
        y_min = std::min(y_min, t);
        y_max = std::max(y_max, t);
      }
    }
  }
  simple_->replace(s_points);
  ring_->replace(r_points);
  auto* chart = chart_view_->chart();
  chart->axes(Qt::Horizontal).front()->setRange(lo, hi);
  if (y_max > 0) chart->axes(Qt::Vertical).front()->setRange(y_min / 1.5, y_max * 1.5);
}

// --- INT8 quantisation --------------------------------------------------------

QuantizationCalculator::QuantizationCalculator(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("quantizationCalculator"));
  // The article's example: the range [-0.5, 0.8] and the value 0.3. Any
  // number `clusterscope calc quantize` takes (four decimals made a range
  // of 0.000001 wide 0).
  min_ = spin(-1e9, 1e9, -0.5, -1, {}, "quantMin");
  max_ = spin(-1e9, 1e9, 0.8, -1, {}, "quantMax");
  value_ = spin(-1e9, 1e9, 0.3, -1, {}, "quantValue");
  bits_ = new QSpinBox;
  bits_->setObjectName(QStringLiteral("quantBits"));
  bits_->setRange(2, 16);
  bits_->setValue(8);
  mode_ = new QComboBox;
  mode_->setObjectName(QStringLiteral("quantMode"));
  mode_->addItem(tr("the articles' (z = round(−min/s), stored as int8)"), int(QuantMode::article));
  mode_->addItem(tr("unsigned, 0 to 2^bits − 1"), int(QuantMode::unsigned_range));
  mode_->addItem(tr("signed, −2^(bits−1) to 2^(bits−1) − 1"), int(QuantMode::signed_range));
  mode_->addItem(tr("symmetric, z = 0, s = max|x| / (2^(bits−1) − 1)"), int(QuantMode::symmetric));
  scale_ = new QLabel;
  scale_->setObjectName(QStringLiteral("quantScale"));
  zero_point_ = new QLabel;
  zero_point_->setObjectName(QStringLiteral("quantZeroPoint"));
  range_ = new QLabel;
  mapping_ = new QLabel;
  mapping_->setObjectName(QStringLiteral("quantMapping"));
  mapping_->setWordWrap(true);
  mapping_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  for (QLabel* l : {scale_, zero_point_})
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* form = new QFormLayout;
  form->addRow(tr("Range min"), min_);
  form->addRow(tr("Range max"), max_);
  form->addRow(tr("Bits"), bits_);
  form->addRow(tr("Integers"), mode_);
  form->addRow(tr("Scale s = (max − min)/(2^bits − 1)"), scale_);
  form->addRow(tr("Zero point z"), zero_point_);
  form->addRow(tr("Integer range"), range_);
  form->addRow(tr("Value x"), value_);
  form->addRow(mapping_);

  table_ = new QTableWidget;
  table_->setObjectName(QStringLiteral("quantTable"));
  table_->setColumnCount(6);
  table_->setHorizontalHeaderLabels({tr("x"), tr("round(x/s) + z"), tr("q (clamped)"),
                                     tr("x' = s(q − z)"), tr("error x' − x"), tr("")});
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

  auto* chart = new QChart;
  chart->setTitle(tr("Quantised value and error across the range"));
  dequantized_ = new QLineSeries;
  dequantized_->setName(tr("x' (dequantised)"));
  error_ = new QLineSeries;
  error_->setName(tr("error x' − x"));
  chart->addSeries(dequantized_);
  chart->addSeries(error_);
  auto* x = new QValueAxis;
  x->setTitleText(tr("x"));
  auto* y = new QValueAxis;
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QLineSeries* s : {dequantized_, error_}) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  chart_view_ = chartView(chart);

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addLayout(form);
  left_layout->addWidget(table_, 1);
  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(left);
  splitter->addWidget(chart_view_);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(splitter);

  for (QDoubleSpinBox* box : {min_, max_, value_}) {
    connect(box, &QDoubleSpinBox::valueChanged, this, &QuantizationCalculator::recompute);
  }
  connect(bits_, &QSpinBox::valueChanged, this, &QuantizationCalculator::recompute);
  connect(mode_, &QComboBox::currentIndexChanged, this, &QuantizationCalculator::recompute);
  recompute();
}

void QuantizationCalculator::recompute() {
  const double lo = min_->value();
  const double hi = max_->value();
  const int bits = bits_->value();
  const auto mode = QuantMode(mode_->currentData().toInt());
  const bool article = mode == QuantMode::article;
  bits_->setEnabled(!article);  // the articles' mix is defined for INT8 only
  // A range that is no range is refused, as `clusterscope calc quantize`
  // refuses it (it showed a scale of 1 "of [0, 0]"); so is one narrower than
  // the smallest normal float32, whose scale is 0.
  const bool ordered = lo < hi;
  const bool range_ok = ordered && hi - lo >= std::numeric_limits<float>::min();
  for (QDoubleSpinBox* box : {min_, max_}) {
    box->setStyleSheet(range_ok ? QString() : QStringLiteral("color: #c03030"));
  }
  if (!range_ok) {
    scale_->setText(QStringLiteral("—"));
    zero_point_->setText(QStringLiteral("—"));
    range_->setText(QStringLiteral("—"));
    mapping_->setText(
        (ordered ? tr("<span style=\"color:#c03030\">min %1 and max %2 are closer than the "
                      "smallest normal float32 (1.2e-38): no tensor's range is, and its scale "
                      "would be 0</span>")
                 : tr("<span style=\"color:#c03030\">min must be below max (got min %1, "
                      "max %2)</span>"))
            .arg(lo)
            .arg(hi));
    table_->setRowCount(0);
    dequantized_->clear();
    error_->clear();
    return;
  }
  const plan::QuantParams p =
      article ? plan::article_int8_params(lo, hi)
      : mode == QuantMode::symmetric
          ? plan::symmetric_quant_params(lo, hi, bits)
          : plan::quant_params(lo, hi, bits, mode == QuantMode::signed_range);
  QString scale_text = QString::number(p.scale, 'g', 6);
  if (mode == QuantMode::symmetric && (p.min != lo || p.max != hi)) {
    scale_text += tr(" (of [%1, %2]: symmetric about 0)").arg(p.min).arg(p.max);
  } else if (p.min != lo || p.max != hi) {
    scale_text += tr(" (of [%1, %2]: the range widened to hold 0 exactly)").arg(p.min).arg(p.max);
  }
  scale_->setText(scale_text);
  zero_point_->setText(QString::number(p.zero_point));
  range_->setText(QStringLiteral("[%1, %2]").arg(p.q_min).arg(p.q_max));

  const double x = value_->value();
  const plan::Quantized v = plan::quantize(x, p);
  QString text = tr("%1 → round(%1 / %2) + %3 = <b>%4</b>")
                     .arg(x)
                     .arg(QString::number(p.scale, 'g', 6))
                     .arg(p.zero_point)
                     .arg(v.unclamped);
  if (v.clamped) {
    text += tr(", outside [%1, %2]: <b>clamped to %3</b>").arg(p.q_min).arg(p.q_max).arg(v.q);
  }
  text += tr("; back to x' = %1, error <b>%2</b>")
              .arg(v.dequantized, 0, 'g', 6)
              .arg(v.error, 0, 'g', 4);
  if (article && v.clamped) {
    text += tr("<br>The articles' zero point assumes 0 to 255; stored as a signed int8 the values "
               "above %1 overflow. Unsigned storage (or z − 128) keeps them.")
                .arg(p.scale * (p.q_max - p.zero_point), 0, 'g', 4);
  }
  mapping_->setText(text);

  // The mapping of eleven points across the range, and the value asked for.
  std::vector<double> xs;
  for (int i = 0; i <= 10; ++i)
    xs.push_back(lo + (hi - lo) * i / 10.0);
  xs.push_back(x);
  table_->setRowCount(int(xs.size()));
  for (int r = 0; r < int(xs.size()); ++r) {
    const plan::Quantized m = plan::quantize(xs[std::size_t(r)], p);
    const QStringList cells{QString::number(xs[std::size_t(r)], 'g', 6),
                            QString::number(m.unclamped),
                            QString::number(m.q),
                            QString::number(m.dequantized, 'g', 6),
                            QString::number(m.error, 'g', 4),
                            m.clamped ? tr("clamped") : QString()};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (m.clamped) item->setForeground(QColor(0xd0, 0x30, 0x30));
      if (r == int(xs.size()) - 1) {
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      table_->setItem(r, c, item);
    }
  }

  QList<QPointF> deq;
  QList<QPointF> err;
  constexpr int kPoints = 400;
  double y_lo = 0;
  double y_hi = 0;
  for (int i = 0; i <= kPoints; ++i) {
    const double xi = lo + (hi - lo) * i / kPoints;
    const plan::Quantized m = plan::quantize(xi, p);
    deq.append({xi, m.dequantized});
    err.append({xi, m.error});
    y_lo = std::min({y_lo, m.dequantized, m.error, xi});
    y_hi = std::max({y_hi, m.dequantized, m.error, xi});
  }
  dequantized_->replace(deq);
  error_->replace(err);
  auto* chart = chart_view_->chart();
  chart->axes(Qt::Horizontal).front()->setRange(lo, hi > lo ? hi : lo + 1);
  const double pad = 0.05 * std::max(1e-9, y_hi - y_lo);
  chart->axes(Qt::Vertical).front()->setRange(y_lo - pad, y_hi + pad);
}

// --- both -----------------------------------------------------------------------

Calculators::Calculators(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("calculators"));
  tabs_ = new QTabWidget;
  communication_ = new CommunicationCalculator;
  quantization_ = new QuantizationCalculator;
  tabs_->addTab(communication_, tr("Communication cost"));
  tabs_->addTab(quantization_, tr("INT8 quantisation"));
  follow_plan_ = new QCheckBox(tr("Follow the current plan"));
  follow_plan_->setObjectName(QStringLiteral("commFollowPlan"));
  follow_plan_->setToolTip(
      tr("Fill S, N, B and L from the data-parallel gradients of each plan the app analyses. "
         "Editing one of them by hand stops following."));
  connect(follow_plan_, &QCheckBox::toggled, this, [this](bool on) {
    if (on) fillFromPlan();
  });
  // A figure typed in is the user's own question: the plan no longer overwrites it.
  auto stop_following = [this] {
    if (!filling_) follow_plan_->setChecked(false);
  };
  for (QDoubleSpinBox* box :
       {communication_->bytesBox(), communication_->bandwidthBox(), communication_->latencyBox()})
    connect(box, &QDoubleSpinBox::valueChanged, this, stop_following);
  connect(communication_->devicesBox(), &QSpinBox::valueChanged, this, stop_following);
  tabs_->setCornerWidget(follow_plan_, Qt::TopRightCorner);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(tabs_);
}

void Calculators::setAnalysis(std::shared_ptr<const PlanAnalysis> analysis) {
  analysis_ = std::move(analysis);
  if (follow_plan_->isChecked()) fillFromPlan();
}

void Calculators::fillFromPlan() {
  if (!analysis_) return;
  filling_ = true;
  communication_->usePlan(*analysis_);
  filling_ = false;
}

}  // namespace cs::gui
