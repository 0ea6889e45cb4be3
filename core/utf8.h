#pragma once
// Text from other programs (an Nsight Systems export's names, a process's
// name, a thread's) is not always UTF-8, and JSON, HTML and Qt need it to be.
// A store keeps its text as UTF-8: what is not becomes U+FFFD.

#include <string>
#include <string_view>

namespace cs {

bool is_valid_utf8(std::string_view text);
// `text` with each byte that does not start or continue a well-formed UTF-8
// character (overlong forms and surrogates included) replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

}  // namespace cs
