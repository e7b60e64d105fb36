// The text form of one path's history file (FORMAT.md, "Appendix: format 1"). Internal
// to the archive library; pure functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "archive/expected.hpp"
#include "archive/types.hpp"

namespace tw::archive {

std::string serialize_history(const History& history);
// Parses and checks a history file: header, numbering, fields, and the closing checksum. A
// damaged one is a RETRY fault (the archive cannot be read), naming the damage.
Expected<History> parse_history(std::string_view text);

}  // namespace tw::archive
