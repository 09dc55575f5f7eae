// Test support: a small vocabulary (every byte, a few longer pieces, an end
// token and a control token) and a greedy longest-match tokenizer over it.
#ifndef LLM_CLIENT_CONSTRAIN_TESTING_VOCAB_H_
#define LLM_CLIENT_CONSTRAIN_TESTING_VOCAB_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/constrain/constraint.h"

namespace llm::constrain::testing {

// Ids 0-255: the single bytes. Then kEos, kControl, and the pieces.
constexpr int32_t kEos = 256;
constexpr int32_t kControl = 257;

inline Vocabulary SmallVocabulary() {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  v.token_bytes.push_back("<eos>");
  v.token_bytes.push_back("<|control|>");
  for (const char* piece : {"{\"", "\":", "\": ", "\",", ", \"", "name", "age", "true", "false",
                            "null", "yes", "no", "  ", "\n", "\"}", "12", "abc"}) {
    v.token_bytes.push_back(piece);
  }
  v.end_ids = {kEos};
  v.special_ids = {kControl};
  v.size = static_cast<int32_t>(v.token_bytes.size()) + 5;  // padded like a model's logits
  return v;
}

// Greedy longest match over the vocabulary (not a model's tokenization; any
// tokenization spells the same bytes).
inline std::vector<int32_t> Tokenize(const Vocabulary& v, std::string_view text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t id = 0; id < v.token_bytes.size(); ++id) {
      const std::string& t = v.token_bytes[id];
      if (static_cast<int32_t>(id) == kEos || static_cast<int32_t>(id) == kControl) continue;
      if (t.size() > best_len && text.substr(pos, t.size()) == t) {
        best = static_cast<int32_t>(id);
        best_len = t.size();
      }
    }
    ids.push_back(best);
    pos += best_len;
  }
  return ids;
}

}  // namespace llm::constrain::testing

#endif  // LLM_CLIENT_CONSTRAIN_TESTING_VOCAB_H_
