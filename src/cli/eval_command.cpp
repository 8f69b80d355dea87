// `sgp eval MODEL`: the test accuracy of a saved model (peer-<rank>-model.bin,
// model-average.bin; format in sgp/run/model_file.hpp).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <span>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "sgp/compute/device.hpp"
#include "sgp/compute/device_buffer.hpp"
#include "sgp/data/dataset.hpp"
#include "sgp/log.hpp"
#include "sgp/model/evaluator.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/run/model_file.hpp"

namespace sgp::cli {

void add_eval_command(CLI::App& app) {
  struct Options {
    std::string file, data_dir, device = "cpu";
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Test a saved model (a run's peer-<rank>-model.bin or model-average.bin) on the "
      "Fashion-MNIST test set: prints its accuracy and loss.");
  cmd->add_option("model", o->file, "the model file")->required();
  cmd->add_option("--data-dir", o->data_dir,
                  "directory with the Fashion-MNIST IDX files (default: $SGP_DATA_DIR, else the "
                  "Debian package's)");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:<index>")->capture_default_str();
  cmd->callback([o] {
    configure_logging(-1, LogLevel::warn);
    const auto model = run::read_model_file(o->file);
    auto backend = compute::make_backend({o->device, 1, false});
    const auto test = data::load_fashion_mnist(data::resolve_data_dir(o->data_dir), "t10k");
    model::Evaluator evaluator(*backend, model::parse_model_spec(model.model), test);
    compute::DeviceBuffer<float> parameters(*backend, std::span<const float>(model.parameters));
    const auto result = evaluator.evaluate(parameters.data());
    std::cout << fmt::format("{}: model {}, {} parameters: test accuracy {:.2f}%, loss {:.4f}\n",
                             o->file, model.model, model.parameters.size(), 100.0 * result.accuracy,
                             result.loss);
  });
}

}  // namespace sgp::cli
