#include "sgp/gossip/push_sum_config.hpp"

#include "sgp/error.hpp"

namespace sgp::gossip {

Mode parse_mode(const std::string& text, const std::string& what) {
  if (text == "sync") return Mode::sync;
  if (text == "overlap") return Mode::overlap;
  throw InputError(
      fmt::format("{}: '{}' is not a gossip mode (expected sync or overlap)", what, text));
}

std::string_view mode_name(Mode mode) { return mode == Mode::sync ? "sync" : "overlap"; }

}  // namespace sgp::gossip
