// Fuzz target: the checkpoint loader (CheckpointStore::load), as a resuming peer reads its file.
#include <cstring>
#include <string>

#include "fuzz_target.hpp"
#include "scratch_file.hpp"
#include "sgp/peer/checkpoint_store.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sgp::fuzz::ScratchDir dir;
  return sgp::fuzz::run_target(data, size, [](std::span<const std::uint8_t> bytes) {
    // The file is named after the iteration its header claims (bytes 16..23), and the store
    // belongs to the run the header names (bytes 64..95), as a resume would find them, so that
    // the loader gets past those checks and reads the rest. The seeds record no settings ({}).
    std::int64_t iteration = 0;
    if (bytes.size() >= 24) std::memcpy(&iteration, bytes.data() + 16, sizeof iteration);
    if (iteration < 0) iteration = 0;
    std::string run_id(32, '0');
    if (bytes.size() >= 96) run_id.assign(reinterpret_cast<const char*>(bytes.data()) + 64, 32);
    const sgp::peer::CheckpointStore store(dir.path(), 0, run_id);
    const auto path = dir.write(store.file(iteration).filename().string(), bytes);
    try {
      store.load(iteration);
    } catch (...) {
      std::filesystem::remove(path);
      throw;
    }
    std::filesystem::remove(path);
  });
}
