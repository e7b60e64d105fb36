// The archive's pack store seam (archive/pack_store.hpp) over one bucket of an S3-compatible
// store (bucket.hpp): pack `name` is the object `<prefix>/packs/<name>`. And the bucket the
// configuration names (the `store_*` keys; ARCHITECTURE.md, "Object store"), its keys taken
// from the configuration, the environment or a credentials file, never shown.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "archive/pack_store.hpp"
#include "common/config.hpp"
#include "common/result.hpp"
#include "objstore/bucket.hpp"

namespace tw::objstore {

// Where the configuration says packs go: the bucket (its keys filled in from
// `store_credentials_file` when the configuration has none) and the prefix (`store_prefix`,
// or host_id: the host's name unless set), or what is wrong, naming the key. Nothing when
// no `store_endpoint` is set.
struct StoreTarget {
  BucketConfig bucket;
  std::string prefix;  // without a trailing '/'
};
// "<endpoint>/<bucket>/<prefix>": where packs go, for messages, and the name the archive's
// shipping records are about (Store::ship): another one starts again from nothing.
std::string where(const BucketConfig& bucket, std::string_view prefix);
Result<std::optional<StoreTarget>> store_target(const Config& config);

class BucketPackStore final : public archive::PackStore {
 public:
  BucketPackStore(Bucket bucket, std::string prefix);
  std::string where() const override;
  archive::Done put(std::string_view name, std::span<const char> bytes) override;
  archive::Done remove(std::string_view name) override;
  archive::Expected<std::uint64_t> size(std::string_view name) override;
  archive::Expected<std::string> read(std::string_view name, std::uint64_t offset,
                                      std::uint64_t length) override;
  // `path` is the object <prefix>/<path>.
  archive::Done put_file(std::string_view path, std::span<const char> bytes) override;
  archive::Expected<std::optional<std::string>> get_file(std::string_view path) override;
  archive::Expected<std::vector<std::string>> list_files(std::string_view folder) override;
  archive::Done remove_file(std::string_view path) override;
  // The object pack `name` is stored as.
  std::string key(std::string_view name) const;
  // The object file `path` is stored as.
  std::string file_key(std::string_view path) const;
  Bucket& bucket() { return bucket_; }

 private:
  Bucket bucket_;
  std::string prefix_;  // without a trailing '/'; empty: the bucket's top
};

}  // namespace tw::objstore
