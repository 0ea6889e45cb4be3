#include "core/prediction_text.h"

#include "core/format.h"

namespace cs::trace {

std::string prediction_error_text(double predicted, double measured) {
  if (measured <= 0) return predicted > 0 ? "not measured" : "-";
  if (!(predicted > 0)) return "not predicted";
  return (predicted >= measured ? "+" : "") + format_fixed(100 * (predicted / measured - 1), 1) +
         " %";
}

}  // namespace cs::trace
