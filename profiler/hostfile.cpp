#include "profiler/hostfile.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/parse_count.h"

namespace cs::launch {

namespace {

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

// Shows a bad value as it was written, escaping what a terminal would hide.
std::string in_quotes(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

bool valid_host_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  if (name.front() == '-' || name.front() == '.') return false;
  for (unsigned char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == ':';
    if (!ok) return false;
  }
  return true;
}

Result<std::vector<Host>> parse_hostfile(std::string_view text, std::string_view file_name) {
  std::vector<Host> hosts;
  std::vector<std::string> problems;
  int line_number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const auto hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    const auto words = split_words(line);
    if (words.empty()) {
      if (end == text.size()) break;
      continue;
    }
    const std::string where = std::string(file_name) + ":" + std::to_string(line_number) + ": ";
    Host host;
    host.line = line_number;
    host.name = std::string(words[0]);
    if (!valid_host_name(host.name)) {
      problems.push_back(where + in_quotes(host.name) +
                         " is not a host name (letters, digits, '-', '.', '_' and ':' only)");
      continue;
    }
    bool line_ok = true;
    for (std::size_t w = 1; w < words.size(); ++w) {
      const std::string_view word = words[w];
      const auto eq = word.find('=');
      const std::string_view key = word.substr(0, eq);
      if (eq == std::string_view::npos ||
          (key != "slots" && key != "max_slots" && key != "max-slots")) {
        problems.push_back(where + "unexpected " + in_quotes(word) +
                           " (expected slots=N or max_slots=N after the host name)");
        line_ok = false;
        break;
      }
      const std::string_view value = word.substr(eq + 1);
      const int number = parse_count(value).value_or(0);
      if (number < 1 || number > 1 << 20) {
        problems.push_back(where + std::string(key) + " must be a whole number from 1 to " +
                           std::to_string(1 << 20) + " (got " + in_quotes(value) + ")");
        line_ok = false;
        break;
      }
      (key == "slots" ? host.slot_count : host.max_slot_count) = number;
    }
    if (!line_ok) continue;
    if (host.max_slot_count > 0 && host.slot_count > host.max_slot_count) {
      problems.push_back(where + "slots=" + std::to_string(host.slot_count) +
                         " exceeds max_slots=" + std::to_string(host.max_slot_count));
      continue;
    }
    hosts.push_back(std::move(host));
    if (end == text.size()) break;
  }
  if (!problems.empty()) {
    std::string message;
    for (const std::string& p : problems)
      message += (message.empty() ? "" : "\n") + p;
    return Error{message};
  }
  if (hosts.empty()) return Error{std::string(file_name) + ": no hosts listed"};
  return hosts;
}

Result<std::vector<Host>> read_hostfile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Error{path + ": is a folder, not a hostfile"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open hostfile"};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error{path + ": cannot read hostfile"};
  return parse_hostfile(text.str(), path);
}

int total_slots(const std::vector<Host>& hosts) {
  // Summed in 64 bits and capped at INT_MAX: 2048 hosts of slots=1048576
  // (the most a line may give) overflowed an int, and no run has more ranks.
  std::int64_t total = 0;
  for (const Host& h : hosts)
    total += h.slot_count;
  return static_cast<int>(std::min<std::int64_t>(total, std::numeric_limits<int>::max()));
}

std::string format_hostfile(const std::vector<Host>& hosts) {
  std::string out;
  for (const Host& h : hosts) {
    out += h.name + " slots=" + std::to_string(h.slot_count);
    if (h.max_slot_count > 0) out += " max_slots=" + std::to_string(h.max_slot_count);
    out += '\n';
  }
  return out;
}

}  // namespace cs::launch
