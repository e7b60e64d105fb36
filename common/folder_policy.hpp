// A source folder's own retention policy, as the `retention_folder` key gives it:
// "PATH: keep_daily=7 keep_weekly=0". The keys are those of the archive's policy
// (keep_within, keep_hourly, keep_daily, keep_weekly, keep_monthly, keep_yearly); a key
// the entry leaves out has the archive's value. archive/retention.hpp turns the entries into
// policies; this file only reads and checks the text, so that a bad entry stops every
// program at start with a message naming the key.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace tw {

struct FolderPolicy {
  std::string folder;  // absolute, lexically normal, no trailing slash ("/" itself allowed)
  std::optional<double> keep_within;  // seconds
  std::optional<int> keep_hourly;
  std::optional<int> keep_daily;
  std::optional<int> keep_weekly;
  std::optional<int> keep_monthly;
  std::optional<int> keep_yearly;
};

// Reads one entry: the folder is everything before the entry's last ':' (spaces around it
// dropped), the keys follow as key=value, separated by spaces or commas. keep_within takes
// seconds, or a number with a unit: s, m, h, d or w ("36h"). The error says what is wrong
// with the entry, without the key's name (the caller adds it).
Result<FolderPolicy> parse_folder_policy(std::string_view entry);

}  // namespace tw
