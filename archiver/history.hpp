// The text form of one path's history file (archiver/FORMAT.md, "History files"). Internal
// to the archive library; pure functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "archiver/store.hpp"
#include "common/result.hpp"

namespace tw::archive {

struct History {
  std::string path;  // raw, canonical
  std::vector<Version> versions;

  const Version* latest() const { return versions.empty() ? nullptr : &versions.back(); }
  // The latest version still present (nullptr when empty or the latest is a tombstone).
  const Version* live() const {
    return versions.empty() || !versions.back().exists() ? nullptr : &versions.back();
  }
};

std::string serialize_history(const History& history);
// Parses and checks a history file: header, numbering, fields, and the closing checksum.
Result<History> parse_history(std::string_view text);

}  // namespace tw::archive
