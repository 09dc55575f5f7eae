#include "model_svc/snapshot/snapshot.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::snapshot {
namespace {

using ::testing::HasSubstr;

SnapshotLayout TestLayout() {
  SnapshotLayout l;
  l.fingerprint = 0x1234;
  l.block_size = 4;
  l.layers = 2;
  l.kv_dim = 8;
  return l;
}

// 10 tokens (3 blocks); the KV compresses (repeated bytes) unless `noisy`.
Snapshot TestSnapshot(bool noisy) {
  Snapshot s;
  s.layout = TestLayout();
  for (int i = 0; i < 10; ++i) s.tokens.push_back(i * 7);
  s.kv.assign(3 * s.layout.block_bytes(), 'a');
  uint64_t x = 1;
  if (noisy) {
    for (char& c : s.kv) c = static_cast<char>((x = x * 6364136223846793005ULL + 1) >> 56);
  }
  return s;
}

constexpr DecodeLimits kLimits{100, 100};

// Rewrites a header field and signs the bytes again (a well-formed lie).
template <typename T>
std::string Patch(std::string bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
  const uint64_t sum = Checksum64(std::string_view(bytes).substr(kHeaderBytes),
                                  Checksum64(std::string_view(bytes).substr(0, 72), 0));
  std::memcpy(bytes.data() + 72, &sum, 8);
  return bytes;
}

TEST(SnapshotTest, RoundTripsCompressedAndRaw) {
  for (bool noisy : {false, true}) {
    const Snapshot s = TestSnapshot(noisy);
    absl::StatusOr<std::string> bytes = Encode(s);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    const int64_t raw = kHeaderBytes + 40 + static_cast<int64_t>(s.kv.size());
    if (noisy) {
      EXPECT_EQ(static_cast<int64_t>(bytes->size()), raw);  // zstd does not pay
    } else {
      EXPECT_LT(static_cast<int64_t>(bytes->size()), raw / 4);
    }
    absl::StatusOr<Snapshot> back = Decode(*bytes, TestLayout(), kLimits);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->layout, s.layout);
    EXPECT_EQ(back->tokens, s.tokens);
    EXPECT_EQ(back->kv, s.kv);
    EXPECT_EQ(*Encode(*back), *bytes);
  }
}

TEST(SnapshotTest, EmptySessionRoundTrips) {
  Snapshot s;
  s.layout = TestLayout();
  absl::StatusOr<Snapshot> back = Decode(*Encode(s), TestLayout(), kLimits);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->tokens.empty());
}

