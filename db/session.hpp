// A thread's door to PostgreSQL. A Session owns the connection string and the connection
// made from it, connects on demand with a capped, jittered, growing delay between
// attempts, redoes the on-connect set-up (LISTEN, registration) after every connect, and
// decides what an error means, the way libpqxx's `failure::poisons_connection()` does:
//
// - an outage (the connection broke, the server shuts down, or a connection could not be
//   made): the connection is dropped and every operation waits for the next connect
//   attempt;
// - a retryable server state (serialization failure, deadlock, lock or statement timeout,
//   too many connections): the connection is kept; the operation is tried again after a
//   delay that grows;
// - any other SQL error (a bug, a violated constraint, a missing privilege): the
//   connection is kept, the error is logged as an error naming the statement and counted,
//   and only that operation waits, with a delay that grows, so the others (the heartbeat
//   that reports the error) go on. health() tells it to `timewarp status` through the
//   process's row.
//
// Each call names its operation ("claim", "heartbeat"): the delays after a statement's
// failure are per operation, a success resets that operation's delay, and a connect resets
// the connect delay. Not thread-safe: one Session per thread, like a Connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>

#include "db/connection.hpp"

namespace tw::db {

// What an error does to a session (see above).
enum class ErrorKind { Outage, Retryable, Statement };
ErrorKind classify(const DbError& error);

// A growing delay: `first`, doubled at each step up to `cap`, each wait drawn uniformly
// from [delay/2, delay] so that processes that failed together do not retry together. The
// waits never shrink from one step to the next before the cap.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds cap);
  // The wait before the next attempt; the step after it grows.
  std::chrono::milliseconds next();
  void reset() { step_ = first_; }

 private:
  std::chrono::milliseconds first_, cap_, step_;
  std::minstd_rand random_;
};

// Statement errors of a session, for the process's row in the database.
struct SessionHealth {
  std::int64_t statement_errors = 0;  // since the process started
  // The error of an operation that has not succeeded since (empty when none is failing).
  std::string failing;
  double failing_since = 0;  // seconds since the epoch, when `failing` is set
};

class Session {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::string conninfo;
    std::string who;  // the thread's name in messages: "scheduler", "reporter", "monitor"
    std::chrono::milliseconds first_delay{100};
    std::chrono::milliseconds max_delay{10000};
    // Runs on every new connection before it is used (LISTEN, prepared state). A
    // DbError it throws counts as a failed connect.
    std::function<void(Connection&)> on_connect;
    // Failures are logged (a tool that shows them itself reads last_failure() instead).
    bool log_failures = true;

    // The options of a process's session: these, and the defaults above for the rest.
    static Options of(std::string conninfo, std::string who, std::chrono::milliseconds max_delay) {
      Options options;
      options.conninfo = std::move(conninfo);
      options.who = std::move(who);
      options.max_delay = max_delay;
      return options;
    }
  };

  // The last failure, cleared by the next success.
  struct Failure {
    ErrorKind kind = ErrorKind::Outage;
    std::string message;
    std::string sqlstate;  // empty for an outage
  };

  explicit Session(Options options);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // Runs `fn(Connection&)` for `operation` unless that operation, or connecting, must
  // still wait. Returns fn's result (true for a void fn), or nothing when it did not run
  // or threw a DbError (handled as above, logged with `operation`).
  template <class Fn>
  auto run(std::string_view operation, Fn&& fn) {
    using R = std::invoke_result_t<Fn&, Connection&>;
    using Out = std::conditional_t<std::is_void_v<R>, bool, R>;
    std::optional<Out> out;
    Connection* conn = ready(operation);
    if (conn == nullptr) return out;
    try {
      if constexpr (std::is_void_v<R>) {
        fn(*conn);
        out = true;
      } else {
        out = fn(*conn);
      }
    } catch (const DbError& e) {
      failed(operation, e);
      return out;
    }
    succeeded(operation);
    return out;
  }

  // The connection, connecting when there is none and the connect delay has passed;
  // throws the DbError of a failed connect (for start-up, where failing is right).
  Connection& connect_now();

  // The time left before `operation` may run again (zero when it may run now).
  std::chrono::milliseconds wait(std::string_view operation = {}) const;
  Clock::time_point ready_at(std::string_view operation = {}) const;
  bool connected() const { return conn_ && conn_->healthy(); }
  // The connection's socket, to poll for notifications (-1 when not connected).
  int socket() const { return connected() ? conn_->socket() : -1; }
  // Drops the connection (the next run connects again), e.g. after a failed LISTEN check.
  void reset() { conn_.reset(); }
  const SessionHealth& health() const { return health_; }
  const std::optional<Failure>& last_failure() const { return last_failure_; }
  const std::string& conninfo() const { return options_.conninfo; }

 private:
  struct OperationState {
    Backoff backoff;
    Clock::time_point ready_at{};
    int failures = 0;
  };

  Connection* ready(std::string_view operation);
  void failed(std::string_view operation, const DbError& error);
  void succeeded(std::string_view operation);
  OperationState& state(std::string_view operation);

  const Options options_;
  std::unique_ptr<Connection> conn_;
  Backoff connect_backoff_;
  Clock::time_point connect_at_{};
  int connect_failures_ = 0;
  std::map<std::string, OperationState, std::less<>> operations_;
  SessionHealth health_;
  std::optional<Failure> last_failure_;
};

}  // namespace tw::db
