#include "format1_writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <zstd.h>

#include "archive/format1/history.hpp"
#include "archive/format1/objects.hpp"
#include "archive/sha256.hpp"
#include "archive_test_util.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"

namespace tw::archive::test {

Format1Writer::Format1Writer(std::string root) : root_(std::move(root)) {
  for (const char* dir : {"", "/nodes", "/objects", "/tmp"}) {
    std::filesystem::create_directories(root_ + dir);
  }
  write_file(root_ + "/FORMAT", "timewarp-archive 1\n");
}

std::string Format1Writer::node(const std::string& path) const {
  const std::string key = sha256_hex(path);
  return root_ + "/nodes/" + key.substr(0, 2) + "/" + key;
}

void Format1Writer::link(const std::string& path) {
  std::filesystem::create_directories(parent_path(node(path)));
  if (path == "/") return;
  const std::string parent = parent_path(path);
  const std::string base = node(parent);
  if (!std::filesystem::exists(base + ".history") && !std::filesystem::exists(base + ".path")) {
    link(parent);
    write_file(base + ".path", parent);
  }
  std::filesystem::create_directories(base + ".children");
  write_file(base + ".children/" + sha256_hex(path), "");
}

void Format1Writer::update(const std::string& path) {
  const std::string file = node(path) + ".history";
  History history{path, {}};
  if (std::filesystem::exists(file)) {
    auto parsed = parse_history(read_file(file));
    if (!parsed) throw std::runtime_error(parsed.error());
    history = std::move(*parsed);
  }
  Version v;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    v.op = Op::Delete;
  } else {
    v = version_of_stat(st);
    if (S_ISLNK(st.st_mode)) {
      v.link_target = std::filesystem::read_symlink(path).string();
      v.size = v.link_target.size();
    } else if (S_ISREG(st.st_mode)) {
      const std::string content = read_file(path);
      v.sha256 = sha256_hex(content);
      std::vector<char> frame(ZSTD_compressBound(content.size()));
      frame.resize(ZSTD_compress(frame.data(), frame.size(), content.data(), content.size(), 3));
      const std::string object = object_file(root_, v.sha256);
      std::filesystem::create_directories(parent_path(object));
      write_file(object, std::string(frame.begin(), frame.end()));
    }
  }
  v.number = history.versions.size() + 1;
  v.archived_at_ns = now_ns();
  history.versions.push_back(v);
  link(path);
  write_file(file, serialize_history(history));
}

}  // namespace tw::archive::test
