// `timewarp mount` (mount_command.hpp): FUSE's low-level requests answered from a MountTree.
// The session loop is FUSE's single-threaded one: a Store belongs to one thread at a time,
// and the tree's cache of decompressed blobs serves the reads of every file from there.
#define FUSE_USE_VERSION 34
#include "cli/mount_command.hpp"

#include <fcntl.h>
#include <fuse_lowlevel.h>

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/archive_commands.hpp"
#include "cli/mount_tree.hpp"
#include "cli/subcommand.hpp"

namespace tw::cli {
namespace {

constexpr std::string_view kCmd = "mount";
// How long the kernel may trust a name or attributes: latest/ follows the archivers within
// a second.
constexpr double kTimeout = 1.0;

MountTree& tree_of(fuse_req_t req) { return *static_cast<MountTree*>(fuse_req_userdata(req)); }

fuse_entry_param entry_of(const Found& f) {
  fuse_entry_param e{};
  e.ino = f.ino;
  e.attr = f.attr;
  e.attr_timeout = kTimeout;
  e.entry_timeout = kTimeout;
  return e;
}

void on_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const Found f = tree_of(req).lookup(parent, name);
  if (f.error != 0) {
    fuse_reply_err(req, f.error);
    return;
  }
  const fuse_entry_param e = entry_of(f);
  fuse_reply_entry(req, &e);
}

void on_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  tree_of(req).forget(ino, nlookup);
  fuse_reply_none(req);
}

void on_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) tree_of(req).forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void on_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  const Found f = tree_of(req).attributes(ino);
  if (f.error != 0) {
    fuse_reply_err(req, f.error);
    return;
  }
  fuse_reply_attr(req, &f.attr, kTimeout);
}

void on_readlink(fuse_req_t req, fuse_ino_t ino) {
  int error = 0;
  const std::string target = tree_of(req).link_target(ino, error);
  if (error != 0) {
    fuse_reply_err(req, error);
    return;
  }
  fuse_reply_readlink(req, target.c_str());
}

// An open file holds the version it was opened as: latest/ may move on meanwhile.
void on_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  int error = 0;
  auto version = tree_of(req).file_version(ino, error);
  if (!version) {
    fuse_reply_err(req, error);
    return;
  }
  fi->fh = reinterpret_cast<uint64_t>(new archive::Version(std::move(*version)));
  fi->keep_cache = tree_of(req).immutable(ino) ? 1 : 0;
  fuse_reply_open(req, fi);
}

void on_read(fuse_req_t req, fuse_ino_t /*ino*/, size_t size, off_t off, fuse_file_info* fi) {
  const auto& version = *reinterpret_cast<const archive::Version*>(fi->fh);
  std::vector<char> buffer(size);
  const long got = tree_of(req).read(version, static_cast<std::uint64_t>(off), buffer);
  if (got < 0) {
    fuse_reply_err(req, static_cast<int>(-got));
    return;
  }
  fuse_reply_buf(req, buffer.data(), static_cast<size_t>(got));
}

void on_release(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  delete reinterpret_cast<archive::Version*>(fi->fh);
  fuse_reply_err(req, 0);
}

// A directory is listed once, when opened; readdir hands out that listing in pieces.
void on_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  int error = 0;
  std::unique_ptr<Listing> listing = tree_of(req).list(ino, error);
  if (!listing) {
    fuse_reply_err(req, error);
    return;
  }
  fi->fh = reinterpret_cast<uint64_t>(listing.release());
  fuse_reply_open(req, fi);
}

void reply_listing(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  const auto& listing = *reinterpret_cast<const Listing*>(fi->fh);
  MountTree& tree = tree_of(req);
  std::vector<char> buffer(size);
  size_t used = 0;
  for (auto i = static_cast<size_t>(off); i < listing.entries.size(); ++i) {
    const auto& entry = listing.entries[i];
    const Found f = tree.listed(entry, false);
    if (f.error != 0) continue;
    const auto next = static_cast<off_t>(i + 1);
    char* at = buffer.data() + used;
    const size_t room = size - used;
    size_t needs = 0;
    if (plus) {
      const fuse_entry_param e = entry_of(f);
      needs = fuse_add_direntry_plus(req, at, room, entry.name.c_str(), &e, next);
    } else {
      needs = fuse_add_direntry(req, at, room, entry.name.c_str(), &f.attr, next);
    }
    if (needs > room) break;
    // Handed to the kernel with its inode: counted as a lookup, as FUSE asks.
    if (plus && f.ino != 0) (void)tree.listed(entry, true);
    used += needs;
  }
  fuse_reply_buf(req, buffer.data(), used);
}

