// The archiver's side of the line protocol (ARCHITECTURE.md, "Requests and answers";
// archive/FORMAT.md, "Answers (the protocol)"): turns one request line into one response,
// against a Store or, in --null mode, against nothing. One RequestHandler belongs to one
// thread at a time.
#pragma once

#include <string_view>

#include "archive/store.hpp"
#include "common/protocol.hpp"

namespace tw::archive {

class RequestHandler {
 public:
  // `store` may be null: every well-formed request is then answered COMPLETE 0 0. `filter`
  // (may be null: none) is what a SCAN leaves alone among a directory's entries.
  explicit RequestHandler(Store* store, const Filter* filter = nullptr)
      : store_(store), filter_(filter) {}

  // Parses and handles one line (without its newline). Never throws for bad input: a
  // malformed line is answered FAILED PERMANENT naming what was wrong.
  Response handle_line(std::string_view line);
  // Handles a parsed request. COMPLETE responses carry the bytes added to the archive
  // and the CPU time (user + system, microseconds) the request used.
  Response handle(const Request& request);

 private:
  Store* store_;
  const Filter* filter_;
};

}  // namespace tw::archive
