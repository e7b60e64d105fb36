// What an open Store holds: its root, its hooks and its layout (the one format-specific
// part, picked by Store::open in open.cpp). Internal to the archive library; same
// thread-safety as Store.
#pragma once

#include <memory>
#include <string>

#include "archive/layout.hpp"
#include "archive/store.hpp"

namespace tw::archive {

struct Store::Impl {
  // --- constant after construction
  // Runs once everything below has closed (Store::open_shipped's folder is removed).
  std::shared_ptr<void> after_close;
  std::string root;
  Store::Mode mode = Store::Mode::ReadOnly;
  StoreHooks hooks;
  std::unique_ptr<Layout> layout;
  WritableLayout* writer = nullptr;  // the layout, when this Store takes new versions
};

}  // namespace tw::archive
