#include "client/generate/ngram_proposer.h"

#include <algorithm>
#include <cstddef>

namespace llm::client {

void ProposeByNgram(std::span<const int32_t> history, int32_t max_tokens, int min_ngram,
                    std::vector<int32_t>* out) {
  out->clear();
  if (max_tokens <= 0) return;
  const size_t size = history.size();
  const int lowest = std::clamp(min_ngram, 1, kMaxNgram);
  for (int n = kMaxNgram; n >= lowest; --n) {
    const size_t len = static_cast<size_t>(n);
    if (size < len + 1) continue;
    const std::span<const int32_t> suffix = history.subspan(size - len);
    // Latest start i < size - len whose n tokens equal the suffix, with at
    // least one token after them.
    for (size_t i = size - len; i-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + static_cast<ptrdiff_t>(i))) {
        continue;
      }
      // Copied as LZ77 copies: a continuation that reaches the end of the
      // history goes on with the proposal itself (a repeating run repeats).
      const size_t from = i + len;
      for (size_t j = 0; j < static_cast<size_t>(max_tokens); ++j) {
        const size_t at = from + j;
        out->push_back(at < size ? history[at] : (*out)[at - size]);
      }
      return;
    }
  }
}

}  // namespace llm::client
