#include "archiver/request_handler.hpp"

#include <sys/resource.h>

#include <exception>
#include <variant>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/escape.hpp"

namespace tw::archive {
namespace {

std::uint64_t cpu_us_now() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto us = [](const struct timeval& tv) {
    return static_cast<std::uint64_t>(tv.tv_sec) * 1'000'000 +
           static_cast<std::uint64_t>(tv.tv_usec);
  };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

Response failure(std::int64_t id, Outcome outcome, std::string message) {
  Response response;
  response.id = id;
  response.outcome = outcome;
  response.message = std::move(message);
  return response;
}

}  // namespace

Response RequestHandler::handle_line(std::string_view line) {
  auto parsed = parse_request(line);
  if (auto* error = std::get_if<RequestParseError>(&parsed)) {
    spdlog::warn("request refused: {}", shown_text(error->message));
    return failure(error->id, Outcome::FailedPermanent, error->message);
  }
  return handle(std::get<Request>(parsed));
}

Response RequestHandler::handle(const Request& request) {
  const std::uint64_t cpu_start = cpu_us_now();
  Response response;
  response.id = request.id;
  if (store_ == nullptr) return response;  // --null: COMPLETE 0 0

  const auto path = unescape_bytes(request.path);
  const auto dest = unescape_bytes(request.dest_path);
  if (!path || (request.op == Op::Move && !dest)) {
    return failure(request.id, Outcome::FailedPermanent, "malformed request: badly escaped path");
  }
  ArchiveResult result;
  try {
    switch (request.op) {
      case Op::Update:
        result = store_->update(*path, request.order);
        break;
      case Op::Stat:
        result = store_->stat(*path, request.order);
        break;
      case Op::Delete:
        result = store_->remove(*path, request.order);
        break;
      case Op::Move:
        result = store_->move(*path, *dest, request.order);
        break;
      case Op::Scan:
        result = store_->scan(*path, request.order, filter_);
        break;
    }
  } catch (const std::exception& e) {
    // Only resource exhaustion (bad_alloc) or a bug gets here; the item may succeed later.
    result = ArchiveResult{Outcome::FailedRetry, 0, fmt::format("internal error: {}", e.what())};
  }
  const std::uint64_t cpu_used = cpu_us_now() - cpu_start;
  if (result.outcome != Outcome::Complete) {
    spdlog::log(result.outcome == Outcome::FailedRetry ? spdlog::level::warn : spdlog::level::info,
                "item {} {} {}: {} ({})", request.id, to_string(request.op),
                shown_text(request.path), result.message,
                result.outcome == Outcome::FailedRetry ? "will retry" : "permanent");
    return failure(request.id, result.outcome, std::move(result.message));
  }
  spdlog::debug("item {} {} {}: {} bytes added, {} us CPU", request.id, to_string(request.op),
                shown_text(request.path), result.bytes_added, cpu_used);
  response.archive_bytes = result.bytes_added;
  response.cpu_us = cpu_used;
  return response;
}

}  // namespace tw::archive
