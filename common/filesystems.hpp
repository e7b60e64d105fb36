// Pseudo filesystems: kernel interfaces that look like files (/proc, /sys and what is
// mounted beneath it, /dev/pts...). What they hold is not data that can be kept and given
// back: sizes are made up (0 or 4096 whatever a read returns), contents are generated at
// each read and differ between two reads, some reads have side effects, and writing a
// "restored" copy back would reconfigure the kernel. The archive keeps none of them.
// Pure functions, safe from any thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>

namespace tw {

// The name of the pseudo filesystem whose statfs(2) f_type is `type` ("proc", "sysfs"...),
// or nothing for a filesystem that holds data (tmpfs, ramfs and hugetlbfs hold data).
std::optional<std::string_view> pseudo_filesystem(unsigned long type);

// The same for the filesystem of open descriptor `fd` (O_PATH is enough), whose fstat(2)
// gave `dev`; nothing when fstatfs fails. A file on a block device is on a filesystem that
// holds data: every pseudo filesystem has an anonymous device (major 0), so only those
// cost an fstatfs.
std::optional<std::string_view> pseudo_filesystem_of(int fd, dev_t dev);

}  // namespace tw
