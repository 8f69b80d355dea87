#include "sgp/model/sgd.hpp"

namespace sgp::model {

Sgd::Sgd(compute::Backend& backend, std::size_t parameter_count, SgdOptions options)
    : backend_(backend), options_(options), velocity_(backend, parameter_count) {
  backend_.fill(velocity_.data(), velocity_.size(), 0.0f);
}

void Sgd::step(float* params, const float* grads, float lr) {
  const compute::SgdStep step{lr, options_.momentum, options_.weight_decay, options_.nesterov};
  backend_.sgd_update(params, grads, velocity_.data(), velocity_.size(), step);
}

}  // namespace sgp::model
