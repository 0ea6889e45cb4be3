#include "core/prediction_text.h"

#include <cmath>

#include "core/format.h"

namespace cs::trace {

std::string prediction_error_text(double predicted, double measured) {
  if (measured <= 0) return predicted > 0 ? "not measured" : "-";
  if (!(predicted > 0)) return "not predicted";
  return (predicted >= measured ? "+" : "") + format_fixed(100 * (predicted / measured - 1), 1) +
         " %";
}

std::string mean_against_median_note(double mean_s, double median_s, int rank) {
  if (!(mean_s > 0) || !(median_s > 0) || std::abs(mean_s / median_s - 1) <= 0.10) return {};
  const bool above = mean_s > median_s;
  return "The mean step (" + format_seconds(mean_s) + ") is " +
         format_fixed(100 * std::abs(mean_s / median_s - 1), 0) + " % " +
         (above ? "above" : "below") + " rank " + std::to_string(rank) + "'s median (" +
         format_seconds(median_s) +
         "): " + (above ? "some steps ran long" : "some steps ran short, or ranks differ") +
         ". The comparison by the median, part by part, is the steadier one.";
}

}  // namespace cs::trace
