// Test helpers for token masks (header-only): random masks, and what a
// masked logits row must be (the reference the tests compare with).
#ifndef LLM_COMMON_TOKEN_MASK_TESTING_H_
#define LLM_COMMON_TOKEN_MASK_TESTING_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/token_mask.h"

namespace llm::testing {

// A mask of `vocab` tokens allowing each with probability `density`, and
// at least one (the middle token when the draw allows none).
inline TokenMask RandomTokenMask(int64_t vocab, double density, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution allow(density);
  TokenMask m = TokenMask::AllowNone(vocab);
  for (int64_t i = 0; i < vocab; ++i) {
    if (allow(rng)) m.Allow(i);
  }
  if (m.AllowsNone()) m.Allow(vocab / 2);
  return m;
}

// log(sum(exp(row[i]))) over the ids `mask` allows, in double.
inline double AllowedLogSumExp(const std::vector<float>& row, const TokenMask& mask) {
  double max = -std::numeric_limits<double>::infinity(), sum = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (mask.allowed(static_cast<int64_t>(i))) max = std::max<double>(max, row[i]);
  }
  for (size_t i = 0; i < row.size(); ++i) {
    if (mask.allowed(static_cast<int64_t>(i))) sum += std::exp(row[i] - max);
  }
  return max + std::log(sum);
}

// `row` with the ids `mask` does not allow at -inf.
inline std::vector<float> Restricted(const std::vector<float>& row, const TokenMask& mask) {
  std::vector<float> out = row;
  for (size_t i = 0; i < row.size(); ++i) {
    if (!mask.allowed(static_cast<int64_t>(i))) out[i] = -std::numeric_limits<float>::infinity();
  }
  return out;
}

// The allowed ids by descending logit (ties: lower id first), at most `n`.
inline std::vector<int32_t> AllowedByLogit(const std::vector<float>& row, const TokenMask& mask,
                                           size_t n = SIZE_MAX) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < row.size(); ++i) {
    if (mask.allowed(static_cast<int64_t>(i))) ids.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  ids.resize(std::min(ids.size(), n));
  return ids;
}

}  // namespace llm::testing

#endif  // LLM_COMMON_TOKEN_MASK_TESTING_H_
