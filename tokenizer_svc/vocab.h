// The immutable description of a vocabulary, as a loader produces it.
//
// A Vocab holds every token's raw bytes (decoded from base64 or from GPT-2's
// byte-level text), its type, the merge rule, the pre-tokenizer, and the ids
// of the tokens the model treats specially. It has no behaviour: Tokenizer
// (tokenizer.h) builds its tries and tables from it once.
#ifndef LLM_TOKENIZER_SVC_VOCAB_H_
#define LLM_TOKENIZER_SVC_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace llm::tok {

// Token types, numbered as GGUF's tokenizer.ggml.token_type.
enum class TokenType : uint8_t {
  kHole = 0,         // an id that names no token (gaps in .tiktoken ranks)
  kNormal = 1,       // produced by BPE
  kUnknown = 2,      // <unk>
  kControl = 3,      // special tokens such as <|endoftext|>; matched only when allowed
  kUserDefined = 4,  // matched in raw text before pre-tokenization, always
  kUnused = 5,
  kByte = 6,  // <0xNN> byte-fallback tokens
};

// How the rank of an adjacent pair of parts is found during the merge loop.
enum class MergeRule : uint8_t {
  // tiktoken: any two parts whose concatenation is a token merge, with the
  // token's rank (= id) as priority.
  kConcatenationRank,
  // Hugging Face / GGUF: only the listed pairs merge, with their position in
  // the merges list as priority.
  kMergeList,
};

// Which tokenizer the vocabulary belongs to (GGUF tokenizer.ggml.model).
enum class VocabModel : uint8_t {
  // Byte-level BPE ("gpt2") and .tiktoken: pre-tokenize, then merge by rank.
  kBpe,
  // SentencePiece-style ("llama"), llama.cpp's SPM tokenizer: spaces become
  // U+2581, then the adjacent pair whose concatenation is the token of highest
  // score merges, leftmost on ties; no pre-tokenizer (spm.h).
  kSentencePiece,
};

struct Merge {
  uint32_t rank;
  uint32_t result;  // token id of the merged pair
};

inline uint64_t PairKey(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

struct Vocab {
  std::string source;  // file it came from, for Info and errors
  std::string format;  // "tiktoken" or "gguf"

  std::vector<std::string> token_bytes;  // id -> raw bytes ("" for holes)
  std::vector<TokenType> token_types;    // id -> type

  VocabModel model = VocabModel::kBpe;
  MergeRule merge_rule = MergeRule::kConcatenationRank;
  absl::flat_hash_map<uint64_t, Merge> merges;  // kMergeList only, keyed by PairKey
  // A piece that is itself a token is emitted whole, without merging (tiktoken
  // always; llama.cpp's ignore_merges for Llama 3).
  bool whole_piece_shortcut = true;

  // kSentencePiece only. id -> the token's text as the file spells it (spaces
  // as U+2581, byte tokens as <0xNN>): what the merge loop matches.
  std::vector<std::string> piece_texts;
  std::vector<float> scores;  // kSentencePiece only: id -> score (finite)
  // kSentencePiece only: a space is put before the text at its start and
  // after every special token (llama.cpp's add_space_prefix), and Decode
  // drops the first token's leading space.
  bool add_space_prefix = false;

  std::string pretokenizer;              // name: "cl100k_base", "smollm", ...
  std::vector<std::string> pre_regexes;  // applied in order, each splitting every fragment

  std::optional<uint32_t> bos_id, eos_id, eot_id, unk_id, pad_id;
  bool add_bos = false;
  std::string chat_template;  // GGUF tokenizer.chat_template, if any

  size_t size() const { return token_bytes.size(); }
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_VOCAB_H_
