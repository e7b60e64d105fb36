#include "db/session.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/time.hpp"

namespace tw::db {

ErrorKind classify(const DbError& error) {
  const auto* sql = dynamic_cast<const SqlError*>(&error);
  if (sql == nullptr) return ErrorKind::Outage;
  // Class 25 (invalid transaction state): the connection sits in a transaction we did not
  // mean to leave open; only a new connection is sure to be clean.
  if (sql->sqlstate().rfind("25", 0) == 0) return ErrorKind::Outage;
  return sql->retryable() ? ErrorKind::Retryable : ErrorKind::Statement;
}

Backoff::Backoff(std::chrono::milliseconds first, std::chrono::milliseconds cap)
    : first_(std::max(first, std::chrono::milliseconds(1))),
      cap_(std::max(cap, first_)),
      step_(first_),
      random_(std::random_device{}()) {}

std::chrono::milliseconds Backoff::next() {
  const auto delay = step_;
  step_ = std::min(step_ * 2, cap_);
  std::uniform_int_distribution<std::int64_t> jitter(delay.count() / 2, delay.count());
  return std::chrono::milliseconds(jitter(random_));
}

namespace {

std::string sqlstate_of(const DbError& error) {
  const auto* sql = dynamic_cast<const SqlError*>(&error);
  return sql ? sql->sqlstate() : std::string();
}

}  // namespace

Session::Session(Options options)
    : options_(std::move(options)), connect_backoff_(options_.first_delay, options_.max_delay) {}

Session::~Session() = default;

Session::OperationState& Session::state(std::string_view operation) {
  auto found = operations_.find(operation);
  if (found == operations_.end()) {
    found = operations_
                .emplace(std::string(operation),
                         OperationState{Backoff(options_.first_delay, options_.max_delay)})
                .first;
  }
  return found->second;
}

Session::Clock::time_point Session::ready_at(std::string_view operation) const {
  auto at = connected() ? Clock::time_point{} : connect_at_;
  if (const auto found = operations_.find(operation); found != operations_.end()) {
    at = std::max(at, found->second.ready_at);
  }
  return at;
}

std::chrono::milliseconds Session::wait(std::string_view operation) const {
  const auto left = ready_at(operation) - Clock::now();
  return std::max(std::chrono::ceil<std::chrono::milliseconds>(left), std::chrono::milliseconds(0));
}

Connection& Session::connect_now() {
  if (connected()) return *conn_;
  conn_.reset();
  try {
    auto conn = std::make_unique<Connection>(options_.conninfo);
    if (options_.on_connect) options_.on_connect(*conn);
    conn_ = std::move(conn);
  } catch (const DbError&) {
    connect_at_ = Clock::now() + connect_backoff_.next();
    ++connect_failures_;
    throw;
  }
  if (connect_failures_ > 0) {
    spdlog::info("{}: connected to the database again ({}) after {} failed attempt{}",
                 options_.who, conn_->describe(), connect_failures_,
                 connect_failures_ == 1 ? "" : "s");
  }
  connect_failures_ = 0;
  connect_backoff_.reset();
  return *conn_;
}

Connection* Session::ready(std::string_view operation) {
  const auto now = Clock::now();
  if (const auto found = operations_.find(operation);
      found != operations_.end() && now < found->second.ready_at) {
    return nullptr;
  }
  if (connected()) return conn_.get();
  if (now < connect_at_) return nullptr;
  try {
    return &connect_now();
  } catch (const DbError& e) {
    last_failure_ = Failure{ErrorKind::Outage, e.what(), sqlstate_of(e)};
    if (options_.log_failures) {
      spdlog::warn("{}: {}; next attempt in {} ms", options_.who, e.what(),
                   std::chrono::ceil<std::chrono::milliseconds>(connect_at_ - now).count());
    }
    return nullptr;
  }
}

void Session::failed(std::string_view operation, const DbError& error) {
  const auto kind = classify(error);
  last_failure_ = Failure{kind, error.what(), sqlstate_of(error)};
  if (kind == ErrorKind::Outage) {
    conn_.reset();
    connect_at_ = Clock::now() + connect_backoff_.next();
    ++connect_failures_;
    if (!options_.log_failures) return;
    spdlog::warn("{}: {}: {}; reconnecting in {} ms", options_.who, operation, error.what(),
                 std::chrono::ceil<std::chrono::milliseconds>(connect_at_ - Clock::now()).count());
    return;
  }
  auto& op = state(operation);
  const auto delay = op.backoff.next();
  op.ready_at = Clock::now() + delay;
  ++op.failures;
  if (kind == ErrorKind::Retryable) {
    if (!options_.log_failures) return;
    spdlog::warn("{}: {}: {}; trying again in {} ms", options_.who, operation, error.what(),
                 delay.count());
    return;
  }
  const auto* sql = dynamic_cast<const SqlError*>(&error);
  ++health_.statement_errors;
  if (health_.failing.empty()) {
    health_.failing_since = epoch_seconds();
  }
  health_.failing = fmt::format("{}: {} [SQLSTATE {}]", operation, error.what(),
                                sql ? sql->sqlstate() : std::string("?"));
  if (!options_.log_failures) return;
  spdlog::error("{}: {} failed ({} time{} in a row), statement: {}: {} [SQLSTATE {}]; trying "
                "again in {} ms",
                options_.who, operation, op.failures, op.failures == 1 ? "" : "s",
                sql ? sql->statement() : std::string("?"), error.what(),
                sql ? sql->sqlstate() : std::string("?"), delay.count());
}

void Session::succeeded(std::string_view operation) {
  last_failure_.reset();
  const auto found = operations_.find(operation);
  if (found == operations_.end()) return;
  if (found->second.failures > 0) {
    spdlog::info("{}: {} succeeded again after {} failure{}", options_.who, operation,
                 found->second.failures, found->second.failures == 1 ? "" : "s");
  }
  operations_.erase(found);
  // The process is healthy again once no operation fails.
  const bool any_failing = std::any_of(operations_.begin(), operations_.end(),
                                       [](const auto& o) { return o.second.failures > 0; });
  if (!any_failing) health_.failing.clear();
}

}  // namespace tw::db
