#pragma once
// summary.json of a multi-peer run: merged from the peers' peer-<rank>-summary.json and the
// monitor's monitor-summary.json, by `sgp launch` at its end and by `sgp summarize`.
//
// Who writes it when several launchers (one per host) and a hand-started monitor share one run
// directory: each writes its own files first, then merges; one that finds another host's ranks
// still running (their peer-<rank>.jsonl is here, their summary not yet) writes summary.json
// only when there is none or the one there knows less (more missing peers, or no monitor
// results where it has them), so that the one finishing last, which sees every peer's summary
// and the monitor's, has the last word.
#include <filesystem>
#include <vector>

#include "sgp/run/summaries.hpp"

namespace sgp::launch {

// Merges what the peers and the monitor wrote into <run_dir>/summary.json (the peer count comes
// from config.json; InputError naming it when it cannot be read), with `failed_peers` listed as
// such, and logs the headline figures.
run::RunSummary summarize_run(const std::filesystem::path& run_dir,
                              const std::vector<int>& failed_peers = {});

// The same over several directories of one run (one per host, without a shared filesystem),
// written to <out>/summary.json. InputError (exit 2, naming the directories) when they are not
// of one run: another number of peers or command, another value of a setting a resume must keep,
// or the same rank's summary (or the monitor's) in two of them. A directory without config.json
// is taken as a hand-started monitor's when it holds monitor-summary.json.
run::RunSummary summarize_runs(const std::vector<std::filesystem::path>& run_dirs,
                               const std::filesystem::path& out);

// The end of `sgp launch` of `local` ranks (or of `sgp monitor`, with none): summary.json as
// described above.
run::RunSummary summarize_launch(const std::filesystem::path& run_dir,
                                 const std::vector<int>& local,
                                 const std::vector<int>& failed_peers);

// After summary.json is written: IoError (exit 3) naming the suspects and their reporters when a
// peer suspected an in-neighbour of pushing poisoned models and mixed them in unchanged
// (--robust none), so that such a run never ends as a success; with --robust clip the suspects
// are only logged.
void check_suspects(const run::RunSummary& summary, const std::filesystem::path& run_dir);

}  // namespace sgp::launch
