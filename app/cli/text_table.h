#pragma once
// A plain-text table with aligned columns, for terminal output.

#include <ostream>
#include <string>
#include <vector>

namespace cs::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  // Columns whose cells are numbers are right-aligned.
  void right_align(std::size_t column) { right_.push_back(column); }
  // Control characters in a cell (a newline, an escape code in an imported
  // event's name) are shown escaped, "\n", "\x1b": raw, they split the row or
  // reached the terminal.
  void add(std::vector<std::string> row);
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::size_t> right_;
};

}  // namespace cs::cli
