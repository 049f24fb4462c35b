// Runs a fuzz target's entry point without libFuzzer, once per file (directories: every file in them),
// so the normal build and ctest replay the seed corpus and every reproducer kept in it. With
// `--write-seed FILE`, a target that makes its own seed (fuzz_seed) writes it.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
__attribute__((weak)) std::vector<std::uint8_t> fuzz_seed();

namespace {

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int write_seed(const char* path) {
  if (!fuzz_seed) {
    std::fprintf(stderr, "this target makes no seed of its own\n");
    return 2;
  }
  const std::vector<std::uint8_t> seed = fuzz_seed();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(seed.data()), static_cast<std::streamsize>(seed.size()));
  return out ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-seed") return write_seed(argv[2]);
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(arg))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else {
      inputs.push_back(arg);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s FILE|DIR... | --write-seed FILE\n", argv[0]);
    return 2;
  }
  for (const auto& input : inputs) {
    const std::vector<std::uint8_t> bytes = read_file(input);
    std::printf("%s (%zu bytes)\n", input.c_str(), bytes.size());
    std::fflush(stdout);  // the last line names the input if the target crashes
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  return 0;
}
