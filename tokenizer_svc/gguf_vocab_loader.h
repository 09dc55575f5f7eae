// Loader for the tokenizer embedded in a GGUF file, tokenizer.ggml.model =
// "gpt2" (byte-level BPE) or "llama" (SentencePiece-style, spm.h):
//   tokenizer.ggml.tokens      normal tokens in GPT-2's byte-to-unicode form
//                              ("gpt2") or with spaces as U+2581 ("llama"),
//                              control and user-defined tokens as raw text
//   tokenizer.ggml.token_type  1 normal, 2 unknown, 3 control, 4 user-defined,
//                              5 unused, 6 byte (<0xNN>); a user-defined token
//                              whose text llama.cpp counts as end of generation
//                              (</s>, <end_of_turn>, ...) is made a control token
//   tokenizer.ggml.merges      "gpt2": "LEFT RIGHT"; the index is the merge rank
//   tokenizer.ggml.pre         "gpt2": pre-tokenizer preset name (pretokenizer.h);
//                              "llama" has none, the key is ignored
//   tokenizer.ggml.scores      "llama": merge priority per token (default 0)
//   tokenizer.ggml.add_space_prefix  "llama": default true
//   tokenizer.ggml.{bos,eos,eot,unknown,padding}_token_id, add_bos_token
//   (default false for "gpt2", true for "llama"), tokenizer.chat_template
// Errors name the file and the key (and the index within an array). Besides
// malformed entries, inconsistent files are errors: two tokens with the same
// text, a merge of something that is not a token or into something that is
// not one, and (when the file holds the model) a number of tokens other than
// the rows of token_embd.weight or output.weight.
#ifndef LLM_TOKENIZER_SVC_GGUF_VOCAB_LOADER_H_
#define LLM_TOKENIZER_SVC_GGUF_VOCAB_LOADER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf.h"
#include "tokenizer_svc/vocab.h"

namespace llm::tok {

// `pretokenizer` overrides tokenizer.ggml.pre when set.
absl::StatusOr<Vocab> VocabFromGguf(const gguf::File& file,
                                    const std::optional<std::string>& pretokenizer);
absl::StatusOr<Vocab> LoadGgufVocab(const std::string& path,
                                    const std::optional<std::string>& pretokenizer);

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_GGUF_VOCAB_LOADER_H_
