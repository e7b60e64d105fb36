#include "archiver/group_commit.hpp"

#include <utility>

#include <spdlog/spdlog.h>

namespace tw::archiver {

GroupCommit::GroupCommit(GroupStore* store, Writer write, Clock clock)
    : store_(store), write_(std::move(write)), clock_(std::move(clock)) {
  if (store_ != nullptr) store_->begin_group();
}

void GroupCommit::add(Response response) {
  if (pending_.empty()) started_ = clock_();
  pending_.push_back(std::move(response));
}

GroupCommit::Close GroupCommit::due(bool input_waiting, bool stopping) const {
  if (store_ == nullptr) return Close::Ungrouped;
  if (stopping) return Close::Stopping;
  if (pending_.size() >= kMaxRequests) return Close::Requests;
  if (store_->staged_bytes() >= kMaxStagedBytes) return Close::Bytes;
  if (!pending_.empty() && clock_() - started_ >= kMaxAge) return Close::Age;
  if (!input_waiting && !store_->syncing()) return Close::InputIdle;
  return Close::Open;
}

bool GroupCommit::after_request(bool input_waiting, bool stopping) {
  if (store_ != nullptr) store_->advance();
  if (due(input_waiting, stopping) != Close::Open) return close();
  return !broken();
}

void GroupCommit::on_store_signal() {
  if (store_ == nullptr) return;  // no store, no signal
  store_->advance();
  if (pending() && !store_->syncing()) (void)close();
}

bool GroupCommit::close() {
  if (store_ == nullptr) {
    if (!pending_.empty() && !write_(pending_)) broken_->store(true);
    pending_.clear();
    return !broken();
  }
  if (pending_.empty()) return !broken();
  store_->close_group([broken = broken_, write = write_,
                       group = std::move(pending_)](const archive::Done& durable) mutable {
    if (!durable) {
      spdlog::warn("a group of {} requests could not be made durable: {}", group.size(),
                   durable.error());
      for (auto& response : group) {
        if (response.outcome != Outcome::Complete) continue;
        response.outcome = Outcome::FailedRetry;
        response.message = durable.error();
      }
    }
    if (!broken->load() && !write(group)) broken->store(true);
  });
  pending_.clear();
  return !broken();
}

bool GroupCommit::finish() {
  (void)close();
  if (store_ != nullptr) (void)store_->flush();  // a lost group is answered as such
  return !broken();
}

}  // namespace tw::archiver
