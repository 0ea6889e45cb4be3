#pragma once
// Human-readable quantities, shared by the CLI and the GUI.

#include <string>

namespace cs {

std::string format_bytes(double bytes);           // "79.6 GiB", "512 B"
std::string format_rate(double value, const char* unit);  // SI prefixes: "989 TFLOP/s", "50.0 GB/s"
std::string format_seconds(double seconds);       // "12.3 ms", "1.42 s", "3 h 20 min", "41.2 days"
std::string format_count(double n);               // "6.74 B", "124 M", "50,257"
std::string format_fixed(double value, int decimals);

}  // namespace cs
