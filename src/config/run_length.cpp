#include "sgp/config/run_length.hpp"

#include <algorithm>
#include <cmath>

namespace sgp::config {

std::int64_t total_iterations(const TrainConfig& c, std::int64_t per_epoch) {
  auto total = std::max<std::int64_t>(1, std::llround(c.epochs * static_cast<double>(per_epoch)));
  return c.max_iterations > 0 ? std::min(total, c.max_iterations) : total;
}

std::int64_t evaluation_interval(const TrainConfig& c, std::int64_t per_epoch) {
  return std::max<std::int64_t>(1, std::llround(c.eval_every * static_cast<double>(per_epoch)));
}

std::int64_t iterations_per_epoch(std::size_t train_size, int num_peers, int batch_size) {
  const auto global_batch = static_cast<std::size_t>(num_peers) * batch_size;
  return static_cast<std::int64_t>((train_size + global_batch - 1) / global_batch);
}

}  // namespace sgp::config
