// bench/format2: the parts of archive format 2 (archiver/chunker.hpp, pack.hpp,
// catalog.hpp; FORMAT.md, "Format 2") driven as the archiver will drive them, on the two
// workloads where format 1 fails its targets:
//
//   (a) N versions of one small file (100-300 bytes, default N = 100,000), each stored and
//       made durable on its own (pack sync and catalog commit per version: no group
//       commit helps). Printed for the first and the last 1,000 versions: time per
//       version, bytes written to the disk per version (/proc/self/io write_bytes), and
//       the process's resident memory. Target: the last within 2x of the first.
//   (b) a large text-like file (default 1 GiB) stored in content-defined chunks, then
//       1 MiB appended and the file stored again, ten times. Printed: the archive's growth
//       (allocated bytes of packs and catalog) over the ten. Target: at most 16 MiB. The
//       file is cut by content alone here; the archiver's chunk store also cuts where the
//       prior version was cut (FORMAT.md, "Appends"), which bench/peers measures.
//
// Prints figures; asserts nothing. Usage:
//   timewarp-bench-format2 [--dir DIR] [--versions N] [--big-mib N] [--keep]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>

#include <fmt/format.h>

#include "archive/format2/catalog.hpp"
#include "archive/format2/chunker.hpp"
#include "archive/disk.hpp"
#include "archive/format2/pack.hpp"
#include "archive/sha256.hpp"
#include "bench/common/content.hpp"

namespace fs = std::filesystem;
using namespace tw::archive;
using Clock = std::chrono::steady_clock;
using tw::bench::Content;
using tw::bench::fill_text;
using tw::bench::write_file;

namespace {

[[noreturn]] void die(const std::string& message) {
  std::cerr << "bench/format2: " << message << "\n";
  std::exit(1);
}

std::uint64_t io_write_bytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "write_bytes:") return value;
  }
  return 0;
}

double rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

std::uint64_t allocated_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<std::uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

// One archive of format 2's parts, written as one archiver would.
class Archive {
 public:
  explicit Archive(const fs::path& root)
      : disk_(root.string(), nullptr), packs_((root / "packs").string()) {
    fs::create_directories(root / "tmp");
    if (!disk_.make_dir(packs_)) die("cannot create packs/");
    auto catalog =
        Catalog::open((root / "catalog.db").string(), tw::archive::OpenMode::ReadWrite);
    if (!catalog) die(catalog.error());
    catalog_.emplace(std::move(*catalog));
  }

  // One version: add_chunk for each chunk of its content, in order, then commit.
  void add_chunk(std::string_view chunk) {
    const std::string id = sha256_hex(chunk);
    version_.chunks.push_back(id);
    auto known = catalog_->blob(id);
    if (!known) die(known.error());
    if (*known || batch_.blob(id) != nullptr) return;
    auto frame = compressor_.compress(std::span(chunk.data(), chunk.size()));
    if (!frame) die(frame.fault().message);
    auto ref = pack_.append(id, chunk.size(), *frame);
    if (!ref) die(ref.fault().message);
    batch_.add_blob(id, *ref);
  }

  // Records the version of `path` and makes it durable: one pack sync, one commit.
  void commit(const std::string& path, const std::string& whole_sha, std::uint64_t size) {
    version_.number = ++numbers_[path];
    version_.archived_at_ns = std::chrono::system_clock::now().time_since_epoch().count();
    version_.size = size;
    version_.sha256 = whole_sha;
    version_.mode = 0100644;
    batch_.add_version(path, std::move(version_));
    if (auto synced = pack_.sync(); !synced) die(synced.fault().message);
    if (auto done = catalog_->commit(batch_); !done) die(done.fault().message);
    batch_ = CatalogBatch();
    version_ = Version();
  }

 private:
  DiskWriter disk_;
  std::string packs_;
  PackWriter pack_{disk_, packs_};
  BlobCompressor compressor_{1};
  std::optional<Catalog> catalog_;
  std::map<std::string, std::uint64_t> numbers_;
  CatalogBatch batch_;
  Version version_;
};

struct Window {
  double ms_per_version = 0;
  double bytes_per_version = 0;
  double rss = 0;
};

