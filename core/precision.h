#pragma once
// Numeric formats a plan can compute or store in.

#include <array>
#include <optional>
#include <string_view>

namespace cs {

enum class Precision { fp32, tf32, bf16, fp16, fp8, int8, int4 };

inline constexpr std::array<Precision, 7> kAllPrecisions = {
    Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16,
    Precision::fp8,  Precision::int8, Precision::int4};

// "fp32", "tf32", ... as written in JSON and on the command line.
std::string_view to_string(Precision p);
std::optional<Precision> precision_from_string(std::string_view text);

// Bytes one element takes in memory (TF32 is stored as FP32; INT4 packs two per byte).
double bytes_per_element(Precision p);

}  // namespace cs
