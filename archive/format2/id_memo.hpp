// The ids format 2's catalog has looked up or added (catalog.cpp): a node's by its path, a
// pack's by its name. Internal to the archive library; belongs to one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tw::archive {

// Ids of nodes (by path) or of packs (by name), which never change once committed: those
// known committed, and those the transaction under way added, kept apart until it commits.
// Looked up by string_view, without a copy. The memory is bounded: a map that grows past
// 65,536 ids starts again.
class IdMemo {
 public:
  std::optional<std::int64_t> find(std::string_view key) const {
    if (auto it = known_.find(key); it != known_.end()) return it->second;
    if (auto it = added_.find(key); it != added_.end()) return it->second;
    return std::nullopt;
  }
  // Remembers an id found or added; inside a transaction (which may have added it) it
  // counts only once the transaction commits.
  void remember(std::string_view key, std::int64_t id, bool in_transaction) {
    Map& into = in_transaction ? added_ : known_;
    if (into.size() >= 65'536) into.clear();
    into.emplace(key, id);
  }
  void committed() {
    known_.merge(added_);
    added_.clear();
  }
  void rolled_back() { added_.clear(); }
  void forget() {
    known_.clear();
    added_.clear();
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const {
      return std::hash<std::string_view>{}(key);
    }
  };
  using Map = std::unordered_map<std::string, std::int64_t, Hash, std::equal_to<>>;
  Map known_, added_;
};

}  // namespace tw::archive
