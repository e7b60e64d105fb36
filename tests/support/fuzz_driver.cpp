#include "support/fuzz_driver.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace tw::test {

void fuzz_check(bool condition, std::string_view target, const char* what, std::string_view input) {
  if (condition) return;
  std::fprintf(stderr, "%.*s: invariant broken: %s, input '%.*s'\n", static_cast<int>(target.size()),
               target.data(), what, static_cast<int>(input.size()), input.data());
  std::abort();
}

int fuzz_main(int argc, char** argv, std::string_view name, const std::vector<std::string>& seeds,
              std::string_view alphabet) {
  const long runs = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 200000;
  const double max_seconds = argc > 2 ? std::strtod(argv[2], nullptr) : 240;
  std::mt19937_64 random(0x7417'2026);
  const auto start = std::chrono::steady_clock::now();
  long done = 0;
  for (; done < runs; ++done) {
    std::string line = seeds[random() % seeds.size()];
    const int mutations = static_cast<int>(random() % 6);
    for (int m = 0; m < mutations; ++m) {
      const std::size_t at = line.empty() ? 0 : random() % (line.size() + 1);
      switch (random() % 5) {
        case 0:  // insert a byte from the alphabet
          line.insert(line.begin() + static_cast<long>(at), alphabet[random() % alphabet.size()]);
          break;
        case 1:  // insert any byte
          line.insert(line.begin() + static_cast<long>(at), static_cast<char>(random() & 0xFF));
          break;
        case 2:  // delete a byte
          if (at < line.size()) line.erase(at, 1);
          break;
        case 3:  // flip bits
          if (at < line.size()) line[at] = static_cast<char>(line[at] ^ (1 << (random() % 8)));
          break;
        default: {  // splice in part of another seed
          const std::string& other = seeds[random() % seeds.size()];
          line.insert(at, other.substr(std::min<std::size_t>(random() % 8, other.size())));
        }
      }
    }
    if (random() % 50 == 0) line.append(random() % 5000, static_cast<char>('a' + random() % 26));
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(line.data()), line.size());
    if (done % 1000 == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            max_seconds) {
      break;
    }
  }
  std::printf("%.*s: %ld inputs handled without a broken invariant\n",
              static_cast<int>(name.size()), name.data(), done);
  return 0;
}

}  // namespace tw::test
