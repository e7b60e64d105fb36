// Listing a directory: the one readdir loop of the archive library, the operator tool and
// anything else that needs a directory's entries at once (the monitor's scanner streams
// its listings and keeps its own). Safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace tw {

// The errno of a failed system call.
struct Errno {
  int value = 0;
};

using Names = ValueOr<std::vector<std::string>, Errno>;

// The entry names of the open directory `dir_fd` (not "." and ".."), sorted bytewise. The
// descriptor stays open and the caller's (a duplicate of it is read, from the start).
Names directory_names(int dir_fd);
// The same for the directory at `dir` (a link there is followed); ENOENT when it is absent.
Names directory_names(const std::string& dir);

}  // namespace tw
