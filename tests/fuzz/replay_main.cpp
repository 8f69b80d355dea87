// Replays fuzz inputs without libFuzzer: `fuzz_replay_<target> FILE_OR_DIR...` runs each file
// (each file of a directory) through LLVMFuzzerTestOneInput once. A finding crashes, or escapes
// as an exception (reported here with the file's name, exit 1).
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  try {
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: escaped exception: %s\n", file.c_str(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0, failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) files.push_back(entry);
    } else {
      files.push_back(arg);
    }
    for (const auto& file : files) {
      failures += replay(file);
      ++inputs;
    }
  }
  std::printf("%d input(s) replayed, %d failure(s)\n", inputs, failures);
  return inputs == 0 || failures > 0 ? 1 : 0;
}
