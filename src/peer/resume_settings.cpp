#include "sgp/peer/resume_settings.hpp"

#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/config/run_length.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/fnv1a.hpp"
#include "sgp/peer/trainer.hpp"
#include "sgp/run/file_names.hpp"
#include "sgp/run/run_directory.hpp"
#include "sgp/run/summaries.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::peer {

namespace {

// FNV-1a 64 of every phase's self weights and pushes, exactly (hex floats).
std::string mixing_digest(const topology::Schedule& s) {
  std::string text;
  for (int phase = 0; phase < s.period(); ++phase) {
    for (int rank = 0; rank < s.num_peers(); ++rank) {
      text += fmt::format("{} {} {:a}:", phase, rank, s.self_weight(rank, phase));
      for (const auto& push : s.out_edges(rank, phase)) {
        text += fmt::format(" {}={:a}", push.peer, push.weight);
      }
      text += '\n';
    }
  }
  return fmt::format("{:016x}", fnv1a(text));
}

std::string shown(const nlohmann::json* value) { return value ? value->dump() : "(none)"; }

}  // namespace

nlohmann::json resume_settings(const config::TrainConfig& config, int num_peers,
                               const topology::Schedule* mixing) {
  nlohmann::json out = nlohmann::json::object();
  for (const config::Setting* s : config::training_settings()) {
    if (s->fixed_across_resume()) out[std::string(s->key())] = s->get(config);
  }
  out["peers"] = num_peers;
  if (mixing) out["mixing_weights"] = mixing_digest(*mixing);
  return out;
}

void require_same_resume_settings(const nlohmann::json& saved, const nlohmann::json& now,
                                  const std::string& source) {
  std::set<std::string> keys;
  for (const auto& [key, value] : saved.items()) keys.insert(key);
  for (const auto& [key, value] : now.items()) keys.insert(key);
  std::vector<std::string> differences;
  for (const auto& key : keys) {
    const auto* then = saved.contains(key) ? &saved[key] : nullptr;
    const auto* current = now.contains(key) ? &now[key] : nullptr;
    if (!then || !current || *then != *current) {
      differences.push_back(fmt::format("{}: {} then, {} now", key, shown(then), shown(current)));
    }
  }
  if (!differences.empty()) {
    throw InputError(fmt::format("{} was written with other settings, which a resume must keep: {}",
                                 source, fmt::join(differences, "; ")));
  }
}

bool extends_finished_run(const std::filesystem::path& dir, const std::vector<int>& ranks,
                          const config::TrainConfig& config) {
  bool extends = false;
  for (int rank : ranks) {
    const auto file = dir / run::peer_summary_file(rank);
    const auto json = run::read_json_file(file);
    if (!json) return false;
    const auto done = json->get<run::PeerSummary>();
    if (done.iterations <= 0 || done.epochs <= 0.0) return false;
    // The summary's epochs are its iterations over the iterations per epoch.
    const auto per_epoch = std::llround(static_cast<double>(done.iterations) / done.epochs);
    const std::int64_t target = config::total_iterations(config, per_epoch);
    if (target <= done.iterations) continue;
    const auto checkpoint =
        dir / run::kCheckpointDir / run::checkpoint_file_name(rank, done.iterations);
    if (!std::filesystem::exists(checkpoint)) {
      throw InputError(fmt::format(
          "--resume: rank {} finished at iteration {} without a checkpoint there ({}; the run had "
          "no --checkpoint-every), so it cannot go on to {}: start a new run instead",
          rank, done.iterations, checkpoint.string(), target));
    }
    extends = true;
  }
  return extends;
}

}  // namespace sgp::peer
