#include "app/cli/run_summary.h"

#include <algorithm>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/text_table.h"
#include "core/format.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"

namespace cs::cli {

nlohmann::json run_summary_json(const std::string& run_store) {
  auto reader = trace::TraceReader::open(run_store);
  if (!reader) return {{"error", reader.message()}};
  trace::AnalysisOptions options;
  options.per_step = false;
  auto analysis = trace::analyze_run(**reader, options);
  if (!analysis) return {{"error", analysis.message()}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const trace::RankAnalysis& r : analysis->ranks) {
    const trace::Breakdown& b = r.total;
    auto steps = (*reader)->steps(r.rank);
    ranks.push_back({{"rank", r.rank},
                     {"steps_in_store", steps ? static_cast<std::int64_t>(steps->size()) : 0},
                     {"span_ns", b.span_ns},
                     {"compute_ns", b.compute_ns},
                     {"communication_ns", b.communication_ns},
                     {"overlap_ns", b.overlap_ns},
                     {"overlap_percent", b.overlap_percent()},
                     {"exposed_communication_ns", b.exposed_communication_ns},
                     {"idle_ns", b.idle_ns}});
  }
  nlohmann::json collectives = nlohmann::json::array();
  for (const trace::CollectiveStats& c : analysis->collectives) {
    if (c.bytes <= 0) continue;
    collectives.push_back({{"name", c.name},
                           {"collective", std::string(trace::to_string(c.collective))},
                           {"bytes", c.bytes},
                           {"ranks", c.ranks},
                           {"count", c.count},
                           {"mean_ns", c.mean_ns},
                           {"busbw_gbps", c.busbw_gbps},
                           {"transfer_median_ns", c.transfer_median_ns},
                           {"transfer_busbw_gbps", c.transfer_busbw_gbps}});
    if (collectives.size() == 3) break;
  }
  return {{"status", (*reader)->state().status}, {"ranks", ranks}, {"collectives", collectives}};
}

void print_run_summary(std::ostream& out, const nlohmann::json& summary) {
  if (summary.contains("error")) {
    out << "no summary: " << summary["error"].get<std::string>() << '\n';
    return;
  }
  auto ms = [](std::int64_t ns) { return format_fixed(static_cast<double>(ns) / 1e6, 1); };
  auto share = [](std::int64_t part, std::int64_t whole) {
    return whole > 0
               ? format_fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 1) +
                     "%"
               : std::string("-");
  };
  out << "Where each rank's time went (ms over its traced span; overlap: communication hidden "
         "under compute)\n";
  TextTable table({"rank", "span", "compute", "comm", "overlap", "exposed comm", "idle"});
  for (std::size_t c = 1; c < 7; ++c)
    table.right_align(c);
  // Past kRankRows ranks, the first and those of the longest spans (100,000
  // ranks made a table of 100,000 rows).
  constexpr std::size_t kRankRows = 16;
  const nlohmann::json& all = summary["ranks"];
  std::vector<std::size_t> shown(all.size());
  for (std::size_t i = 0; i < all.size(); ++i)
    shown[i] = i;
  if (all.size() > kRankRows) {
    std::partial_sort(shown.begin() + kRankRows / 2, shown.begin() + kRankRows, shown.end(),
                      [&](std::size_t a, std::size_t b) {
                        return all[a].value("span_ns", std::int64_t{0}) >
                               all[b].value("span_ns", std::int64_t{0});
                      });
    shown.resize(kRankRows);
    std::sort(shown.begin(), shown.end());
  }
  for (const std::size_t i : shown) {
    const auto& r = all[i];
    const std::int64_t span = r["span_ns"];
    table.add({std::to_string(r["rank"].get<int>()), ms(span),
               ms(r["compute_ns"]) + " (" + share(r["compute_ns"], span) + ")",
               ms(r["communication_ns"]) + " (" + share(r["communication_ns"], span) + ")",
               format_fixed(r["overlap_percent"].get<double>(), 1) + "%",
               ms(r["exposed_communication_ns"]), ms(r["idle_ns"])});
  }
  table.print(out);
  if (shown.size() < all.size()) {
    out << "... " << all.size() - shown.size()
        << " more ranks; shown: the first and the longest spans (--json lists them all)\n";
  }
  for (const auto& c : summary["collectives"]) {
    out << "  " << c["name"].get<std::string>() << ": " << c["count"].get<std::int64_t>() << " x "
        << format_bytes(c["bytes"].get<double>()) << " over " << c["ranks"].get<int>() << " ranks, "
        << format_fixed(c["mean_ns"].get<double>() / 1e3, 1) << " us each, bus "
        << format_fixed(c["busbw_gbps"].get<double>(), 2) << " GB/s";
    // Without the wait for peers: the rank that joined each call last.
    if (const double transfer = c.value("transfer_median_ns", 0.0); transfer > 0) {
      out << " (transfer " << format_fixed(transfer / 1e3, 1) << " us, bus "
          << format_fixed(c.value("transfer_busbw_gbps", 0.0), 2) << " GB/s)";
    }
    out << '\n';
  }
}

}  // namespace cs::cli
