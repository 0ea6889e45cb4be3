#pragma once
// How a run held against its prediction is told, in the same words by
// `clusterscope trace stats` and the HTML report.

#include <string>

namespace cs::trace {

// The prediction's error against the measurement: "+0.8 %", "-51.7 %";
// "not measured", "not predicted", or "-" when neither side has a value.
std::string prediction_error_text(double predicted, double measured);

// Said where the mean step of all ranks and the critical rank's median step
// differ by more than 10 %: slow steps hold up the mean, and the table by the
// mean and the one by the median read as opposite verdicts (-34 % against
// +0.8 % with one step of 17.8 ms among 1.8 ms ones). Empty otherwise.
std::string mean_against_median_note(double mean_s, double median_s, int rank);

// Said after a machine probe more than 15 % from the model (MachineDrift::drifted).
inline constexpr const char* kMachineDriftAdvice =
    "A probe is more than 15 % from the model: the machine is not as it was calibrated (other "
    "work, another speed), or the model's rate for that operation is off. To tell which, "
    "calibrate again (clusterscope calibrate) and hold the run against the new presets (trace "
    "stats --predict-again).";

}  // namespace cs::trace
