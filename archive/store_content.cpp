// The facade's random access to contents (store.hpp, Store::read_content): what a mounted
// archive reads.
#include <fmt/format.h>

#include "archive/store.hpp"
#include "archive/store_impl.hpp"

namespace tw::archive {

Expected<std::size_t> Store::read_content(const Version& v, std::uint64_t offset,
                                          std::span<char> out) const {
  if (!v.is_file()) {
    return permanent(
        fmt::format("version {} is not a regular file's: it has no content", v.number));
  }
  return impl_->layout->read_content(v, offset, out);
}

}  // namespace tw::archive
