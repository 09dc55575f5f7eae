// SpillDir (--kv_spill_dir) under a real engine of a small random-weight
// model: a session pushed out by 50 others (by the session limit, or by KV
// space) comes back on its next call with the greedy continuation of an
// undisturbed run and without being prefilled again; a quota of 0, a
// directory that cannot be written and a corrupt spill file each degrade to
// today's eviction (NOT_FOUND), counted; the files outlive the store.
#include "model_svc/server/spill_dir.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/engine_testing.h"
#include "model_svc/server/session_dir.h"

namespace llm {
namespace {

using engine::AppendRequest;
using engine::AppendResult;
using engine::Engine;
using engine::testing::EngineSetup;
using engine::testing::MakeEngine;
using engine::testing::Request;
using engine::testing::Tokens;

constexpr int kPromptTokens = 21;
constexpr int kDecodeSteps = 8;

class SpillDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("spill_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

// Prefills the prompt into a new session of `e`; its id.
std::string Prefill(Engine& e) {
  absl::StatusOr<AppendResult> r = e.Append(Request("", Tokens(kPromptTokens, 11)));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->session_id : "";
}

// kDecodeSteps greedy tokens on session `id`, starting from `first`.
absl::StatusOr<std::vector<int32_t>> Greedy(Engine& e, const std::string& id, int32_t first) {
  std::vector<int32_t> out;
  int32_t token = first;
  for (int i = 0; i < kDecodeSteps; ++i) {
    AppendRequest r = Request(id, {token});
    r.decode = true;
    absl::StatusOr<AppendResult> step = e.Append(std::move(r));
    if (!step.ok()) return step.status();
    token = model::Argmax(step->logits.back());
    out.push_back(token);
  }
  return out;
}

// 50 other sessions, each prefilled (each pushes the least recently used out).
void PushOut(Engine& e) {
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<AppendResult> r = e.Append(Request("", Tokens(kPromptTokens, 100 + i)));
    ASSERT_TRUE(r.ok()) << r.status();
  }
}

engine::SessionInfo InfoOf(Engine& e, const std::string& id) {
  for (const engine::SessionInfo& s : e.ListSessions()) {
    if (s.id == id) return s;
  }
  ADD_FAILURE() << "no session " << id;
  return {};
}

EngineSetup SlotLimited() {
  EngineSetup setup;
  setup.max_sessions = 4;
  return setup;
}

// The two ways the engine evicts: for a session slot, and for KV space.
std::vector<EngineSetup> EvictingSetups() {
  EngineSetup by_kv;
  by_kv.kv_blocks = 24;  // 96 positions: 3 sessions of 6 blocks (+ decodes)
  return {SlotLimited(), by_kv};
}

std::filesystem::path FileOf(const std::filesystem::path& dir, const std::string& id) {
  return dir / (id + std::string(kSessionFileSuffix));
}

// An engine of `setup` with a SpillDir on `dir` of `quota` bytes, whose
// session `id` was pushed out by 50 others, the spills written.
struct PushedOut {
  std::shared_ptr<SpillDir> store;
  std::unique_ptr<Engine> engine;
  std::string id;
};
PushedOut SpillOne(const std::filesystem::path& dir, int64_t quota,
                   EngineSetup setup = SlotLimited()) {
  PushedOut p;
  p.store = std::make_shared<SpillDir>(dir.string(), quota);
  setup.spill = p.store;
  p.engine = MakeEngine(setup);
  p.id = Prefill(*p.engine);
  PushOut(*p.engine);
  p.store->Flush();
  return p;
}

TEST_F(SpillDirTest, ASessionPushedOutBy50OthersComesBackWithTheSameContinuation) {
  std::unique_ptr<Engine> reference = MakeEngine();
  const std::string undisturbed = Prefill(*reference);
  absl::StatusOr<std::vector<int32_t>> expected = Greedy(*reference, undisturbed, 5);
  ASSERT_TRUE(expected.ok()) << expected.status();

  for (const EngineSetup& setup : EvictingSetups()) {
    SCOPED_TRACE(setup.max_sessions == 4 ? "session limit" : "KV space");
    std::filesystem::remove_all(dir_);
    PushedOut p = SpillOne(dir_, 64 << 20, setup);
    Engine& e = *p.engine;
    const engine::EngineStats before = e.Stats();
    EXPECT_GE(before.evicted_sessions + before.evicted_for_session_limit, 47);
    EXPECT_GE(before.spill.spilled, 47);
    EXPECT_EQ(before.spill.failed, 0);
    ASSERT_TRUE(std::filesystem::exists(FileOf(dir_, p.id)));

    absl::StatusOr<std::vector<int32_t>> got = Greedy(e, p.id, 5);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *expected);
    // Restored, not rebuilt: nothing of it prefilled again.
    const engine::SessionInfo info = InfoOf(e, p.id);
    EXPECT_EQ(info.num_tokens, kPromptTokens + kDecodeSteps);
    EXPECT_EQ(info.prefilled_tokens, 0);
    EXPECT_EQ(e.Stats().spill.restored, 1);
    EXPECT_FALSE(std::filesystem::exists(FileOf(dir_, p.id)));
  }
}

TEST_F(SpillDirTest, TruncateForkExportAndReleaseRestoreOrForgetASpilledSession) {
  EngineSetup setup = SlotLimited();
  auto store = std::make_shared<SpillDir>(dir_.string(), 64 << 20);
  setup.spill = store;
  std::unique_ptr<Engine> e = MakeEngine(setup);
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Prefill(*e));
  PushOut(*e);  // the 4 spilled (with 46 others)
  EXPECT_TRUE(e->Truncate(ids[0], 10).ok());
  EXPECT_EQ(InfoOf(*e, ids[0]).num_tokens, 10);
  EXPECT_TRUE(e->Fork(ids[1]).ok());
  // Left where it is when asked not to restore (the checkpoints), then restored.
  EXPECT_EQ(e->ExportSession(ids[2], true, /*restore=*/false).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(e->ExportSession(ids[2]).ok());
  EXPECT_TRUE(e->Release(ids[3]).ok());  // forgotten where it is
  EXPECT_EQ(e->Release(ids[3]).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(e->Stats().spill.restored, 3);
  store->Flush();
  EXPECT_FALSE(std::filesystem::exists(FileOf(dir_, ids[3])));
}

TEST_F(SpillDirTest, FilesOutliveTheStoreAndComeBackInANewEngine) {
  const std::string id = SpillOne(dir_, 64 << 20).id;  // the engine, then the store, gone
  EngineSetup setup = SlotLimited();
  setup.spill = std::make_shared<SpillDir>(dir_.string(), 64 << 20);
  std::unique_ptr<Engine> e = MakeEngine(setup);
  EXPECT_GE(e->Stats().spill.sessions, 40);
  EXPECT_TRUE(e->Restore(id).ok());
  EXPECT_EQ(InfoOf(*e, id).num_tokens, kPromptTokens);
}

TEST_F(SpillDirTest, AQuotaOfZeroOrADirectoryThatCannotBeWrittenDropsAsBefore) {
  // A file where the directory should be: nothing can be created under it.
  std::filesystem::create_directories(dir_);
  const std::filesystem::path blocked = dir_ / "file";
  std::ofstream(blocked) << "x";
  struct Case {
    std::filesystem::path dir;
    int64_t quota;
  };
  for (const Case& c : {Case{dir_ / "zero", 0}, Case{blocked / "sub", 1 << 20}}) {
    SCOPED_TRACE(c.dir);
    PushedOut p = SpillOne(c.dir, c.quota);
    const engine::SpillCounts counts = p.engine->Stats().spill;
    EXPECT_EQ(counts.spilled, 0);
    EXPECT_EQ(counts.dropped + counts.failed, 47);  // 51 sessions, 4 slots
    EXPECT_EQ(c.quota == 0 ? counts.dropped : counts.failed, 47);
    EXPECT_EQ(p.engine->Stats().evicted_for_session_limit, 47);
    EXPECT_EQ(Greedy(*p.engine, p.id, 5).status().code(), absl::StatusCode::kNotFound);
  }
}

TEST_F(SpillDirTest, ACorruptSpillFileIsNotFoundAndCounted) {
  PushedOut p = SpillOne(dir_, 64 << 20);
  const std::filesystem::path file = FileOf(dir_, p.id);
  ASSERT_TRUE(std::filesystem::exists(file));
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  EXPECT_EQ(Greedy(*p.engine, p.id, 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.engine->Stats().spill.failed, 1);
  EXPECT_EQ(p.engine->Stats().spill.restored, 0);
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(SpillDirTest, TheQuotaKeepsTheMostRecentlySpilled) {
  const engine::SpillCounts probe = SpillOne(dir_ / "probe", 64 << 20).store->Counts();
  const int64_t per_file = probe.bytes / probe.sessions;
  // Room for a few files only.
  PushedOut p = SpillOne(dir_ / "small", 5 * per_file);
  const engine::SpillCounts counts = p.store->Counts();
  EXPECT_LE(counts.bytes, 5 * per_file);
  EXPECT_GE(counts.sessions, 4);
  EXPECT_EQ(counts.spilled, 47);
  EXPECT_EQ(counts.dropped, counts.spilled - counts.sessions);
  // The oldest went.
  EXPECT_EQ(Greedy(*p.engine, p.id, 5).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace llm
