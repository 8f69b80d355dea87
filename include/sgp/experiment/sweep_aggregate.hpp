#pragma once
// A sweep's aggregate: one row per configuration (every grid value but the seed) with the number
// of finished runs and the mean and sample standard deviation of each result over them, so that
// "which algorithm wins under Dirichlet 0.1, by how much" needs no groupby. Written as
// aggregate.csv beside summary.csv and printed at the end of the sweep.
#include <string>
#include <vector>

namespace sgp::experiment {

// `table`: summary.csv's header and rows (summary_table). Returns aggregate.csv's: the
// configuration columns, `n` (finished runs), and `<result>_mean`, `<result>_sd` per result
// (sd empty for one run). Only finished rows count; configurations keep their first row's order.
std::vector<std::vector<std::string>> aggregate_table(
    const std::vector<std::vector<std::string>>& table);

// One line per configuration of `aggregate` (aggregate_table's), naming only the configuration
// columns that differ between rows: "topology=ring algo=sgp: accuracy 77.62 ± 0.31% (n=2), ...".
std::vector<std::string> aggregate_lines(const std::vector<std::vector<std::string>>& aggregate);

}  // namespace sgp::experiment
