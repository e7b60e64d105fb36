// The archiver's group commit (archiver/group_commit.hpp; archive/FORMAT.md, "Group commit
// and durability"): when the open group closes, that its answers go out only once the store
// made it durable and in request order, and what a lost group answers. A fake store decides
// when a group is durable and a fake clock tells the time, so nothing here sleeps.
#include "archiver/group_commit.hpp"

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tw::archiver {
namespace {

using namespace std::chrono_literals;
using Close = GroupCommit::Close;

// The group calls of a store, with the groups' durability in the test's hands.
class FakeGroups final : public GroupStore {
 public:
  void begin_group() override { ++begun; }
  void close_group(std::function<void(const archive::Done&)> on_durable) override {
    closing.push_back(std::move(on_durable));
    ++closed;
  }
  // The store's advance() ends the wait for a sync that is done.
  void advance() override {
    ++advanced;
    if (sync_done) busy = false;
  }
  bool syncing() const override { return busy; }
  std::uint64_t staged_bytes() const override { return staged; }
  archive::Done flush() override {
    ++flushes;
    while (!closing.empty()) durable();
    return Ok{};
  }

  // The oldest closed group is made durable (Ok) or lost (an error): the store runs the
  // `on_durable` of its groups in the order they were closed.
  void durable(const archive::Done& status = Ok{}) {
    ASSERT_FALSE(closing.empty());
    auto on_durable = std::move(closing.front());
    closing.pop_front();
    on_durable(status);
  }

  int begun = 0;
  int closed = 0;
  int advanced = 0;
  int flushes = 0;
  bool busy = false;       // syncing an earlier group
  bool sync_done = false;  // ... and the next advance() sees it done
  std::uint64_t staged = 0;
  std::deque<std::function<void(const archive::Done&)>> closing;  // closed, not yet durable
};

Response complete(std::int64_t id) {
  return Response{.id = id,
                  .outcome = Outcome::Complete,
                  .archive_bytes = 100 + static_cast<std::uint64_t>(id),
                  .cpu_us = 10,
                  .message = ""};
}

Response failed(std::int64_t id, Outcome outcome, std::string message) {
  return Response{.id = id, .outcome = outcome, .message = std::move(message)};
}

std::vector<std::int64_t> ids(const std::vector<Response>& responses) {
  std::vector<std::int64_t> out;
  for (const auto& r : responses) out.push_back(r.id);
  return out;
}

class GroupCommitTest : public ::testing::Test {
 protected:
  // Every write, in the order made (each one a group's answers).
  std::vector<std::vector<Response>> written_;
  bool stdout_ok_ = true;
  std::chrono::steady_clock::time_point now_{std::chrono::seconds(1000)};
  FakeGroups store_;
  GroupCommit commit_{&store_,
                      [this](const std::vector<Response>& answers) {
                        if (stdout_ok_) written_.push_back(answers);
                        return stdout_ok_;
                      },
                      [this] { return now_; }};
};

TEST_F(GroupCommitTest, OpensTheFirstGroupAtOnce) { EXPECT_EQ(store_.begun, 1); }

TEST_F(GroupCommitTest, ClosesWhenNoRequestWaitsAndTheStoreIsIdle) {
  commit_.add(complete(1));
  EXPECT_EQ(commit_.due(/*input_waiting=*/false, /*stopping=*/false), Close::InputIdle);
  EXPECT_EQ(commit_.due(/*input_waiting=*/true, /*stopping=*/false), Close::Open);
  EXPECT_TRUE(commit_.after_request(false, false));
  EXPECT_EQ(store_.closed, 1);
  EXPECT_FALSE(commit_.pending());
}

TEST_F(GroupCommitTest, StaysOpenWhileARequestWaits) {
  commit_.add(complete(1));
  EXPECT_TRUE(commit_.after_request(/*input_waiting=*/true, false));
  commit_.add(complete(2));
  EXPECT_TRUE(commit_.after_request(true, false));
  EXPECT_EQ(store_.closed, 0);
  EXPECT_TRUE(commit_.pending());
  commit_.add(complete(3));
  EXPECT_TRUE(commit_.after_request(false, false));
  ASSERT_EQ(store_.closed, 1);
  store_.durable();
  ASSERT_EQ(written_.size(), 1u);
  EXPECT_EQ(ids(written_[0]), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST_F(GroupCommitTest, StaysOpenWhileTheStoreSyncsAnEarlierGroupUntilItSignals) {
  store_.busy = true;
  commit_.add(complete(1));
  EXPECT_EQ(commit_.due(false, false), Close::Open);
  EXPECT_TRUE(commit_.after_request(false, false));
  commit_.add(complete(2));
  EXPECT_TRUE(commit_.after_request(false, false));
  EXPECT_EQ(store_.closed, 0);
  // A signal while the store is still busy (a journal sync after the pack's) closes nothing.
  commit_.on_store_signal();
  EXPECT_EQ(store_.closed, 0);
  // The signal of the sync's end: the group that waited for it closes with both answers.
  store_.sync_done = true;
  const int advanced = store_.advanced;
  commit_.on_store_signal();
  EXPECT_GT(store_.advanced, advanced) << "the synced group is committed first";
  ASSERT_EQ(store_.closed, 1);
  store_.durable();
  ASSERT_EQ(written_.size(), 1u);
  EXPECT_EQ(ids(written_[0]), (std::vector<std::int64_t>{1, 2}));
}

TEST_F(GroupCommitTest, ASignalWithNoAnswerHeldClosesNothing) {
  commit_.on_store_signal();
  EXPECT_EQ(store_.advanced, 1);
  EXPECT_EQ(store_.closed, 0);
}

TEST_F(GroupCommitTest, CommitsTheSyncedGroupsBeforeItDecides) {
  // The sync under way is done, which only the store's advance() finds out: the group must
  // not stay open waiting for a signal that advance() has already taken.
  store_.busy = true;
  store_.sync_done = true;
  commit_.add(complete(1));
  EXPECT_TRUE(commit_.after_request(false, false));
  EXPECT_EQ(store_.advanced, 1);
  EXPECT_EQ(store_.closed, 1);
}

TEST_F(GroupCommitTest, ClosesAtMaxRequests) {
  std::vector<std::int64_t> expected;
  for (std::int64_t id = 1; id < static_cast<std::int64_t>(GroupCommit::kMaxRequests); ++id) {
    commit_.add(complete(id));
    expected.push_back(id);
    EXPECT_TRUE(commit_.after_request(/*input_waiting=*/true, false));
  }
  EXPECT_EQ(store_.closed, 0);
  commit_.add(complete(GroupCommit::kMaxRequests));
  expected.push_back(GroupCommit::kMaxRequests);
  EXPECT_EQ(commit_.due(true, false), Close::Requests);
  EXPECT_TRUE(commit_.after_request(true, false));
  ASSERT_EQ(store_.closed, 1);
  store_.durable();
  ASSERT_EQ(written_.size(), 1u);
  EXPECT_EQ(ids(written_[0]), expected);
}

TEST_F(GroupCommitTest, ClosesAtMaxStagedBytes) {
  commit_.add(complete(1));
  store_.staged = GroupCommit::kMaxStagedBytes - 1;
  EXPECT_EQ(commit_.due(true, false), Close::Open);
  store_.staged = GroupCommit::kMaxStagedBytes;
  EXPECT_EQ(commit_.due(true, false), Close::Bytes);
  EXPECT_TRUE(commit_.after_request(true, false));
  EXPECT_EQ(store_.closed, 1);
}

TEST_F(GroupCommitTest, ClosesAtMaxAgeOfItsFirstAnswer) {
  commit_.add(complete(1));
  now_ += GroupCommit::kMaxAge - 1ms;
  commit_.add(complete(2));  // a later answer does not make the group younger
  EXPECT_EQ(commit_.due(true, false), Close::Open);
  EXPECT_TRUE(commit_.after_request(true, false));
  EXPECT_EQ(store_.closed, 0);
  now_ += 1ms;
  EXPECT_EQ(commit_.due(true, false), Close::Age);
  // The age wins over a store still busy with an earlier group, as the count does.
  store_.busy = true;
  EXPECT_EQ(commit_.due(false, false), Close::Age);
  commit_.add(complete(3));
  EXPECT_TRUE(commit_.after_request(true, false));
  EXPECT_EQ(store_.closed, 1);
  // The next group's age counts from its own first answer.
  now_ += 10s;
  commit_.add(complete(4));
  EXPECT_EQ(commit_.due(true, false), Close::Open);
}

TEST_F(GroupCommitTest, ClosesWhenStopping) {
  store_.busy = true;
  commit_.add(complete(1));
  EXPECT_EQ(commit_.due(/*input_waiting=*/true, /*stopping=*/true), Close::Stopping);
  EXPECT_TRUE(commit_.after_request(true, true));
  EXPECT_EQ(store_.closed, 1);
}

TEST_F(GroupCommitTest, AnswersGoOutOnlyOnceTheGroupIsDurableGroupsInOrder) {
  commit_.add(complete(1));
  commit_.add(complete(2));
  EXPECT_TRUE(commit_.after_request(false, false));
  commit_.add(complete(3));
  EXPECT_TRUE(commit_.after_request(false, false));
  ASSERT_EQ(store_.closed, 2);
  EXPECT_TRUE(written_.empty()) << "a COMPLETE before its group is durable";
  store_.durable();
  ASSERT_EQ(written_.size(), 1u);
  EXPECT_EQ(ids(written_[0]), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(written_[0][0].outcome, Outcome::Complete);
  EXPECT_EQ(written_[0][0].archive_bytes, 101u);
  store_.durable();
  ASSERT_EQ(written_.size(), 2u);
  EXPECT_EQ(ids(written_[1]), (std::vector<std::int64_t>{3}));
}

TEST_F(GroupCommitTest, ALostGroupAnswersItsCompletesFailedRetryWithTheStoresError) {
  commit_.add(complete(1));
  commit_.add(failed(2, Outcome::FailedPermanent, "not a regular file"));
  commit_.add(failed(3, Outcome::FailedRetry, "changed while being read"));
  commit_.add(complete(4));
  EXPECT_TRUE(commit_.after_request(false, false));
  store_.durable(archive::retry("archive: fdatasync: I/O error"));
  ASSERT_EQ(written_.size(), 1u);
  const auto& answers = written_[0];
  EXPECT_EQ(ids(answers), (std::vector<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(answers[0].outcome, Outcome::FailedRetry);
  EXPECT_EQ(answers[0].message, "archive: fdatasync: I/O error");
  EXPECT_EQ(answers[1].outcome, Outcome::FailedPermanent);
  EXPECT_EQ(answers[1].message, "not a regular file");
  EXPECT_EQ(answers[2].outcome, Outcome::FailedRetry);
  EXPECT_EQ(answers[2].message, "changed while being read");
  EXPECT_EQ(answers[3].outcome, Outcome::FailedRetry);
  EXPECT_EQ(answers[3].message, "archive: fdatasync: I/O error");
  // The archiver goes on: the next group is answered as usual.
  EXPECT_FALSE(commit_.broken());
  commit_.add(complete(5));
  EXPECT_TRUE(commit_.after_request(false, false));
  store_.durable();
  ASSERT_EQ(written_.size(), 2u);
  EXPECT_EQ(written_[1][0].outcome, Outcome::Complete);
}

TEST_F(GroupCommitTest, FinishClosesTheOpenGroupAndWaitsForItsAnswers) {
  commit_.add(complete(1));
  EXPECT_TRUE(commit_.after_request(true, false));
  EXPECT_EQ(store_.closed, 0);
  EXPECT_TRUE(commit_.finish());
  EXPECT_EQ(store_.closed, 1);
  EXPECT_EQ(store_.flushes, 1);
  ASSERT_EQ(written_.size(), 1u);
  EXPECT_EQ(ids(written_[0]), (std::vector<std::int64_t>{1}));
}

TEST_F(GroupCommitTest, AGoneStdoutIsReportedAndNothingMoreIsWritten) {
  commit_.add(complete(1));
  EXPECT_TRUE(commit_.after_request(false, false));
  commit_.add(complete(2));
  EXPECT_TRUE(commit_.after_request(false, false));
  stdout_ok_ = false;
  store_.durable();
  EXPECT_TRUE(commit_.broken());
  stdout_ok_ = true;  // a later write would succeed, but none is tried
  store_.durable();
  EXPECT_TRUE(written_.empty());
  commit_.add(complete(3));
  EXPECT_FALSE(commit_.after_request(true, false));
  EXPECT_FALSE(commit_.finish());
}

// --null (no archive): every answer goes out as soon as it is added and closed.
TEST(GroupCommitWithoutStore, WritesEachAnswerAtOnce) {
  std::vector<std::vector<Response>> written;
  GroupCommit commit(nullptr, [&](const std::vector<Response>& answers) {
    written.push_back(answers);
    return true;
  });
  commit.add(complete(1));
  EXPECT_EQ(commit.due(/*input_waiting=*/true, false), Close::Ungrouped);
  EXPECT_TRUE(commit.after_request(true, false));
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(ids(written[0]), (std::vector<std::int64_t>{1}));
  commit.add(complete(2));
  EXPECT_TRUE(commit.after_request(true, false));
  EXPECT_TRUE(commit.finish());
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(ids(written[1]), (std::vector<std::int64_t>{2}));
}

TEST(GroupCommitWithoutStore, AGoneStdoutFailsTheRequest) {
  GroupCommit commit(nullptr, [](const std::vector<Response>&) { return false; });
  commit.add(complete(1));
  EXPECT_FALSE(commit.after_request(true, false));
  EXPECT_TRUE(commit.broken());
}

}  // namespace
}  // namespace tw::archiver
