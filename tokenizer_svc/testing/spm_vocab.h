// Test support: small SentencePiece-style GGUF vocabularies
// (tokenizer.ggml.model = "llama"), for unit tests and fuzzer seeds.
#ifndef LLM_TOKENIZER_SVC_TESTING_SPM_VOCAB_H_
#define LLM_TOKENIZER_SVC_TESTING_SPM_VOCAB_H_

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/gguf/gguf_writer.h"

namespace llm::tok::testing {

struct SpmToken {
  std::string text;  // as the file spells it: U+2581 for a space
  float score = 0;
  int type = 1;  // tokenizer.ggml.token_type
};

inline constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581

// <unk> (unknown, or control when !unk), <s>, </s> (control), then the 256
// <0xNN> byte tokens when `bytes`, then `pieces`, in this order.
inline std::vector<SpmToken> SpmTokens(const std::vector<SpmToken>& pieces, bool bytes = true,
                                       bool unk = true) {
  std::vector<SpmToken> t = {{"<unk>", 0, unk ? 2 : 3}, {"<s>", 0, 3}, {"</s>", 0, 3}};
  if (bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      t.push_back({name, 0, 6});
    }
  }
  t.insert(t.end(), pieces.begin(), pieces.end());
  return t;
}

inline std::string SpmGguf(const std::vector<SpmToken>& tokens,
                           std::optional<bool> add_space_prefix = std::nullopt) {
  gguf::testing::GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama");
  b.AddString("tokenizer.ggml.pre", "default");
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const SpmToken& t : tokens) {
    texts.push_back(t.text);
    scores.push_back(t.score);
    types.push_back(t.type);
  }
  b.AddStringArray("tokenizer.ggml.tokens", texts);
  b.AddFloat32Array("tokenizer.ggml.scores", scores);
  b.AddInt32Array("tokenizer.ggml.token_type", types);
  b.AddUint32("tokenizer.ggml.bos_token_id", 1);
  b.AddUint32("tokenizer.ggml.eos_token_id", 2);
  b.AddUint32("tokenizer.ggml.unknown_token_id", 0);
  if (add_space_prefix.has_value()) b.AddBool("tokenizer.ggml.add_space_prefix", *add_space_prefix);
  return b.Serialize();
}

}  // namespace llm::tok::testing

#endif  // LLM_TOKENIZER_SVC_TESTING_SPM_VOCAB_H_
