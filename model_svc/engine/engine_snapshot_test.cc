// Engine::ExportSession and ImportSession over a small random-weight model
// (two engines of one model file in this process): an imported session is an
// ordinary session (decode, fork, truncate give the original's logits, bit
// for bit), and an import that the KV pool cannot hold is RESOURCE_EXHAUSTED
// marked with the KV limit. The gRPC side and damaged snapshots:
// tests/session_snapshot_test.cc, snapshot/snapshot_test.cc.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/engine_testing.h"
#include "model_svc/engine/limits.h"

namespace llm::engine {
namespace {

using testing::EngineSetup;
using testing::MakeEngine;
using testing::Request;
using testing::Tokens;

// The float32 logits of appending `token` to session `id`.
std::vector<float> DecodeLogits(Engine& e, const std::string& id, int32_t token) {
  AppendRequest r = Request(id, {token});
  r.decode = true;
  absl::StatusOr<AppendResult> out = e.Append(std::move(r));
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->logits.back().values : std::vector<float>();
}

void ExpectBitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(EngineSnapshotTest, AnImportedSessionForksTruncatesAndDecodesAsTheOriginal) {
  auto a = MakeEngine();
  auto b = MakeEngine();
  absl::StatusOr<AppendResult> prefilled = a->Append(Request("", Tokens(23, 3)));
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  const std::string original = prefilled->session_id;
  absl::StatusOr<std::string> bytes = a->ExportSession(original);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ImportedSession> imported = b->ImportSession(*bytes);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->num_tokens, 23);
  const std::string copy = imported->session_id;
  ASSERT_EQ(b->ListSessions().size(), 1u);
  EXPECT_EQ(b->ListSessions()[0].num_tokens, 23);

  // A fork of each (sharing the imported blocks copy-on-write) decodes alike.
  absl::StatusOr<std::string> fork_a = a->Fork(original), fork_b = b->Fork(copy);
  ASSERT_TRUE(fork_a.ok() && fork_b.ok());
  ExpectBitEqual(DecodeLogits(*a, *fork_a, 7), DecodeLogits(*b, *fork_b, 7));
  ExpectBitEqual(DecodeLogits(*a, original, 8), DecodeLogits(*b, copy, 8));
  // Rolled back into an imported block, and written there.
  ASSERT_TRUE(a->Truncate(original, 10).ok());
  ASSERT_TRUE(b->Truncate(copy, 10).ok());
  ExpectBitEqual(DecodeLogits(*a, original, 9), DecodeLogits(*b, copy, 9));
}

TEST(EngineSnapshotTest, AnImportThePoolCannotHoldIsResourceExhausted) {
  auto a = MakeEngine();
  EngineSetup small;
  small.kv_blocks = 4;  // 16 positions
  auto b = MakeEngine(small);
  absl::StatusOr<AppendResult> prefilled = a->Append(Request("", Tokens(23, 4)));
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  absl::StatusOr<std::string> bytes = a->ExportSession(prefilled->session_id);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ImportedSession> imported = b->ImportSession(*bytes);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kResourceExhausted) << imported.status();
  EXPECT_EQ(LimitOf(imported.status()), Limit::kKvCache);
  EXPECT_TRUE(b->ListSessions().empty());
  EXPECT_EQ(b->Stats().kv_blocks_free, 4);
}

TEST(EngineSnapshotTest, AnImportUnderAGivenIdKeepsItAndRefusesATakenOne) {
  auto a = MakeEngine();
  auto b = MakeEngine();
  absl::StatusOr<AppendResult> prefilled = a->Append(Request("", Tokens(23, 5)));
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  const std::string id = prefilled->session_id;
  absl::StatusOr<std::string> bytes = a->ExportSession(id);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ImportedSession> imported = b->ImportSession(*bytes, id);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->session_id, id);
  ExpectBitEqual(DecodeLogits(*a, id, 7), DecodeLogits(*b, id, 7));
  // Taken now: refused, and the session there is untouched.
  absl::StatusOr<ImportedSession> again = b->ImportSession(*bytes, id);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  ASSERT_EQ(b->ListSessions().size(), 1u);
  EXPECT_EQ(b->ListSessions()[0].num_tokens, 24);
}
TEST(EngineSnapshotTest, UnknownSessionIsNotFound) {
  auto a = MakeEngine();
  EXPECT_EQ(a->ExportSession("nope").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace llm::engine
