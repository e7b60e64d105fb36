// Fuzz target for tw::parse_request and the archiver's request handling. Every input is
// one request line; parsed paths are moved into a sandbox directory (holding files, links,
// a fifo and a link loop) so the fuzzer can never archive the host. Checks that each
// answer is one well-formed response line for the right id.
//
// Built with -fsanitize=fuzzer under Clang (LLVMFuzzerTestOneInput); otherwise main()
// below feeds it a fixed-seed stream of mutated request lines.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <spdlog/spdlog.h>

#include "archiver/archiver.hpp"
#include "archiver/store.hpp"
#include "common/escape.hpp"
#include "common/protocol.hpp"

namespace {

struct Sandbox {
  std::string root;
  std::string files;
  std::optional<tw::archive::Store> store;

  Sandbox() {
    spdlog::set_level(spdlog::level::off);  // refusals are expected by the thousand
    std::string pattern = (std::filesystem::temp_directory_path() / "tw-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    root = pattern;
    files = root + "/files";
    std::filesystem::create_directories(files + "/dir/sub");
    for (const char* name : {"/a", "/dir/b", "/dir/sub/c", "/with space", "/%41"}) {
      FILE* f = std::fopen((files + name).c_str(), "w");
      std::fputs(name, f);
      std::fclose(f);
    }
    ::symlink("a", (files + "/link").c_str());
    ::symlink("loop", (files + "/loop").c_str());
    ::mkfifo((files + "/fifo").c_str(), 0644);
    auto opened = tw::archive::Store::open(root + "/archive", tw::archive::Store::Mode::ReadWrite);
    if (!opened) std::abort();
    store.emplace(std::move(opened.value()));
  }
  ~Sandbox() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};

Sandbox& sandbox() {
  static Sandbox instance;
  return instance;
}

void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_request: invariant broken: %s\n", what);
    std::abort();
  }
}

void check_response(const tw::Response& response, std::int64_t id) {
  check(response.id == id, "response id matches the request");
  const std::string line = tw::format_response(response);
  check(line.find('\n') == std::string::npos, "response is one line");
  auto parsed = tw::parse_response(line);
  check(parsed.ok(), "response parses");
  check(parsed->id == id && parsed->outcome == response.outcome, "response round-trips");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  if (line.find('\n') != std::string_view::npos) return 0;  // the reader splits lines first

  // The --null handler sees the line as it came.
  tw::archive::RequestHandler null_handler(nullptr);
  const tw::Response null_response = null_handler.handle_line(line);
  auto parsed = tw::parse_request(line);
  if (auto* error = std::get_if<tw::RequestParseError>(&parsed)) {
    check(null_response.outcome == tw::Outcome::FailedPermanent, "malformed is permanent");
    check_response(null_response, error->id);
    check(!error->message.empty(), "a parse error says what is wrong");
    return 0;
  }
  tw::Request request = std::get<tw::Request>(parsed);
  check(null_response.outcome == tw::Outcome::Complete, "--null completes valid requests");
  auto reparsed = tw::parse_request(tw::format_request(request));
  check(std::holds_alternative<tw::Request>(reparsed), "a formatted request parses");
  const auto& again = std::get<tw::Request>(reparsed);
  check(again.id == request.id && again.op == request.op && again.path == request.path &&
            again.dest_path == request.dest_path,
        "request round-trips");

  // The real handler, on paths moved into the sandbox.
  Sandbox& box = sandbox();
  const auto confine = [&](std::string& escaped) {
    auto raw = tw::unescape_bytes(escaped);
    check(raw.has_value(), "a parsed path unescapes");
    if (!raw->empty() && raw->front() == '/') escaped = tw::escape_bytes(box.files + *raw);
  };
  confine(request.path);
  if (request.op == tw::Op::Move) confine(request.dest_path);
  tw::archive::RequestHandler handler(&*box.store);
  check_response(handler.handle(request), request.id);
  return 0;
}

#ifndef TW_LIBFUZZER
// Standalone driver: mutates seed requests with a fixed seed for a bounded number of runs.
int main(int argc, char** argv) {
  const long runs = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 200000;
  const double max_seconds = argc > 2 ? std::strtod(argv[2], nullptr) : 240;
  const std::vector<std::string> seeds = {"1\tUPDATE\t/a",
                                          "2\tSTAT\t/dir/b",
                                          "3\tDELETE\t/dir",
                                          "4\tMOVE\t/dir/sub\t/moved",
                                          "5\tUPDATE\t/with space",
                                          "6\tUPDATE\t/%2541",
                                          "7\tUPDATE\t/link",
                                          "8\tUPDATE\t/loop",
                                          "9\tUPDATE\t/fifo",
                                          "10\tUPDATE\t/missing",
                                          "11\tMOVE\t/moved\t/dir/sub",
                                          "12\tUPDATE\t/dir",
                                          "13\tUPDATE\trelative",
                                          "14\tUPDATE\t/a/../b",
                                          "15\tSTAT\t/%FF%FE",
                                          "16\tUPDATE\t/a\r"};
  const std::string alphabet =
      std::string("\t%/.-_0123456789ABCDEFabcdefUPDATESMOVL \r\x01\xff\xc3\xa9", 47);
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
        default:  // splice in part of another seed
          line.insert(at, seeds[random() % seeds.size()].substr(random() % 8));
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
  std::printf("fuzz_request: %ld inputs handled without a broken invariant\n", done);
  return 0;
}
#endif
