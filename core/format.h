#pragma once
// Human-readable quantities, shared by the CLI and the GUI.

#include <cstdint>
#include <string>
#include <string_view>

namespace cs {

std::string format_bytes(double bytes);           // "79.6 GiB", "512 B"
std::string format_rate(double value, const char* unit);  // SI prefixes: "989 TFLOP/s", "50.0 GB/s"
std::string format_seconds(double seconds);       // "12.3 ms", "1.42 s", "3 h 20 min", "41.2 days"
std::string format_count(double n);               // "6.74 B", "124 M", "50,257"
// An amount (GPU-hours, kWh, dollars): three significant figures below 100
// ("0.0031", "12.3"), whole below ten thousand ("8579"), format_count above
// ("32.6 M").
std::string format_amount(double v);
// Energy given in kWh, as the CLI and the app show it: an amount of kWh
// below ten thousand ("0.0031 kWh", "3101 kWh"), SI prefixes above
// ("33.7 MWh", not "33.7 k kWh").
std::string format_energy_kwh(double kwh);
// Money, as every cost the CLI and the app show reads: "$" and the amount
// ("$0.0031", "$8579", "$32.6 M").
std::string format_usd(double usd);
// A point in time, `ns` nanoseconds after an origin (the run's start), in
// seconds to `decimals` places (6: the microsecond, 9: the nanosecond), the
// decimals in groups of three apart by a narrow no-break space:
// "3.371 245 s". Events microseconds apart read apart, as they do in Nsight
// Systems; format_seconds' three figures ("3.37 s") are for durations.
std::string format_time_ns(std::int64_t ns, int decimals = 6);
std::string format_fixed(double value, int decimals);
// To `digits` significant digits, as %g writes them ("0.00509804",
// "7.84314e-06", "98"): for figures that may be far below 1, such as a
// quantisation scale, which fixed decimals round to nothing.
std::string format_significant(double value, int digits = 6);
// Where a model's figure is twice the measured one or more, or half or
// less, the factor, which a percentage hides (+900 %, -90 %): "10× the
// measured", "1/10 of the measured"; else "".
std::string model_error_factor(double predicted, double measured);

// Terminal cells a UTF-8 text takes: East Asian wide characters and emoji
// two, combining marks none, the rest one.
std::size_t display_width(std::string_view utf8);
// The text in at most `cells` cells, its middle left out ("void split_emb...
// <float, 32>") where it is wider: kernel names differ at their ends. Cut
// between characters, never inside one.
std::string fit_width(std::string_view utf8, std::size_t cells);
// Characters (UTF-8 code points: every byte but a continuation, 10xxxxxx,
// begins one) in `utf8`, and its first `chars` of them, cut between
// characters.
std::size_t utf8_characters(std::string_view utf8);
std::string_view first_characters(std::string_view utf8, std::size_t chars);
// A key or name as a message quotes it: its first `chars` characters and
// "…" where it is longer (an unknown key of 100 MB was echoed whole to
// stderr). Cut between UTF-8 characters; reads no further than it keeps.
std::string cut_for_message(std::string_view utf8, std::size_t chars = 80);

}  // namespace cs
