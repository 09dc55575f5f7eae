#include "tokenizer_svc/hash_bytes.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

namespace llm::tok {
namespace {

TEST(HashBytesTest, EveryByteOfEveryLengthMatters) {
  // A tail load that skipped a byte would leave the hash unchanged here.
  std::mt19937 rng(1);
  for (size_t n = 1; n <= 40; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      std::string s(n, ' ');
      for (char& c : s) c = static_cast<char>(rng());
      const uint64_t h = HashBytes(s);
      for (size_t k = 0; k < n; ++k) {
        std::string t = s;
        t[k] ^= static_cast<char>(1 << (rng() % 8));
        ASSERT_NE(HashBytes(t), h) << "length " << n << " byte " << k;
      }
    }
  }
}

TEST(HashBytesTest, NoCollisionsAmongShortStrings) {
  // All strings of up to two bytes, and the length counts: "a" != "a\0".
  std::set<uint64_t> seen;
  seen.insert(HashBytes(""));
  for (int a = 0; a < 256; ++a) {
    seen.insert(HashBytes(std::string(1, static_cast<char>(a))));
    for (int b = 0; b < 256; ++b) {
      seen.insert(HashBytes(std::string{static_cast<char>(a), static_cast<char>(b)}));
    }
  }
  EXPECT_EQ(seen.size(), 1u + 256u + 65536u);
}

}  // namespace
}  // namespace llm::tok
