// Writes archives in format 1 (FORMAT.md, "Appendix: format 1") as the releases before
// format 2 did, so that tests can damage one and watch today's read-only code name it: a
// history file per path, a .path file per ancestor known only by name, a marker per child,
// and a zstd object per content. Not an archiver: no locks, no crash safety.
#pragma once

#include <string>

namespace tw::archive::test {

class Format1Writer {
 public:
  // Makes the archive's FORMAT file and folders under `root`.
  explicit Format1Writer(std::string root);
  // Archives what `path` holds now (a file, symlink or directory) as its next version; a
  // path that is gone gets a tombstone.
  void update(const std::string& path);

 private:
  // Links `path` from its parent's .children, naming each ancestor that has no node yet.
  void link(const std::string& path);
  std::string node(const std::string& path) const;
  std::string root_;
};

}  // namespace tw::archive::test
