#pragma once
// Topologies as Graphviz DOT files (format in docs/architecture.md), read and written with Boost's
// read_graphviz / write_graphviz:
//
//   digraph topology {
//     period=3;                                   // graph: number of phases (absent: static)
//     0 [endpoint="tcp://127.0.0.1:29500"];       // node ids are the ranks 0..N-1
//     1 [public_key="<40 Z85 chars>"];            // optional CURVE key (`sgp keygen`)
//     0 -> 1 [phase=0, weight=0.5];               // edge: active when k % period == phase
//     0 -> 0 [phase=0, weight=0.5];               // self-edge: the weight a rank keeps
//     1 -> 2 [phase=0];                           // no weight: see the rules below
//   }
//
// Reading rules, per phase and rank i (a "column" of the mixing matrix):
//   - An edge without `phase` is active in every phase.
//   - Either every out-edge of i in that phase has a `weight` or none has. With weights, a
//     self-edge i -> i gives p_ii and the column must sum to 1; without a self-edge, p_ii is what
//     is left (1 - sum), which must not be negative.
//   - Without out-edge weights: p_ii is the self-edge's weight when there is one, else the
//     requested self weight a, else 1/(d+1); the rest is spread evenly over the d out-edges.
//   - An edge between two ranks needs a positive weight (given or inferred): a weight-0 edge
//     pushes nothing while its receiver waits for it every round.
//   - public_key (node) and monitor_public_key (graph): all nodes or none, each 40 Z85
//     characters, distinct. With keys, every peer and monitor socket uses CURVE (docs/security.md).
//   - Limits against hostile files, checked before the memory is spent: nesting of braces and
//     brackets at most 100 deep (Boost's parser recurses), period <= 1024, period x N <= 2^18
//     and (edge, phase) pairs <= 2^20.
//   - Numbers written in exponent notation must be quoted ("1e-3"): Graphviz's grammar reads an
//     unquoted 1e-3 as 1 and drops the rest, so the reader rejects it.
// Every problem in a file is collected and reported together in one InputError, each line naming
// the file and the node, edge or line, and what was expected.
//
// Writing leaves out what the reader infers: a column of uniform weights gets no weights at all
// (so the self weight option applies to it when read), a column "self weight a, the rest spread
// evenly" gets only its self-edge's weight, any other column gets every weight. The period and
// phases are written when the period is above 1. read(write(s)) == s exactly (same doubles).
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "sgp/topology/schedule.hpp"

namespace sgp::topology {

struct DotReadOptions {
  // Every node must have an `endpoint` (true for anything that will run peers).
  bool require_endpoints = false;
  // The union of the phases' graphs must be strongly connected: a problem listed with the others
  // (sgp topology check lists every problem at once).
  bool require_strongly_connected = false;
  // The mixing rate for columns whose file gives no weights (see above); must be in (0, 1).
  std::optional<double> self_weight;
};

// `source_name` names the text in error messages (the file path, or e.g. "<string>").
Schedule parse_dot(std::string_view text, const std::string& source_name,
                   const DotReadOptions& options = {});
// Throws InputError when the file cannot be read, as well as for every problem parse_dot finds.
Schedule read_dot_file(const std::filesystem::path& path, const DotReadOptions& options = {});

// `comment` (may be multi-line) is written first as `// ` lines.
void write_dot(const Schedule& schedule, std::ostream& out, std::string_view comment = {});
std::string to_dot(const Schedule& schedule, std::string_view comment = {});
// Throws IoError when the file cannot be written.
void write_dot_file(const Schedule& schedule, const std::filesystem::path& path,
                    std::string_view comment = {});

}  // namespace sgp::topology
