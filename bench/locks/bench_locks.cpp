// bench/locks: the cost of one slot lock and its release (two fcntl(F_OFD_SETLK) calls) on
// a byte at a random slot, while another open file description holds `held` one-byte locks
// at random slots, as a second archiver in a group commit does (FORMAT.md, "Locks"). Two
// layouts, measured in the same run:
//   one file   every slot a byte of one file (format 2 before the slot files)
//   64 files   slot s a byte of file s mod 64 (the slot files)
// The kernel walks the locks held on a file at each lock and unlock, so with one file the
// cost grows with `held`. Prints figures; asserts nothing. Usage:
//   timewarp-bench-locks [--dir DIR] [--rounds N]
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "common/fd.hpp"

namespace {

constexpr std::size_t kSlotFiles = 64;
constexpr off_t kSlots = off_t{1} << 30;

bool set_lock(int fd, short type, off_t slot) {
  struct flock range {};
  range.l_type = type;
  range.l_whence = SEEK_SET;
  range.l_start = slot;
  range.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &range) == 0;
}

// Two open file descriptions of each of `files` files in `dir`: the holder's and the
// measured one's.
struct Layout {
  std::vector<tw::UniqueFd> holder, measured;
  Layout(const std::string& dir, std::size_t files) {
    for (std::size_t i = 0; i < files; ++i) {
      const std::string name = fmt::format("{}/{}-{:02x}", dir, files, i);
      holder.emplace_back(::open(name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
      measured.emplace_back(::open(name.c_str(), O_RDWR | O_CLOEXEC));
      if (!holder.back() || !measured.back()) {
        fmt::print(stderr, "cannot open {}\n", name);
        std::exit(1);
      }
    }
  }
  static int of(const std::vector<tw::UniqueFd>& fds, off_t slot) {
    return fds[static_cast<std::size_t>(slot) % fds.size()].get();
  }
};

// Microseconds per lock-and-release pair with `held` slots held by the other description.
double measure(const Layout& layout, std::size_t held, std::size_t rounds, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<off_t> pick(0, kSlots - 1);
  std::vector<off_t> taken;
  for (std::size_t i = 0; i < held; ++i) {
    const off_t slot = pick(random);
    if (set_lock(Layout::of(layout.holder, slot), F_WRLCK, slot)) taken.push_back(slot);
  }
  std::vector<off_t> slots(rounds);
  for (auto& slot : slots) slot = pick(random);
  const auto start = std::chrono::steady_clock::now();
  for (const off_t slot : slots) {
    const int fd = Layout::of(layout.measured, slot);
    // A slot the other holds (about one in four million) is refused and timed all the same.
    if (set_lock(fd, F_WRLCK, slot)) set_lock(fd, F_UNLCK, slot);
  }
  const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
  for (const off_t slot : taken) set_lock(Layout::of(layout.holder, slot), F_UNLCK, slot);
  return spent.count() / static_cast<double>(rounds);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path().string();
  std::size_t rounds = 200'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--dir") {
      dir = argv[i + 1];
    } else if (flag == "--rounds") {
      rounds = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      fmt::print(stderr, "usage: {} [--dir DIR] [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  if (rounds == 0) rounds = 1;
  const std::string work = fmt::format("{}/timewarp-bench-locks-{}", dir, ::getpid());
  std::filesystem::create_directories(work);
  {
    const Layout one(work, 1);
    const Layout spread(work, kSlotFiles);
    fmt::print("lock and release of one slot, µs per pair ({} pairs per figure)\n", rounds);
    fmt::print("{:>12} {:>10} {:>10} {:>8}\n", "held by other", "one file", "64 files", "ratio");
    for (const std::size_t held : {0, 32, 64, 128, 256, 512}) {
      // Alternate the layouts, twice each, and keep each one's better figure.
      double a = 1e9, b = 1e9;
      for (int turn = 0; turn < 2; ++turn) {
        a = std::min(a, measure(one, held, rounds, 7 + turn));
        b = std::min(b, measure(spread, held, rounds, 7 + turn));
      }
      fmt::print("{:>12} {:>10.2f} {:>10.2f} {:>8.2f}\n", held, a, b, b / a);
    }
  }
  std::filesystem::remove_all(work);
  return 0;
}