TEST(SnapshotTest, EncodeRefusesKvOfTheWrongSize) {
  Snapshot s = TestSnapshot(false);
  s.kv.pop_back();
  EXPECT_EQ(Encode(s).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SnapshotTest, TruncatedAnywhereIsDataLoss) {
  for (bool noisy : {false, true}) {
    const std::string bytes = *Encode(TestSnapshot(noisy));
    for (size_t len = 0; len < bytes.size(); ++len) {
      absl::Status st = Decode(bytes.substr(0, len), TestLayout(), kLimits).status();
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << len << ": " << st;
      EXPECT_THAT(st.message(), HasSubstr("truncated"));
    }
  }
}

TEST(SnapshotTest, AFlippedByteIsDataLoss) {
  for (bool noisy : {false, true}) {
    const std::string bytes = *Encode(TestSnapshot(noisy));
    for (size_t at : {size_t{16}, size_t{50}, size_t{72}, size_t{85}, bytes.size() - 1}) {
      std::string bad = bytes;
      bad[at] ^= 0x10;
      absl::Status st = Decode(bad, TestLayout(), kLimits).status();
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << at << ": " << st;
      EXPECT_THAT(st.message(), HasSubstr("checksum"));
    }
  }
}

// Keys and values of different types: the code names both, the old codes
// (the same type for both) are unchanged, and a block's bytes are the sum
// of the two rows' (Q8_0: 34 bytes per 32 values).
TEST(SnapshotTest, KvTypeCodesAndBlockBytes) {
  for (uint32_t k : {kKvF16, kKvF32, kKvQ8_0}) {
    for (uint32_t v : {kKvF16, kKvF32, kKvQ8_0}) {
      EXPECT_EQ(KeyType(KvTypeCode(k, v)), k);
      EXPECT_EQ(ValueType(KvTypeCode(k, v)), v);
    }
    EXPECT_EQ(KvTypeCode(k, k), k);
  }
  SnapshotLayout l = TestLayout();
  l.kv_dim = 64, l.layers = 2, l.block_size = 16;
  l.kv_type = kKvQ8_0;
  EXPECT_EQ(l.block_bytes(), 2 * 16 * 2 * 68);
  l.kv_type = KvTypeCode(kKvQ8_0, kKvF16);
  EXPECT_EQ(l.block_bytes(), 2 * 16 * (68 + 128));
  EXPECT_EQ(KvTypeName(l.kv_type), "k q8_0, v f16");
}

TEST(SnapshotTest, AnotherModelOrLayoutIsFailedPrecondition) {
  const std::string bytes = *Encode(TestSnapshot(false));
  struct Case {
    SnapshotLayout expect;
    const char* names;
  };
  std::vector<Case> cases(7, Case{TestLayout(), ""});
  cases[0].expect.fingerprint = 99, cases[0].names = "another model";
  cases[1].expect.kv_type = kKvF32,
  cases[1].names = "KV cache type is f16; this model server's is f32";
  cases[2].expect.block_size = 8, cases[2].names = "block size";
  cases[3].expect.layers = 3, cases[3].names = "layer count";
  cases[4].expect.kv_dim = 16, cases[4].names = "KV dimension";
  cases[5].expect.kv_type = kKvQ8_0,
  cases[5].names = "KV cache type is f16; this model server's is q8_0";
  cases[6].expect.kv_type = KvTypeCode(kKvQ8_0, kKvF16),
  cases[6].names = "KV cache type is f16; this model server's is k q8_0, v f16";
  for (const Case& c : cases) {
    absl::Status st = Decode(bytes, c.expect, kLimits).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(st.message(), HasSubstr(c.names));
  }
  absl::Status v = Decode(Patch<uint32_t>(bytes, 8, 2), TestLayout(), kLimits).status();
  EXPECT_EQ(v.code(), absl::StatusCode::kFailedPrecondition) << v;
  EXPECT_THAT(v.message(), HasSubstr("version 2"));
}

TEST(SnapshotTest, BadHeadersAreInvalidArgument) {
  const std::string bytes = *Encode(TestSnapshot(false));
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_EQ(Decode(magic, TestLayout(), kLimits).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Decode(Patch<uint32_t>(bytes, 12, 6), TestLayout(), kLimits).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status huge =
      Decode(Patch<uint64_t>(bytes, 48, ~uint64_t{0}), TestLayout(), kLimits).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument) << huge;
  EXPECT_THAT(huge.message(), HasSubstr("18446744073709551615 tokens"));
  absl::Status sizes = Decode(Patch<uint64_t>(bytes, 48, 9), TestLayout(), kLimits).status();
  EXPECT_EQ(sizes.code(), absl::StatusCode::kInvalidArgument) << sizes;
  EXPECT_THAT(sizes.message(), HasSubstr("raw payload bytes"));
  absl::Status trailing =
      Decode(Patch<uint64_t>(bytes + "xy", 0, uint64_t{0x504e53564b4d4c4c}), TestLayout(), kLimits)
          .status();
  EXPECT_EQ(trailing.code(), absl::StatusCode::kInvalidArgument) << trailing;
  EXPECT_THAT(trailing.message(), HasSubstr("2 bytes past its payload"));
}

TEST(SnapshotTest, ContextAndVocabularyBoundTheTokens) {
  const std::string bytes = *Encode(TestSnapshot(false));
  absl::Status ctx = Decode(bytes, TestLayout(), DecodeLimits{9, 100}).status();
  EXPECT_EQ(ctx.code(), absl::StatusCode::kOutOfRange) << ctx;
  EXPECT_THAT(ctx.message(), HasSubstr("10 tokens, past this model server's context length of 9"));
  absl::Status vocab = Decode(bytes, TestLayout(), DecodeLimits{100, 63}).status();
  EXPECT_EQ(vocab.code(), absl::StatusCode::kInvalidArgument) << vocab;
  EXPECT_THAT(vocab.message(), HasSubstr("token 9 has id 63"));
}

}  // namespace
}  // namespace llm::snapshot
