#include "common/protocol.hpp"

#include <array>
#include <vector>

#include <fmt/format.h>

#include "common/escape.hpp"
#include "common/text.hpp"

namespace tw {
namespace {

// The ops and their names on the wire, in the order of enum Op.
constexpr std::array<std::string_view, 5> kOpNames = {"UPDATE", "STAT", "DELETE", "MOVE", "SCAN"};

// Shows a fragment of a bad line in an error message, escaped so it stays on one line.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMax = 60;
  std::string shown = escape_bytes(text.substr(0, kMax));
  if (text.size() > kMax) shown += "...";
  return shown;
}

}  // namespace

std::string_view to_string(Op op) { return kOpNames.at(static_cast<std::size_t>(op)); }

std::optional<Op> parse_op(std::string_view text) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == text) return static_cast<Op>(i);
  }
  return std::nullopt;
}

std::int64_t request_id_of(std::string_view line) {
  const auto id = parse_int<std::int64_t>(line.substr(0, line.find('\t')));
  return id && *id > 0 ? *id : kUnknownRequestId;
}

std::variant<Request, RequestParseError> parse_request(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const auto fields = split(line, '\t');
  const auto id = parse_int<std::int64_t>(fields[0]);
  if (!id || *id <= 0) {
    return RequestParseError{kUnknownRequestId,
                             fmt::format("malformed request: bad item id '{}'", excerpt(fields[0]))};
  }
  const auto fail = [&](std::string message) { return RequestParseError{*id, std::move(message)}; };
  if (fields.size() < 3) return fail("malformed request: expected <id> TAB <op> TAB <path>");
  const auto op = parse_op(fields[1]);
  if (!op) return fail(fmt::format("malformed request: unknown op '{}'", excerpt(fields[1])));
  // The positional fields, then the optional tagged ones (`key=value`; a path always
  // begins with '/', so one is never taken for the other).
  const std::size_t positional = *op == Op::Move ? 4 : 3;
  const auto tagged = [](std::string_view f) {
    return !f.empty() && f.front() != '/' && f.find('=') != std::string_view::npos;
  };
  std::size_t count = fields.size();
  while (count > 3 && tagged(fields[count - 1])) --count;
  if (count != positional) {
    return fail(fmt::format("malformed request: {} takes {} fields, got {}", to_string(*op),
                            positional, count));
  }
  Request request{*id, *op, std::string(fields[2]), {}, {}};
  for (std::size_t i = positional; i < fields.size(); ++i) {
    const std::string_view field = fields[i];
    const auto eq = field.find('=');
    const std::string_view key = field.substr(0, eq);
    std::int64_t* slot = key == "newest"    ? &request.order.newest
                         : key == "horizon" ? &request.order.horizon
                                            : nullptr;
    if (slot == nullptr) {
      return fail(
          fmt::format("malformed request: unknown field '{}' (expected newest=<id> or "
                      "horizon=<id>)",
                      excerpt(field)));
    }
    const auto value = parse_int<std::int64_t>(field.substr(eq + 1));
    if (!value || *value <= 0 || *slot != 0) {
      return fail(fmt::format("malformed request: bad or repeated field '{}'", excerpt(field)));
    }
    *slot = *value;
  }
  if (request.path.empty()) return fail("malformed request: empty path");
  if (!unescape_bytes(request.path)) {
    return fail(fmt::format("malformed request: badly escaped path '{}'", excerpt(fields[2])));
  }
  if (*op == Op::Move) {
    request.dest_path = std::string(fields[3]);
    if (request.dest_path.empty()) return fail("malformed request: empty destination path");
    if (!unescape_bytes(request.dest_path)) {
      return fail(fmt::format("malformed request: badly escaped destination path '{}'",
                              excerpt(fields[3])));
    }
  }
  return request;
}

std::string format_request(const Request& request) {
  std::string line = fmt::format("{}\t{}\t{}", request.id, to_string(request.op), request.path);
  if (request.op == Op::Move) fmt::format_to(std::back_inserter(line), "\t{}", request.dest_path);
  if (request.order.newest > 0) {
    fmt::format_to(std::back_inserter(line), "\tnewest={}", request.order.newest);
  }
  if (request.order.horizon > 0) {
    fmt::format_to(std::back_inserter(line), "\thorizon={}", request.order.horizon);
  }
  return line;
}

Result<Response> parse_response(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const auto fields = split(line, '\t');
  const auto bad = [&](std::string_view what) {
    return Error{fmt::format("malformed response ({}): '{}'", what, excerpt(line))};
  };
  if (fields.size() != 4) return bad("expected 4 fields");
  const auto id = parse_int<std::int64_t>(fields[0]);
  if (!id || *id < 0) return bad("bad item id");
  Response response;
  response.id = *id;
  if (fields[1] == "COMPLETE") {
    const auto bytes = parse_int<std::uint64_t>(fields[2]);
    const auto cpu = parse_int<std::uint64_t>(fields[3]);
    if (!bytes || !cpu) return bad("bad COMPLETE figures");
    response.outcome = Outcome::Complete;
    response.archive_bytes = *bytes;
    response.cpu_us = *cpu;
    return response;
  }
  if (fields[1] != "FAILED") return bad("unknown status");
  if (fields[2] == "RETRY") {
    response.outcome = Outcome::FailedRetry;
  } else if (fields[2] == "PERMANENT") {
    response.outcome = Outcome::FailedPermanent;
  } else {
    return bad("FAILED needs RETRY or PERMANENT");
  }
  auto message = unescape_bytes(fields[3]);
  if (!message) return bad("badly escaped message");
  response.message = std::move(*message);
  return response;
}

std::string format_response(const Response& response) {
  switch (response.outcome) {
    case Outcome::Complete:
      return fmt::format("{}\tCOMPLETE\t{}\t{}", response.id, response.archive_bytes,
                         response.cpu_us);
    case Outcome::FailedRetry:
      return fmt::format("{}\tFAILED\tRETRY\t{}", response.id, escape_bytes(response.message));
    case Outcome::FailedPermanent:
      return fmt::format("{}\tFAILED\tPERMANENT\t{}", response.id,
                         escape_bytes(response.message));
  }
  return {};
}

}  // namespace tw
