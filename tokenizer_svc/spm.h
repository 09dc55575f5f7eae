// The SentencePiece-style merge loop of llama.cpp's SPM tokenizer
// (llm_tokenizer_spm in its src/llama-vocab.cpp), for GGUF vocabularies with
// tokenizer.ggml.model = "llama" (Llama 2, Mistral <= v0.3, Phi-3, Gemma 1-3).
//
// Input is one run of text whose spaces the caller has already replaced by
// U+2581 (and to which it has prefixed one, when the vocabulary asks). The
// text is split into UTF-8 characters (a lead byte's length, clipped at the
// end; a stray continuation or invalid byte is a character of its own); then,
// repeatedly, the adjacent pair of symbols whose concatenation is a token with
// the highest score merges, the leftmost pair on equal scores, until no
// adjacent pair forms a token. Each final symbol is a token, or a single
// character that is none, which the caller turns into byte tokens.
//
// Which tokens a merge may produce is the caller's choice, by the trie it
// passes (the tokenizer leaves out control, unknown and byte tokens: see
// docs/tokenizer.md).
//
// Threads: SpmModel is shared read-only; an SpmScratch belongs to one thread.
// Cost: O(n log n) in the length of the text (a heap of candidate pairs, at
// most n - 1 + 2 per merge entries); each candidate costs a trie walk along
// the right symbol's bytes. Memory: a 20-byte symbol per character and a
// 16-byte heap entry per candidate pair (fewer than 3 per character), kept in
// the scratch for the next call.
#ifndef LLM_TOKENIZER_SVC_SPM_H_
#define LLM_TOKENIZER_SVC_SPM_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "tokenizer_svc/trie.h"

namespace llm::tok {

struct SpmModel {
  const Trie* trie = nullptr;     // piece text -> id of the tokens a merge may produce
  const float* scores = nullptr;  // id -> score; higher merges first
};

// Reused across calls to save allocations.
struct SpmScratch {
  struct Symbol {
    uint32_t begin;
    uint32_t size;  // 0: merged into its left neighbour
    int32_t prev;
    int32_t next;
    uint32_t node;  // trie node of the symbol's text, or Trie::kNoNode
  };
  struct Bigram {
    float score;
    uint32_t left;
    uint32_t size;  // bytes of both symbols when it was found; stale if changed
    uint32_t node;  // trie node of the concatenation
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

// Calls emit(id, begin, end) for each final symbol text[begin, end), in order:
// id is its token, or Trie::kNoValue when the symbol is a character that is no
// token. `text` must be shorter than 2^31 bytes.
void SpmEncode(const SpmModel& model, std::string_view text, SpmScratch& scratch,
               absl::FunctionRef<void(uint32_t id, uint32_t begin, uint32_t end)> emit);

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_SPM_H_
