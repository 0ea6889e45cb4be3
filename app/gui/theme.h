#pragma once
// Light and dark palettes (Fusion style), applied to the whole app and to
// every chart under a window.

class QWidget;

namespace cs::gui {

void applyTheme(bool dark);
bool isDarkTheme();
// Charts do not follow the palette by themselves: colours their background,
// titles, axes and legends after the palette.
void applyChartTheme(QWidget* root);

}  // namespace cs::gui
