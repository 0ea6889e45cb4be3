#include "core/elided_name.h"

namespace cs {

namespace {
bool begins_character(char byte) {
  return (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
}
}  // namespace

std::string elided_name(std::string_view utf8, std::size_t chars) {
  if (utf8.size() <= chars) return std::string(utf8);  // no more characters than bytes
  const std::size_t tail_chars = chars / 2;
  const std::size_t head_chars = chars - tail_chars;
  // The start: the first head_chars characters.
  std::size_t head = 0, counted = 0;
  for (; head < utf8.size(); ++head) {
    if (begins_character(utf8[head]) && counted++ == head_chars) break;
  }
  // The end: the last tail_chars characters after the start.
  std::size_t tail = utf8.size();
  counted = 0;
  while (tail > head && counted < tail_chars) {
    --tail;
    if (begins_character(utf8[tail])) ++counted;
  }
  // Whole where the start and the end meet: no more than `chars` characters.
  if (tail == head) return std::string(utf8);
  std::string out;
  out.reserve(head + 5 + (utf8.size() - tail));
  out.append(utf8.substr(0, head)).append(" \u2026 ").append(utf8.substr(tail));
  return out;
}

}  // namespace cs
