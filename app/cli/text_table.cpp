#include "app/cli/text_table.h"

#include <algorithm>

#include "core/format.h"

namespace cs::cli {

namespace {
std::string escaped(const std::string& cell) {
  if (std::none_of(cell.begin(), cell.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
      }))
    return cell;
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : cell) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

void TextTable::add(std::vector<std::string> row) {
  for (std::string& cell : row)
    cell = escaped(cell);
  rows_.push_back(std::move(row));
}

void TextTable::print(std::ostream& out) const {
  std::vector<std::size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], display_width(row[i]));  // cells, not bytes
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(widths[i] - display_width(cell), ' ');
      const bool right = std::find(right_.begin(), right_.end(), i) != right_.end();
      if (i > 0) line += "  ";
      line += right ? pad + cell : cell + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  print_row(header_);
  std::vector<std::string> rule;
  for (std::size_t w : widths) rule.push_back(std::string(w, '-'));
  print_row(rule);
  for (const auto& row : rows_) print_row(row);
}

}  // namespace cs::cli
