#include "sgp/experiment/sweep_aggregate.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sgp::experiment {

namespace {

// The results that vary between seeds of one configuration are summary.csv's columns from
// kFirstResult to kLastResult; every other column but kPerRun's names the configuration (the
// values derived from it, such as the predicted rate, included).
constexpr std::string_view kFirstResult = "final_average_model_accuracy";
constexpr std::string_view kLastResult = "sum_of_weights";
const std::vector<std::string> kPerRun = {"point", "seed", "status", "run_dir"};

bool contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::optional<double> number(const std::string& text) {
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

struct Group {
  std::vector<std::string> configuration;
  int runs = 0;
  std::vector<std::vector<double>> values;  // per result
};

std::vector<std::string> mean_and_sd(const std::vector<double>& v) {
  if (v.empty()) return {"", ""};
  double sum = 0.0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  if (v.size() < 2) return {fmt::format("{}", mean), ""};
  double squares = 0.0;
  for (double x : v) squares += (x - mean) * (x - mean);
  return {fmt::format("{}", mean),
          fmt::format("{}", std::sqrt(squares / static_cast<double>(v.size() - 1)))};
}

std::size_t column(const std::vector<std::string>& header, const std::string& name) {
  return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
}

}  // namespace

std::vector<std::vector<std::string>> aggregate_table(
    const std::vector<std::vector<std::string>>& table) {
  if (table.empty()) return {};
  const auto& header = table.front();
  std::vector<std::size_t> config_columns, result_columns;
  std::vector<std::string> out_header, results;
  const std::size_t first = column(header, std::string(kFirstResult));
  const std::size_t last = column(header, std::string(kLastResult));
  for (std::size_t c = 0; c < header.size(); ++c) {
    if (contains(kPerRun, header[c])) continue;
    if (c >= first && c <= last) {
      result_columns.push_back(c);
      results.push_back(header[c]);
    } else {
      config_columns.push_back(c);
      out_header.push_back(header[c]);
    }
  }
  std::vector<Group> groups;
  std::map<std::vector<std::string>, std::size_t> index;
  const std::size_t status = column(header, "status");
  for (std::size_t r = 1; r < table.size(); ++r) {
    const auto& row = table[r];
    if (status >= row.size() || row[status] != "finished") continue;
    std::vector<std::string> configuration;
    for (std::size_t c : config_columns) configuration.push_back(row[c]);
    auto [it, added] = index.emplace(configuration, groups.size());
    if (added)
      groups.push_back({configuration, 0, std::vector<std::vector<double>>(results.size())});
    Group& g = groups[it->second];
    ++g.runs;
    for (std::size_t i = 0; i < result_columns.size(); ++i)
      if (const auto x = number(row[result_columns[i]])) g.values[i].push_back(*x);
  }
  out_header.push_back("n");
  for (const auto& name : results) {
    out_header.push_back(name + "_mean");
    out_header.push_back(name + "_sd");
  }
  std::vector<std::vector<std::string>> out = {out_header};
  for (const auto& g : groups) {
    auto row = g.configuration;
    row.push_back(std::to_string(g.runs));
    for (const auto& v : g.values) {
      const auto cells = mean_and_sd(v);
      row.insert(row.end(), cells.begin(), cells.end());
    }
    out.push_back(std::move(row));
  }
  return out;
}

namespace {

// "77.62 ± 0.31%" (a fraction shown in percent), "1.2e-06 ± 3.1e-07", "28.86 ms/it".
std::string shown(const std::vector<std::string>& header, const std::vector<std::string>& row,
                  const std::string& result, const char* format, double scale, const char* unit) {
  // A result the sweep's table has no column for (column() is then past the end) shows "-".
  const auto cell = [&](const std::string& name) -> std::optional<double> {
    const std::size_t c = column(header, name);
    return c < row.size() ? number(row[c]) : std::nullopt;
  };
  const auto mean = cell(result + "_mean");
  if (!mean) return "-";
  std::string text = fmt::format(fmt::runtime(format), scale * *mean);
  if (const auto sd = cell(result + "_sd"))
    text += " ± " + fmt::format(fmt::runtime(format), scale * *sd);
  return text + unit;
}

}  // namespace

std::vector<std::string> aggregate_lines(const std::vector<std::vector<std::string>>& aggregate) {
  if (aggregate.size() < 2) return {};
  const auto& header = aggregate.front();
  const std::size_t n = column(header, "n");
  std::vector<std::size_t> differing;
  for (std::size_t c = 0; c < n; ++c) {
    const bool differs = std::any_of(aggregate.begin() + 2, aggregate.end(),
                                     [&](const auto& row) { return row[c] != aggregate[1][c]; });
    if (differs) differing.push_back(c);
  }
  std::vector<std::string> lines;
  for (std::size_t r = 1; r < aggregate.size(); ++r) {
    const auto& row = aggregate[r];
    std::vector<std::string> names;
    for (std::size_t c : differing) {
      const auto x = number(row[c]);  // 0.7071067811865476 as 0.7071
      names.push_back(header[c] + "=" + (x ? fmt::format("{:.4g}", *x) : row[c]));
    }
    lines.push_back(fmt::format(
        "{}: average-model accuracy {} (n={}), mean peer accuracy {}, consensus error {}, {}",
        names.empty() ? std::string("all") : fmt::format("{}", fmt::join(names, " ")),
        shown(header, row, "final_average_model_accuracy", "{:.2f}", 100.0, "%"), row[n],
        shown(header, row, "mean_peer_accuracy", "{:.2f}", 100.0, "%"),
        shown(header, row, "final_consensus_error", "{:.2g}", 1.0, ""),
        shown(header, row, "median_iteration_ms", "{:.2f}", 1.0, " ms/it")));
  }
  return lines;
}

}  // namespace sgp::experiment
