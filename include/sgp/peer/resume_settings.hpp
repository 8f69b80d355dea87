#pragma once
// What a resumed run must share with the run it continues: the settings the table marks
// fixed_across_resume (model, partition, seed, batch size, algorithm, gossip period, self weight),
// the number of peers and the mixing weights. Every checkpoint records them; a resume with any
// other value is refused, naming each.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sgp/config/train_config.hpp"

namespace sgp::topology {
class Schedule;
}

namespace sgp::peer {

// A JSON object: each fixed setting's key and value, "peers", and "mixing_weights" (a digest of
// the mixing schedule's weights, phases and edges; absent for peers that do not communicate).
nlohmann::json resume_settings(const config::TrainConfig& config, int num_peers,
                               const topology::Schedule* mixing);

// InputError "<source> was written with other settings: key: V then, W now; ..." naming every
// key whose value differs (or that only one of them has).
void require_same_resume_settings(const nlohmann::json& saved, const nlohmann::json& now,
                                  const std::string& source);

// --resume of a run whose `ranks` in `dir` all wrote their summaries: whether `config` asks for
// more iterations (more --epochs or --max-iterations) than they ran, so that they go on from the
// checkpoint of their last iteration. InputError naming the rank when one has no such checkpoint
// (the run had no --checkpoint-every: it cannot be extended).
bool extends_finished_run(const std::filesystem::path& dir, const std::vector<int>& ranks,
                          const config::TrainConfig& config);

}  // namespace sgp::peer
