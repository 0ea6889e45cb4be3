#pragma once
// Light and dark palettes (Fusion style), applied to the whole app and to
// every chart under a window.

class QValueAxis;
class QWidget;

namespace cs::gui {

void applyTheme(bool dark);
bool isDarkTheme();
// Charts do not follow the palette by themselves: colours their background,
// titles, axes and legends after the palette.
void applyChartTheme(QWidget* root);

// An axis from about `lo` to `hi` with round ticks, 1, 2 or 5 times a power
// of ten apart (a breakdown read 755.2, 1510.4, ...), its ends on ticks;
// `whole` for counts (steps), whose ticks stay whole numbers.
void setRoundTicks(QValueAxis* axis, double lo, double hi, bool whole = false);

}  // namespace cs::gui
