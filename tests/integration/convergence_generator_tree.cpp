// The generator's structural operations: renames (over files and empty directories too),
// deletes, type changes, `mkdir -p`, symlinks.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "integration/convergence_generator.hpp"
#include "integration/convergence_generator_util.hpp"

namespace tw::test::convergence {

using namespace generator_detail;

void TreeGenerator::rename_file(const Entries& e) {
  std::vector<std::string> movable = e.files;
  movable.insert(movable.end(), e.links.begin(), e.links.end());
  if (movable.empty()) return create(e);
  const std::string from = pick(movable);
  const std::string dir = chance(0.5) ? parent_of(from) : pick(e.dirs);
  const std::string to = join(dir, fresh_name(dir));
  if (::rename(full(from).c_str(), full(to).c_str()) != 0) return note_error("rename " + esc(from));
  note(fmt::format("rename {} -> {}", esc(from), esc(to)));
}

void TreeGenerator::rename_dir(const Entries& e) {
  if (e.dirs.size() < 2) return mkdir_p(e);
  const std::string from =
      e.dirs[static_cast<std::size_t>(uniform(1, static_cast<int>(e.dirs.size()) - 1))];
  std::vector<std::string> targets;
  for (const auto& d : e.dirs) {
    if (!within(d, from)) targets.push_back(d);
  }
  const std::string dir = chance(0.4) ? parent_of(from) : pick(targets);
  std::string to = join(dir, fresh_name(dir));
  // Now and then over an existing empty directory, which rename(2) replaces.
  if (chance(0.2)) {
    for (const auto& d : targets) {
      if (d.empty() || within(from, d)) continue;
      std::unique_ptr<DIR, int (*)(DIR*)> h(::opendir(full(d).c_str()), ::closedir);
      int n = 0;
      while (h && ::readdir(h.get())) ++n;
      if (n == 2) {
        to = d;
        break;
      }
    }
  }
  if (::rename(full(from).c_str(), full(to).c_str()) != 0) {
    return note_error(fmt::format("rename directory {} -> {}", esc(from), esc(to)));
  }
  note(fmt::format("rename directory {} -> {}", esc(from), esc(to)));
}

void TreeGenerator::rename_over(const Entries& e) {
  std::vector<std::string> movable = e.files;
  movable.insert(movable.end(), e.links.begin(), e.links.end());
  if (movable.size() < 2 || e.files.empty()) return create(e);
  const std::string from = pick(movable);
  const std::string to = pick(e.files);
  if (from == to) return;
  if (::rename(full(from).c_str(), full(to).c_str()) != 0) {
    return note_error(fmt::format("rename {} over {}", esc(from), esc(to)));
  }
  note(fmt::format("rename {} over {}", esc(from), esc(to)));
}

void TreeGenerator::remove(const Entries& e) {
  std::vector<std::string> removable = e.files;
  removable.insert(removable.end(), e.links.begin(), e.links.end());
  if (removable.empty()) return;
  const std::string victim = pick(removable);
  if (::unlink(full(victim).c_str()) != 0) return note_error("delete " + esc(victim));
  note("delete " + esc(victim));
}

void TreeGenerator::remove_tree(const std::string& rel) {
  struct stat st {};
  if (::lstat(full(rel).c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> names;
    {
      std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(full(rel).c_str()), ::closedir);
      while (dir) {
        const dirent* d = ::readdir(dir.get());
        if (!d) break;
        const std::string name = d->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
    }
    for (const auto& name : names) remove_tree(join(rel, name));
    ::rmdir(full(rel).c_str());
  } else {
    ::unlink(full(rel).c_str());
  }
}

void TreeGenerator::replace_type(const Entries& e) {
  std::vector<std::string> candidates(e.dirs.begin() + 1, e.dirs.end());
  candidates.insert(candidates.end(), e.files.begin(), e.files.end());
  candidates.insert(candidates.end(), e.links.begin(), e.links.end());
  if (candidates.empty()) return mkdir_p(e);
  const std::string victim = pick(candidates);
  struct stat st {};
  if (::lstat(full(victim).c_str(), &st) != 0) return;
  const bool was_dir = S_ISDIR(st.st_mode);
  remove_tree(victim);
  const int kind = uniform(0, 2);  // 0 file, 1 symlink, 2 directory with files
  if (kind == 2 || (kind != 1 && !was_dir && chance(0.6))) {
    if (::mkdir(full(victim).c_str(), 0755) != 0) return note_error("rm -r + mkdir " + esc(victim));
    note(fmt::format("rm -r {} ({}), mkdir it again", esc(victim), was_dir ? "directory" : "file"));
    const int files = uniform(0, 3);
    for (int i = 0; i < files; ++i) {
      write_file(join(victim, fresh_name(victim)), content(pick_size()), O_CREAT | O_EXCL,
                 "create");
    }
  } else if (kind == 1) {
    const std::string target = link_target(e, parent_of(victim));
    if (::symlink(target.c_str(), full(victim).c_str()) != 0)
      return note_error("rm -r + symlink " + esc(victim));
    note(fmt::format("rm -r {} ({}), symlink it to {}", esc(victim), was_dir ? "directory" : "file",
                     escape_bytes(target)));
  } else {
    note(fmt::format("rm -r {} ({}), write a file there", esc(victim),
                     was_dir ? "directory" : "file"));
    write_file(victim, content(pick_size()), O_CREAT | O_EXCL, "create");
  }
}

void TreeGenerator::mkdir_p(const Entries& e) {
  std::string dir = pick(e.dirs);
  const int levels = uniform(1, 6);
  std::string made;
  for (int i = 0; i < levels && depth_of(dir) < options_.max_depth; ++i) {
    const std::string next = join(dir, chance(0.3) ? pick(name_pool()) : fresh_name(dir));
    if (::mkdir(full(next).c_str(), 0755) != 0 && errno != EEXIST) break;
    struct stat st {};
    if (::lstat(full(next).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) break;
    dir = next;
    made = next;
  }
  note(fmt::format("mkdir -p {}", esc(dir)));
  const int files = uniform(1, 3);
  for (int i = 0; i < files; ++i) {
    write_file(join(dir, fresh_name(dir)), content(pick_size()), O_CREAT | O_EXCL, "create");
  }
}

std::string TreeGenerator::link_target(const Entries& e, const std::string& dir) {
  switch (uniform(0, 5)) {
    case 0:
      return "does/not/exist";
    case 1:
      return full(pick(e.dirs));  // absolute, into the source
    case 2: {
      std::string up;
      for (int d = depth_of(dir); d > 0; --d) up += "../";
      return up + (e.files.empty() ? "x" : pick(e.files));  // relative, to a file
    }
    case 3:
      return "tgt\nwith\xff"
             "bytes%";
    case 4:
      return std::string(uniform(200, 1000), 'L');
    default:
      return pick(name_pool());  // a sibling's name, maybe
  }
}

void TreeGenerator::make_symlink(const Entries& e) {
  const std::string dir = pick(e.dirs);
  const std::string link = join(dir, fresh_name(dir));
  const std::string target = link_target(e, dir);
  if (::symlink(target.c_str(), full(link).c_str()) != 0) return note_error("symlink " + esc(link));
  note(fmt::format("symlink {} -> {}", esc(link), escape_bytes(target)));
}

void TreeGenerator::retarget_symlink(const Entries& e) {
  if (e.links.empty()) return make_symlink(e);
  const std::string link = pick(e.links);
  const std::string dir = parent_of(link);
  const std::string temp = join(dir, "." + base_of(link) + ".tmp");
  const std::string target = link_target(e, dir);
  ::unlink(full(temp).c_str());
  if (::symlink(target.c_str(), full(temp).c_str()) != 0) return note_error("ln -sfn " + esc(link));
  if (::rename(full(temp).c_str(), full(link).c_str()) != 0)
    return note_error("ln -sfn " + esc(link));
  note(fmt::format("ln -sfn {} {} (through {})", escape_bytes(target), esc(link), esc(temp)));
}

}  // namespace tw::test::convergence