void on_readdir(fuse_req_t req, fuse_ino_t /*ino*/, size_t size, off_t off, fuse_file_info* fi) {
  reply_listing(req, size, off, fi, false);
}

void on_readdirplus(fuse_req_t req, fuse_ino_t /*ino*/, size_t size, off_t off,
                    fuse_file_info* fi) {
  reply_listing(req, size, off, fi, true);
}

void on_releasedir(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  delete reinterpret_cast<Listing*>(fi->fh);
  fuse_reply_err(req, 0);
}

// What the mount answers; every request that would change the tree is refused by the
// kernel, the mount being read-only.
fuse_lowlevel_ops operations() {
  fuse_lowlevel_ops ops{};
  ops.lookup = on_lookup;
  ops.forget = on_forget;
  ops.forget_multi = on_forget_multi;
  ops.getattr = on_getattr;
  ops.readlink = on_readlink;
  ops.open = on_open;
  ops.read = on_read;
  ops.release = on_release;
  ops.opendir = on_opendir;
  ops.readdir = on_readdir;
  ops.readdirplus = on_readdirplus;
  ops.releasedir = on_releasedir;
  return ops;
}

struct MountArgs {
  std::string mountpoint;
  bool allow_other = false;
  bool from_store = false;
};

// Serves `tree` at `mountpoint` until it is unmounted or a signal stops it.
int serve(MountTree& tree, const MountArgs& args) {
  std::string options = "ro,default_permissions,fsname=timewarp,subtype=timewarp";
  if (args.allow_other) options += ",allow_other";
  std::vector<std::string> words = {"timewarp", "-o", options};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  const fuse_lowlevel_ops ops = operations();
  fuse_session* se = fuse_session_new(&fargs, &ops, sizeof ops, &tree);
  fuse_opt_free_args(&fargs);
  if (se == nullptr) return command_failed(kCmd, "cannot start a FUSE session", 1);
  int code = 1;
  if (fuse_set_signal_handlers(se) != 0) {
    command_failed(kCmd, "cannot set the signal handlers", 1);
  } else {
    if (fuse_session_mount(se, args.mountpoint.c_str()) != 0) {
      command_failed(kCmd, fmt::format("cannot mount on {}", args.mountpoint), 1);
    } else {
      spdlog::info("mounted the archive on {}", args.mountpoint);
      // A signal (SIGTERM, SIGINT, SIGHUP) or an unmount ends the loop: both a clean stop.
      const int loop = fuse_session_loop(se);
      fuse_session_unmount(se);
      code =
          loop < 0 ? command_failed(kCmd, fmt::format("serving failed (error {})", -loop), 1) : 0;
    }
    fuse_remove_signal_handlers(se);
  }
  fuse_session_destroy(se);
  return code;
}

int run_mount(const Config& config, const MountArgs& args) {
  auto store = open_store(config, args.from_store);
  if (!store) return command_failed(kCmd, store.error(), 2);
  MountTree tree(*store);
  return serve(tree, args);
}

}  // namespace

void add_mount_command(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<MountArgs>();
  auto* mount = add_archive_subcommand(
      app, "mount",
      "show the archive as a read-only filesystem at MOUNTPOINT: latest/PATH, at/TIME/PATH, "
      "versions/PATH/ (runs until unmounted or stopped)");
  mount->add_option("MOUNTPOINT", args->mountpoint, "an existing empty directory")->required();
  mount->add_flag("--allow-other", args->allow_other,
                  "let other users than the one mounting see it (the archived modes still "
                  "apply); off by default, also as root");
  add_from_store_flag(*mount, args->from_store);
  mount->footer(
      "Example:\n"
      "  timewarp mount /mnt/archive &\n"
      "  ls /mnt/archive/latest/home/me\n"
      "  cat /mnt/archive/at/2026-11-26T10:00/home/me/notes.txt\n"
      "  ls /mnt/archive/versions/home/me/notes.txt/\n"
      "  fusermount3 -u /mnt/archive   # or umount, or Ctrl-C\n");
  run_when_parsed(*mount, run, [&config, args] { return run_mount(config, *args); });
}

}  // namespace tw::cli
