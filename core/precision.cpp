#include "core/precision.h"

#include "core/enum_tables.h"

namespace cs {

std::string_view to_string(Precision p) { return kPrecisionNames.name(p); }

std::optional<Precision> precision_from_string(std::string_view text) {
  return kPrecisionNames.parse(text);
}

double bytes_per_element(Precision p) {
  switch (p) {
    case Precision::fp32:
    case Precision::tf32: return 4.0;
    case Precision::bf16:
    case Precision::fp16: return 2.0;
    case Precision::fp8:
    case Precision::int8: return 1.0;
    case Precision::int4: return 0.5;
  }
  return 4.0;
}

}  // namespace cs
