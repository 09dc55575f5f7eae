// Tokenizer: text to token ids and back, for one vocabulary.
//
//   LLM_ASSIGN_OR_RETURN(auto tok, Tokenizer::Load({.path = "cl100k_base.tiktoken"}));
//   LLM_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, tok->Encode("Hello", {}));
//   LLM_ASSIGN_OR_RETURN(std::string text, tok->Decode(ids));
//
// Encoding is exact BPE (tiktoken's result for .tiktoken vocabularies, Hugging
// Face's for GGUF ones) unless EncodeOptions::algorithm asks for the seed's
// greedy longest match, which is a different tokenization. SentencePiece GGUF
// vocabularies (tokenizer.ggml.model = "llama") are encoded as llama.cpp's
// SPM tokenizer does (spm.h), whatever the algorithm option.
//
// Special tokens: by default text is encoded as ordinary text (tiktoken's
// encode_ordinary), except GGUF user-defined tokens, which are always cut out
// first as llama.cpp and HF do. allowed_special turns recognition on for the
// named special tokens; disallow_special rejects text that contains any other
// special token with InvalidArgument, like tiktoken's default encode().
//
// Unknown input: a byte the vocabulary has no token for becomes its <0xNN>
// byte token, else the unknown token (a token of type kUnknown: a unk_id that
// names a control token is not used), else InvalidArgument naming the byte and
// its byte offset in `text`. Text never becomes a control token unless it is
// allowed. Invalid UTF-8 is tokenized as bytes.
//
// Threads: immutable after Load()/Create(); Encode and Decode may be called
// concurrently from any number of threads. Encoding remembers recent pieces'
// ids in a cache that belongs to the calling thread (piece_cache.h: at most
// ~1.4 MiB per thread that has encoded, freed when the thread exits; shared by
// all tokenizers, a thread switching tokenizers starts it afresh). Results
// never depend on the cache.
// Cost: linear in the input on ordinary text; O(n log n) in the length of a
// single pre-tokenized piece in the worst case (no quadratic blow-up).
#ifndef LLM_TOKENIZER_SVC_TOKENIZER_H_
#define LLM_TOKENIZER_SVC_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer_svc/vocab.h"

namespace llm::tok {

enum class Algorithm {
  kBpe,           // exact byte-pair encoding (default)
  kLongestMatch,  // the seed's greedy longest match over the trie; not BPE
};

struct EncodeOptions {
  // Special tokens (by text) recognized in the input.
  std::vector<std::string> allowed_special;
  bool allow_all_special = false;
  // Reject input containing a special token that is not allowed.
  bool disallow_special = false;
  // Prepend the vocabulary's BOS token (FailedPrecondition if it has none).
  bool add_bos = false;
  Algorithm algorithm = Algorithm::kBpe;
  // false: this call neither reads nor fills the thread's piece cache, so
  // every piece goes through the merge loop (benchmarks measure the encoder
  // without the cache's help this way). The ids are the same either way.
  bool use_piece_cache = true;
};

struct LoadOptions {
  std::string path;  // .tiktoken (with an optional .json sidecar) or .gguf
  // .tiktoken only: override or supply the sidecar's pattern / special tokens.
  std::optional<std::string> pattern;
  std::vector<std::pair<std::string, uint32_t>> special_tokens;
  // GGUF only: use this pre-tokenizer preset instead of tokenizer.ggml.pre.
  std::optional<std::string> pretokenizer;
};

class Tokenizer {
 public:
  // Loads a vocabulary file, choosing the loader by its extension.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const LoadOptions& options);
  // Builds the lookup structures for `vocab`.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  absl::StatusOr<std::vector<uint32_t>> Encode(std::string_view text,
                                               const EncodeOptions& options) const;
  // Appends to *ids; on error *ids keeps what it had before the call.
  absl::Status EncodeTo(std::string_view text, const EncodeOptions& options,
                        std::vector<uint32_t>* ids) const;

  // The exact bytes of `ids`: their TokenBytes concatenated, so that decoding
  // in chunks gives the same bytes. InvalidArgument for an id out of range or
  // a hole.
  absl::StatusOr<std::string> Decode(std::span<const uint32_t> ids) const;
  absl::Status DecodeTo(std::span<const uint32_t> ids, std::string* out) const;
  // The text of a whole encoded sequence, as llama_detokenize gives it: like
  // Decode, except that in a SentencePiece vocabulary with add_space_prefix
  // the first token loses one leading space (the one Encode put before the
  // text), so DecodeText(Encode(x)) == x for text without special tokens.
  absl::StatusOr<std::string> DecodeText(std::span<const uint32_t> ids) const;
  // Bytes of one token (InvalidArgument as above).
  absl::StatusOr<std::string_view> TokenBytes(uint32_t id) const;

  // Whether byte `b` has a token of its own. When false, the byte encodes to
  // a <0xNN> byte token or <unk> (lossy) or fails.
  bool HasByteToken(uint8_t b) const;

  const Vocab& vocab() const;
  // Largest id + 1 (tiktoken's n_vocab).
  size_t vocab_size() const;
  // Texts and ids of the tokens that can be allowed as special.
  std::vector<std::pair<std::string, uint32_t>> SpecialTokens() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_TOKENIZER_H_
