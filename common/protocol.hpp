// The scheduler <-> archiver line protocol (ARCHITECTURE.md, "Requests and answers"): one
// request per line on the archiver's stdin, one response per line on its stdout, fields
// separated by TAB. Path and message fields travel in the escaped form of
// common/escape.hpp. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/result.hpp"

namespace tw {

// Scan: a directory and its entries other than subdirectories (archive/FORMAT.md,
// "Operations"): what the monitor's scan of a whole source queues for a directory where
// many entries differ from the archive, instead of one item per entry.
enum class Op { Update, Stat, Delete, Move, Scan };  // named in protocol.cpp's kOpNames, in order

std::string_view to_string(Op op);
std::optional<Op> parse_op(std::string_view text);

// Where a request stands in the master queue, from two optional tagged fields after the
// positional ones, `newest=<id>` and `horizon=<id>` (0: not sent). `newest` is the largest
// queue id among the changes the request stands for (its own and those coalesced into it);
// `horizon` is a queue id such that every item up to it was queued before the request was
// sent. Queue ids are handed out in time order, and a change is seen before its item gets
// an id, so a read that starts after a request with horizon H arrived has seen every change
// queued as an item up to H (archive/FORMAT.md, "Reads that answer later requests").
struct QueueOrder {
  std::int64_t newest = 0;
  std::int64_t horizon = 0;
};

struct Request {
  std::int64_t id = 0;
  Op op = Op::Update;
  std::string path;       // escaped form, as on the wire and in the database
  std::string dest_path;  // escaped form; only for Op::Move
  QueueOrder order;
};

// The id echoed in the answer to a request whose id cannot be read.
inline constexpr std::int64_t kUnknownRequestId = 0;

struct RequestParseError {
  std::int64_t id = kUnknownRequestId;  // the request's id when it could be read
  std::string message;
};

// Parses one request line (without its newline). On failure the error says what was wrong
// and carries the id when one could be read, so the archiver can answer FAILED PERMANENT.
std::variant<Request, RequestParseError> parse_request(std::string_view line);
std::string format_request(const Request& request);  // no trailing newline
// Only the id at the start of a request line (kUnknownRequestId when it cannot be read):
// how a line that must not be run, such as one cut short, is answered.
std::int64_t request_id_of(std::string_view line);

enum class Outcome { Complete, FailedRetry, FailedPermanent };

struct Response {
  std::int64_t id = 0;
  Outcome outcome = Outcome::Complete;
  std::uint64_t archive_bytes = 0;  // Complete only
  std::uint64_t cpu_us = 0;         // Complete only
  std::string message;              // Failed only; raw text, escaped on the wire
};

Result<Response> parse_response(std::string_view line);
std::string format_response(const Response& response);  // no trailing newline

}  // namespace tw