void versions_of_one_file(const fs::path& dir, std::uint64_t n) {
  Archive archive(dir);
  std::mt19937_64 random(42);
  const std::uint64_t window = std::min<std::uint64_t>(1000, n / 2);
  Window first, last;
  auto start = Clock::now();
  std::uint64_t written = io_write_bytes();
  std::string content;
  for (std::uint64_t i = 1; i <= n; ++i) {
    if (i == n - window + 1) {
      start = Clock::now();
      written = io_write_bytes();
    }
    content.resize(100 + random() % 201);
    fill_text(content, random);
    archive.add_chunk(content);
    archive.commit("/bench/one-file.txt", sha256_hex(content), content.size());
    if (i == window || i == n) {
      Window& w = i == window ? first : last;
      w.ms_per_version =
          std::chrono::duration<double, std::milli>(Clock::now() - start).count() / window;
      w.bytes_per_version = static_cast<double>(io_write_bytes() - written) / window;
      w.rss = rss_mib();
    }
  }
  fmt::print("(a) {} versions of one small file, each made durable on its own\n", n);
  fmt::print("    {:<28}{:>14}{:>14}{:>10}\n", "", "ms/version", "bytes/version", "RSS MiB");
  fmt::print("    {:<28}{:>14.3f}{:>14.0f}{:>10.1f}\n", fmt::format("versions 1-{}", window),
             first.ms_per_version, first.bytes_per_version, first.rss);
  fmt::print("    {:<28}{:>14.3f}{:>14.0f}{:>10.1f}\n",
             fmt::format("versions {}-{}", n - window + 1, n), last.ms_per_version,
             last.bytes_per_version, last.rss);
  fmt::print("    last / first: time {:.2f}x, bytes {:.2f}x; archive {:.1f} MiB allocated\n",
             last.ms_per_version / first.ms_per_version,
             last.bytes_per_version / std::max(1.0, first.bytes_per_version),
             static_cast<double>(allocated_bytes(dir)) / (1 << 20));
}

// Stores the file at `file` in content-defined chunks; returns the seconds it took.
double store_chunked(Archive& archive, const Chunker& chunker, const std::string& file) {
  const auto start = Clock::now();
  tw::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) die("cannot open " + file);
  Sha256 whole;
  ReadBuffer buffer;
  ChunkReader reader(chunker, fd.get(), file, buffer);
  for (;;) {
    auto chunk = reader.next();
    if (!chunk) die(chunk.fault().message);
    if (chunk->empty()) break;
    whole.update(chunk->data(), chunk->size());
    archive.add_chunk(
        std::string_view(reinterpret_cast<const char*>(chunk->data()), chunk->size()));
  }
  archive.commit("/bench/big.txt", whole.hex_digest(), reader.offset());
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void append_to_a_large_file(const fs::path& dir, std::uint64_t big_mib) {
  const fs::path root = dir / "archive";
  Archive archive(root);
  const Chunker chunker;
  const std::string file = (dir / "big.txt").string();
  std::mt19937_64 random(7);
  write_file(file, big_mib << 20, random);
  const double first = store_chunked(archive, chunker, file);
  const std::uint64_t before = allocated_bytes(root);
  double appends = 0;
  for (int i = 0; i < 10; ++i) {
    write_file(file, 1 << 20, random, Content::Text, true);
    appends += store_chunked(archive, chunker, file);
  }
  const std::uint64_t after = allocated_bytes(root);
  fmt::print("(b) a {} MiB text-like file, then 1 MiB appended ten times\n", big_mib);
  fmt::print("    first store {:.2f} s (one thread), archive {:.1f} MiB allocated\n", first,
             static_cast<double>(before) / (1 << 20));
  fmt::print("    ten appends stored in {:.2f} s; archive grew by {:.2f} MiB\n", appends,
             static_cast<double>(after - before) / (1 << 20));
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  std::uint64_t versions = 100'000;
  std::uint64_t big_mib = 1024;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--dir") {
      dir = value();
    } else if (arg == "--versions") {
      versions = std::stoull(value());
    } else if (arg == "--big-mib") {
      big_mib = std::stoull(value());
    } else if (arg == "--keep") {
      keep = true;
    } else {
      die("usage: timewarp-bench-format2 [--dir DIR] [--versions N] [--big-mib N] [--keep]");
    }
  }
  if (dir.empty()) {
    char pattern[] = "/var/tmp/timewarp-bench-format2.XXXXXX";
    if (::mkdtemp(pattern) == nullptr) die("mkdtemp failed");
    dir = pattern;
  }
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) < 0) load[0] = -1;
  fmt::print("bench/format2 in {} (load average {:.2f} {:.2f} {:.2f})\n", dir.string(), load[0],
             load[1], load[2]);
  if (versions >= 2) versions_of_one_file(dir / "versions", versions);
  if (big_mib > 0) append_to_a_large_file(dir / "append", big_mib);
  if (!keep) fs::remove_all(dir);
  return 0;
}
