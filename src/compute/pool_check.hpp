#pragma once
// The precondition both backends check before pooling (Backend::max_pool_forward and friends).
#include "sgp/compute/window.hpp"
#include "sgp/error.hpp"

namespace sgp::compute {

inline void check_pool(const Window& w) {
  SGP_ENFORCE(w.padding == 0, "pooling needs padding 0, got {}", w.padding);
  SGP_ENFORCE(w.out_height() >= 1 && w.out_width() >= 1, "a {0}x{0} pool does not fit {1}x{2}",
              w.kernel, w.height, w.width);
}

}  // namespace sgp::compute
