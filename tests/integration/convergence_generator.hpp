// A seeded generator of file operations for the convergence test: it changes a source tree
// the way people and programs do, and logs every step (escaped) to the run's EventLog.
// Operations: create, overwrite in place, append, truncate, chmod, chown, set mtime,
// rename of files and directories (into other folders too), rename over an existing file
// or empty directory, delete, `rm -r` and re-create as another type (and the reverse),
// `mkdir -p` with immediate writes, symlinks (relative, absolute, dangling, odd bytes) and
// `ln -sfn` retargets, editor saves (vim's rename-and-rewrite, write-temp-and-rename,
// backup-by-copy), log rotation (rename chain and copytruncate), flurries of changes to
// one file, files created and removed at once, directories renamed between writes.
// Names come from a pool with spaces, newlines, tabs, `%`, control bytes, invalid UTF-8 and
// long names; some paths are deep. Sizes are bytes to a few KiB, a few larger.
// The same seed gives the same choices on the same tree; timing makes the tree (and so
// later choices) differ from run to run. One thread.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "integration/convergence_log.hpp"

namespace tw::test::convergence {

class TreeGenerator {
 public:
  struct Options {
    int max_entries = 250;       // beyond this, deletions are favoured
    int max_depth = 9;           // directories deeper than this get no subdirectories
    bool large_files = true;     // a few files of 64 KiB to 1 MiB
    std::set<std::string> only;  // when not empty: only these operations (see names())
  };

  // The operations' names: create, overwrite, append, truncate, chmod, chown, mtime, rename,
  // rename-dir, rename-over, delete, replace-type, mkdir-p, symlink, retarget, editor-save,
  // logrotate, flurry, short-lived, shuffle-dir.
  static std::vector<std::string> names();

  // `root` must exist; it is the source folder itself.
  TreeGenerator(std::string root, std::mt19937_64& rng, EventLog& log, Options options);
  TreeGenerator(const TreeGenerator&) = delete;
  TreeGenerator& operator=(const TreeGenerator&) = delete;

  // One random operation (some are patterns of several system calls).
  void step();

  int operations() const { return operations_; }

 private:
  struct Choice;
  static const std::vector<Choice>& choices();
  struct Entries {
    std::vector<std::string> files, links, dirs;  // relative; dirs holds "" (the root)
    std::size_t size() const { return files.size() + links.size() + dirs.size(); }
  };
  Entries scan() const;
  std::string full(const std::string& rel) const;
  static std::string join(const std::string& dir, const std::string& name);
  std::string fresh_name(const std::string& dir);
  std::string content(std::size_t size);
  std::size_t pick_size();
  int uniform(int lo, int hi);
  bool chance(double p);
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }
  void note(const std::string& what);
  void note_error(const std::string& what);
  bool write_file(const std::string& rel, const std::string& data, int flags, const char* verb);

  void create(const Entries& e);
  void overwrite(const Entries& e);
  void append(const Entries& e);
  void truncate_file(const Entries& e);
  void change_mode(const Entries& e);
  void change_owner(const Entries& e);
  void set_mtime(const Entries& e);
  void rename_file(const Entries& e);
  void rename_dir(const Entries& e);
  void rename_over(const Entries& e);
  void remove(const Entries& e);
  void replace_type(const Entries& e);
  void mkdir_p(const Entries& e);
  void make_symlink(const Entries& e);
  void retarget_symlink(const Entries& e);
  void editor_save(const Entries& e);
  void rotate_log(const Entries& e);
  void flurry(const Entries& e);
  void short_lived(const Entries& e);
  void shuffle_dir(const Entries& e);
  std::string link_target(const Entries& e, const std::string& dir);
  void remove_tree(const std::string& rel);

  const std::string root_;
  std::mt19937_64& rng_;
  EventLog& log_;
  const Options options_;
  int operations_ = 0;
};

}  // namespace tw::test::convergence
