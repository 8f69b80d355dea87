#include "sgp/run/model_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "sgp/error.hpp"
#include "sgp/fnv1a.hpp"
#include "sgp/model/model_spec.hpp"
#include "sgp/run/run_directory.hpp"

namespace sgp::run {

namespace {

constexpr std::string_view kMagic = "SGPMODEL";
constexpr std::uint32_t kVersion = 1;

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Reads a T at `offset` and moves past it; false when the bytes end first.
template <class T>
bool take(std::string_view bytes, std::size_t& offset, T& value) {
  if (bytes.size() - offset < sizeof value) return false;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  offset += sizeof value;
  return true;
}

}  // namespace

void write_model_file(const std::filesystem::path& path, const ModelFile& model) {
  std::string out(kMagic);
  put(out, kVersion);
  put(out, static_cast<std::uint32_t>(model.model.size()));
  out += model.model;
  put(out, static_cast<std::uint64_t>(model.parameters.size()));
  out.append(reinterpret_cast<const char*>(model.parameters.data()),
             model.parameters.size() * sizeof(float));
  put(out, fnv1a(out));
  write_file_atomically(path, out);
}

ModelFile read_model_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read it", path.string()));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&](const std::string& what) {
    return InputError(fmt::format("{}: not an sgp model file: {}", path.string(), what));
  };
  if (bytes.size() < kMagic.size() + 24 || !bytes.starts_with(kMagic)) {
    throw bad("it does not start with SGPMODEL");
  }
  const std::string_view body(bytes.data(), bytes.size() - 8);
  std::uint64_t checksum = 0;
  std::memcpy(&checksum, bytes.data() + body.size(), sizeof checksum);
  if (checksum != fnv1a(body)) throw bad("damaged (checksum)");
  std::size_t offset = kMagic.size();
  std::uint32_t version = 0, length = 0;
  take(body, offset, version);
  if (version != kVersion)
    throw bad(fmt::format("version {}, this sgp reads {}", version, kVersion));
  take(body, offset, length);
  ModelFile model;
  if (body.size() - offset < length) throw bad("truncated spec");
  model.model.assign(body.data() + offset, length);
  offset += length;
  std::uint64_t n = 0;
  if (!take(body, offset, n) || (body.size() - offset) / sizeof(float) != n ||
      (body.size() - offset) % sizeof(float) != 0) {
    throw bad("the parameter count does not match the file's length");
  }
  model.parameters.resize(n);
  std::memcpy(model.parameters.data(), body.data() + offset, n * sizeof(float));
  // A checksum proves the bytes are the writer's, not that the writer's model was sound (a
  // diverged run saves NaN): such a model would only be evaluated into garbage.
  const auto bad_value = std::find_if(model.parameters.begin(), model.parameters.end(),
                                      [](float v) { return !std::isfinite(v); });
  if (bad_value != model.parameters.end()) {
    throw InputError(
        fmt::format("{}: parameter {} of {} is {}, not a finite number: the model "
                    "cannot be evaluated",
                    path.string(), bad_value - model.parameters.begin(), n, *bad_value));
  }
  const auto expected =
      model::parameter_count(model::parse_model_spec(model.model), {28, 28, 1}, 10);
  if (expected != n) {
    throw bad(fmt::format("{} parameters, but model '{}' has {}", n, model.model, expected));
  }
  return model;
}

}  // namespace sgp::run
