// The standalone driver of the fuzz targets where libFuzzer is not available (GCC): it
// feeds the target's LLVMFuzzerTestOneInput a fixed-seed stream of mutated seed inputs, so a
// run is repeatable, for at most a number of inputs and of seconds. Under Clang the targets
// are built with -fsanitize=fuzzer instead (tw_add_fuzz_target in tests/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace tw::test {

// Aborts, after "<target>: invariant broken: <what>, input '<input>'" on stderr, unless
// `condition` holds. For the targets under either driver.
void fuzz_check(bool condition, std::string_view target, const char* what, std::string_view input);

// main() of a fuzz target: argv[1] is the most inputs (default 200000), argv[2] the most
// seconds (default 240). Mutations insert bytes from `alphabet` or any byte, delete, flip
// bits and splice in parts of other seeds. Prints "<name>: N inputs handled ..." and
// returns 0; a broken invariant aborts inside the target.
int fuzz_main(int argc, char** argv, std::string_view name, const std::vector<std::string>& seeds,
              std::string_view alphabet);

}  // namespace tw::test
