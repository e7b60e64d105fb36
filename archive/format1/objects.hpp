// Format 1's content objects (FORMAT.md, "Appendix: format 1"), read only:
// <root>/objects/<first two hex digits>/<sha256>.zst, one zstd frame of the uncompressed
// content named by its SHA-256. Plain functions, safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "archive/expected.hpp"

namespace tw::archive {

// The file of object `sha256` under the archive `root`.
std::string object_file(const std::string& root, const std::string& sha256);

// Decompresses object `sha256` into `out_fd` (-1: nowhere, just check), re-hashing it.
// Fails, naming the damage, when the object is missing, corrupt, truncated, or its content
// does not hash to its name (RETRY: the archive cannot be read). With `sparse`, runs of
// zeros become holes. `cancelled` (optional) is polled between reads.
Expected<std::uint64_t> extract_object(const std::string& root, const std::string& sha256,
                                       int out_fd, bool sparse,
                                       const std::function<bool()>& cancelled = {});

// Checks one object file by path (verify, for files whose name may be wrong).
Expected<std::uint64_t> check_object_file(const std::string& file, const std::string& expected_sha);

}  // namespace tw::archive
