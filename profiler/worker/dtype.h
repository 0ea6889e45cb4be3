#pragma once
// Element types of the worker's tensors, and host-side bfloat16 conversion.

#include <cstdint>
#include <cstring>
#include <string_view>

namespace cs::worker {

enum class DType : std::uint8_t { f32, bf16, f16, i32 };

inline int dtype_bytes(DType t) { return (t == DType::f32 || t == DType::i32) ? 4 : 2; }
inline std::string_view to_string(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::f16: return "fp16";
    case DType::i32: return "int32";
  }
  return "fp32";
}

// bfloat16 as the upper half of an IEEE float; conversion rounds to nearest even.
struct bf16 {
  std::uint16_t bits = 0;
};

inline float to_float(bf16 v) {
  std::uint32_t u = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline bf16 to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return {0x7fc0};  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>(u >> 16)};
}

}  // namespace cs::worker
