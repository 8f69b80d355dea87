#include "sgp/peer/train_config.hpp"

#include <nlohmann/json.hpp>

namespace sgp::peer {

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = {
      {"hidden", c.hidden},
      {"data_dir", c.data_dir},
      {"seed", c.seed},
      {"epochs", c.epochs},
      {"max_iterations", c.max_iterations},
      {"batch_size", c.batch_size},
      {"lr", c.lr},
      {"lr_scaling", c.lr_scaling},
      {"warmup_epochs", c.warmup_epochs},
      {"lr_decay", c.lr_decay},
      {"lr_milestones", c.lr_milestones},
      {"lr_gamma", c.lr_gamma},
      {"momentum", c.momentum},
      {"nesterov", c.nesterov},
      {"weight_decay", c.weight_decay},
      {"device", c.device},
      {"blas_threads", c.blas_threads},
      {"tf32", c.tf32},
      {"log_every", c.log_every},
      {"eval_every_epochs", c.eval_every_epochs},
      {"topology", c.topology},
      {"algo", c.algo},
      {"tau", c.tau},
      {"gossip_every", c.gossip_every},
      {"self_weight", c.self_weight},
      {"timeout_ms", c.timeout_ms},
      {"checkpoint_every", c.checkpoint_every},
      {"resume", c.resume},
      {"monitor", c.monitor},
      {"keys_dir", c.keys_dir},
      {"insecure", c.insecure},
  };
}

}  // namespace sgp::peer
