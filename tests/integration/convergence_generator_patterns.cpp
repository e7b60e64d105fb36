// The generator's patterns of several steps, as programs make them: editor saves, log
// rotation, flurries on one file, short-lived files and directories, directories renamed
// between writes.
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

void TreeGenerator::editor_save(const Entries& e) {
  if (e.files.empty()) return create(e);
  const std::string file = pick(e.files);
  struct stat st {};
  if (::lstat(full(file).c_str(), &st) != 0) return;
  const std::string dir = parent_of(file);
  const std::string data = content(pick_size());
  switch (uniform(0, 2)) {
    case 0: {  // vim: rename to the backup, write anew, remove the backup
      const std::string backup = file + "~";
      note(fmt::format("editor save (vim) of {}", esc(file)));
      if (::rename(full(file).c_str(), full(backup).c_str()) != 0)
        return note_error("rename to backup");
      write_file(file, data, O_CREAT | O_TRUNC, "write");
      ::chmod(full(file).c_str(), st.st_mode & 07777);
      ::unlink(full(backup).c_str());
      break;
    }
    case 1: {  // write a temporary file and rename it over the original
      const std::string temp = join(dir, "." + base_of(file) + ".swp");
      note(fmt::format("editor save (temp + rename) of {}", esc(file)));
      if (!write_file(temp, data, O_CREAT | O_TRUNC, "write")) return;
      ::chmod(full(temp).c_str(), st.st_mode & 07777);
      if (::rename(full(temp).c_str(), full(file).c_str()) != 0) note_error("rename over");
      break;
    }
    default: {  // backup by copying, then rewrite in place
      note(fmt::format("editor save (backup by copy) of {}", esc(file)));
      write_file(file + "~", read_all(full(file)), O_CREAT | O_TRUNC, "write backup");
      write_file(file, data, O_TRUNC, "rewrite");
    }
  }
}

void TreeGenerator::rotate_log(const Entries& e) {
  const std::string dir = pick(e.dirs);
  const std::string log = join(dir, chance(0.5) ? "app.log" : "svc %d.log");
  struct stat st {};
  if (::lstat(full(log).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    if (::lstat(full(log).c_str(), &st) == 0) remove_tree(log);
    write_file(log, content(static_cast<std::size_t>(uniform(10, 3000))), O_CREAT, "start log");
    return;
  }
  if (chance(0.6)) {
    note(fmt::format("logrotate {} (rename chain)", esc(log)));
    ::unlink(full(log + ".3").c_str());
    for (int i = 2; i >= 1; --i) {
      ::rename(full(fmt::format("{}.{}", log, i)).c_str(),
               full(fmt::format("{}.{}", log, i + 1)).c_str());
    }
    if (::rename(full(log).c_str(), full(log + ".1").c_str()) != 0) return note_error("rotate");
    write_file(log, "", O_CREAT | O_EXCL, "create");
  } else {
    note(fmt::format("logrotate {} (copytruncate)", esc(log)));
    write_file(log + ".1", read_all(full(log)), O_CREAT | O_TRUNC, "copy");
    // As logrotate does it: ftruncate on an open descriptor, then close.
    const int fd = ::open(full(log).c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || ::ftruncate(fd, 0) != 0) note_error("truncate");
    if (fd >= 0) ::close(fd);
  }
  const int lines = uniform(1, 4);
  for (int i = 0; i < lines; ++i)
    write_file(log, content(static_cast<std::size_t>(uniform(20, 200))), O_APPEND, "log to");
}

void TreeGenerator::flurry(const Entries& e) {
  const std::string dir = pick(e.dirs);
  const std::string file = join(dir, fresh_name(dir));
  const std::string temp = join(dir, fresh_name(dir));
  note(fmt::format("flurry on {}", esc(file)));
  write_file(file, content(pick_size()), O_CREAT | O_EXCL, "create");
  write_file(file, content(static_cast<std::size_t>(uniform(1, 300))), O_APPEND, "append to");
  ::chmod(full(file).c_str(), chance(0.5) ? 0600 : 0664);
  if (::rename(full(file).c_str(), full(temp).c_str()) == 0) {
    note(fmt::format("rename {} -> {}", esc(file), esc(temp)));
    write_file(temp, content(static_cast<std::size_t>(uniform(1, 300))), O_APPEND, "append to");
    if (chance(0.5) && ::rename(full(temp).c_str(), full(file).c_str()) == 0) {
      note(fmt::format("rename {} -> {}", esc(temp), esc(file)));
    }
  }
}

void TreeGenerator::short_lived(const Entries& e) {
  const std::string dir = pick(e.dirs);
  const std::string name = join(dir, fresh_name(dir));
  if (chance(0.5)) {
    write_file(name, content(pick_size()), O_CREAT | O_EXCL, "create");
    ::unlink(full(name).c_str());
    note("delete " + esc(name));
  } else {
    if (::mkdir(full(name).c_str(), 0755) != 0) return note_error("mkdir " + esc(name));
    write_file(join(name, "f"), content(10), O_CREAT | O_EXCL, "create");
    remove_tree(name);
    note(fmt::format("mkdir {}, rm -r it", esc(name)));
  }
}

void TreeGenerator::shuffle_dir(const Entries& e) {
  const std::string dir = pick(e.dirs);
  if (depth_of(dir) >= options_.max_depth) return create(e);
  const std::string a = join(dir, fresh_name(dir));
  if (::mkdir(full(a).c_str(), 0755) != 0) return note_error("mkdir " + esc(a));
  note("mkdir " + esc(a));
  write_file(join(a, "one"), content(pick_size()), O_CREAT | O_EXCL, "create");
  const std::string b = join(dir, fresh_name(dir));
  if (::rename(full(a).c_str(), full(b).c_str()) != 0) return note_error("rename directory");
  note(fmt::format("rename directory {} -> {}", esc(a), esc(b)));
  write_file(join(b, "two"), content(pick_size()), O_CREAT | O_EXCL, "create");
  write_file(join(b, "one"), content(20), O_APPEND, "append to");
  if (chance(0.5) && ::rename(full(b).c_str(), full(a).c_str()) == 0) {
    note(fmt::format("rename directory {} -> {}", esc(b), esc(a)));
  }
}

}  // namespace tw::test::convergence
