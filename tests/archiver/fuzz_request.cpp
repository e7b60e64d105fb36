// Fuzz target for tw::parse_request and the archiver's request handling. Every input is
// one request line; parsed paths are moved into a sandbox directory (holding files, links,
// a fifo and a link loop) so the fuzzer can never archive the host. Checks that each
// answer is one well-formed response line for the right id.
//
// Built with -fsanitize=fuzzer under Clang (LLVMFuzzerTestOneInput); otherwise main()
// below hands mutated request lines to the standalone driver (tests/support/fuzz_driver).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include <spdlog/spdlog.h>

#include "archiver/request_handler.hpp"
#include "archive/store.hpp"
#include "common/escape.hpp"
#include "common/protocol.hpp"
#include "support/fuzz_driver.hpp"

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
            again.dest_path == request.dest_path && again.order.newest == request.order.newest &&
            again.order.horizon == request.order.horizon,
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
int main(int argc, char** argv) {
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
  return tw::test::fuzz_main(argc, argv, "fuzz_request", seeds, alphabet);
}
#endif
