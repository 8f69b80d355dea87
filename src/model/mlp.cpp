#include "sgp/model/mlp.hpp"

#include "sgp/error.hpp"

namespace sgp::model {

namespace {

const std::vector<int>& checked(const std::vector<int>& widths) {
  SGP_ENFORCE(widths.size() >= 2, "an MLP needs an input and an output width");
  for (std::size_t l = 0; l < widths.size(); ++l) {
    SGP_ENFORCE(widths[l] >= 1, "width {} of the MLP is {}", l, widths[l]);
  }
  return widths;
}

}  // namespace

Mlp::Mlp(compute::Backend& backend, std::vector<int> widths, int max_batch)
    : widths_(std::move(checked(widths))),
      network_(backend, mlp_spec(std::vector<int>(widths_.begin() + 1, widths_.end() - 1)),
               Shape{1, 1, widths_.front()}, widths_.back(), max_batch) {
  // The network's layers are Linear, ReLU, Linear, ReLU, ..., Linear: Linear l is layer 2 l.
  for (std::size_t l = 0; l + 1 < widths_.size(); ++l) {
    LayerView view;
    view.in = widths_[l];
    view.out = widths_[l + 1];
    view.weight_offset = network_.parameter_offset(2 * l);
    view.bias_offset = view.weight_offset + static_cast<std::size_t>(view.in) * view.out;
    layers_.push_back(view);
  }
}

}  // namespace sgp::model
