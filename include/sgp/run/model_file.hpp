#pragma once
// A trained model as a file: the network's spec (as --model takes it) and its parameters, the
// flat float32 buffer every model keeps (layer by layer, as model/network.hpp lays it out).
// Peers write model-<rank>.bin (their de-biased z = x / w) at the end of a run, the monitor
// model-average.bin (the average of the peers' z at its last record); `sgp eval FILE` tests one,
// scripts/sgp_model.py reads one into numpy. Little-endian:
//   offset 0   8 bytes   "SGPMODEL"
//          8   u32       version (1)
//         12   u32       length L of the spec
//         16   L bytes   the spec, e.g. "mlp:512,512"
//     16 + L   u64       number n of parameters
//     24 + L   n float32 the parameters
//    end - 8   u64       FNV-1a 64 of every byte before it
#include <filesystem>
#include <string>
#include <vector>

namespace sgp::run {

struct ModelFile {
  std::string model;  // the spec, e.g. "mlp:512,512"
  std::vector<float> parameters;
};

// Written atomically (temporary file, fsync, rename).
void write_model_file(const std::filesystem::path& path, const ModelFile& model);
// InputError "FILE: what" for a file that is not one, damaged or truncated, or whose parameter
// count does not fit its spec (for Fashion-MNIST's 28 x 28 images and 10 classes).
ModelFile read_model_file(const std::filesystem::path& path);

}  // namespace sgp::run
