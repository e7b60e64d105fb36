#include "common/filesystems.hpp"

#include <sys/sysmacros.h>
#include <sys/vfs.h>

namespace tw {
namespace {

struct PseudoFilesystem {
  unsigned long magic;  // statfs f_type (linux/magic.h; some are not in every header)
  std::string_view name;
};

// Every filesystem here is the kernel talking, not stored bytes. Deliberately absent:
// tmpfs, ramfs, hugetlbfs (files there hold data) and devtmpfs (it reports tmpfs; its
// device nodes are refused as devices anyway).
constexpr PseudoFilesystem kPseudoFilesystems[] = {
    {0x9fa0, "proc"},             // PROC_SUPER_MAGIC: processes, kernel state
    {0x62656572, "sysfs"},        // SYSFS_MAGIC: devices, drivers, kernel knobs
    {0x64626720, "debugfs"},      // DEBUGFS_MAGIC
    {0x74726163, "tracefs"},      // TRACEFS_MAGIC: reads of trace_pipe block
    {0x73636673, "securityfs"},   // SECURITYFS_MAGIC: LSM policy (AppArmor, IMA)
    {0xf97cff8c, "selinuxfs"},    // SELINUX_MAGIC
    {0x43415d53, "smackfs"},      // SMACK_MAGIC
    {0x27e0eb, "cgroup"},         // CGROUP_SUPER_MAGIC
    {0x63677270, "cgroup2"},      // CGROUP2_SUPER_MAGIC
    {0x7655821, "resctrl"},       // RDTGROUP_SUPER_MAGIC
    {0xcafe4a11, "bpf"},          // BPF_FS_MAGIC: pinned maps and programs
    {0x1cd1, "devpts"},           // DEVPTS_SUPER_MAGIC: terminals
    {0x62656570, "configfs"},     // CONFIGFS_MAGIC: kernel objects made by mkdir
    {0xde5e81e4, "efivarfs"},     // EFIVARFS_MAGIC: firmware variables
    {0x6165676c, "pstore"},       // PSTOREFS_MAGIC: crash records
    {0x42494e4d, "binfmt_misc"},  // BINFMTFS_MAGIC
    {0x65735543, "fusectl"},      // FUSECTL_SUPER_MAGIC
    {0x6e736673, "nsfs"},         // NSFS_MAGIC: namespace handles (/run/netns)
    {0x19800202, "mqueue"},       // MQUEUE_MAGIC: POSIX message queues
};

}  // namespace

std::optional<std::string_view> pseudo_filesystem(unsigned long type) {
  for (const auto& fs : kPseudoFilesystems) {
    if (fs.magic == type) return fs.name;
  }
  return std::nullopt;
}

std::optional<std::string_view> pseudo_filesystem_of(int fd, dev_t dev) {
  if (major(dev) != 0) return std::nullopt;
  struct statfs st {};
  if (::fstatfs(fd, &st) != 0) return std::nullopt;
  // f_type is a signed word; the magic numbers above 0x7fffffff come back sign-extended
  // on some ABIs, so compare the low 32 bits.
  return pseudo_filesystem(static_cast<unsigned long>(st.f_type) & 0xffffffffUL);
}

}  // namespace tw
