#include "tokenizer_svc/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "tokenizer_svc/bpe.h"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/pair_table.h"
#include "tokenizer_svc/piece_cache.h"
#include "tokenizer_svc/pretokenizer.h"
#include "tokenizer_svc/spm.h"
#include "tokenizer_svc/tiktoken_loader.h"
#include "tokenizer_svc/token_index.h"
#include "tokenizer_svc/trie.h"

namespace llm::tok {
namespace {

// The calling thread's merge scratch, kept from call to call: a long piece
// then reuses the parts and queue of the last one instead of allocating (and
// faulting in, and growing) megabytes afresh. When it holds more than
// kKeptScratchBytes after a long piece it is freed, so a thread keeps at most
// that much (a 1 MB piece of one letter leaves ~17 MB).
constexpr size_t kKeptScratchBytes = size_t{32} << 20;

BpeScratch& ThreadBpeScratch() {
  static thread_local BpeScratch scratch;
  return scratch;
}

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  // Normal tokens: bytes -> id. Only longest match walks it, and the paths
  // below when `tokens` is empty, so it is built at load only then, else on
  // first use (NormalTrie()): the token index and the pair table are built
  // without it.
  mutable Trie trie;
  mutable std::once_flag trie_once;
  Trie special_trie;  // control, unknown and user-defined tokens: text -> id
  PairTable pairs;    // concatenation rule: (left id, right id) -> merged id
  // Normal tokens: bytes -> id in one probe; empty (then the trie is used)
  // when a token is longer than TokenIndex::kMaxTokenBytes.
  TokenIndex tokens;
  bool has_user_defined = false;
  BpeModel model;
  std::array<uint32_t, 256> byte_fallback{};  // <0xNN> token ids
  // The token a byte without a token of its own (and without a byte token)
  // becomes: a real unknown token (type kUnknown), never a control token such
  // as the <|endoftext|> that many GGUF files name as unknown_token_id.
  uint32_t unk_fallback = Trie::kNoValue;
  std::unique_ptr<Pretokenizer> pre;  // BPE only
  // SentencePiece vocabularies: the tokens a merge may produce (piece text ->
  // id), and per byte the token a character without a token falls back to
  // (its <0xNN> token, else a token that is that one byte).
  Trie spm_trie;
  SpmModel spm;
  std::array<uint32_t, 256> spm_byte{};
  // Names this instance's entries in the per-thread piece caches.
  uint64_t cache_owner = 0;

  // One call's state: the allowed special ids, and the calling thread's merge
  // scratch and piece cache.
  struct Call {
    const EncodeOptions& options;
    const char* text;               // the request's text, for byte offsets in errors
    std::vector<uint32_t> allowed;  // sorted
    BpeScratch& scratch;            // ThreadBpeScratch()
    std::vector<uint32_t>* ids;
    absl::Status status;
    PieceCache* cache = nullptr;  // nullptr: options.use_piece_cache is false
    // SentencePiece: whether the next text follows the start or a special
    // token (then it gets the space prefix), the escaped text and merge state.
    bool after_special = true;
    std::string escaped;
    SpmScratch spm;
  };

  static void BuildTrie(const Vocab& v, Trie* trie) {
    for (uint32_t id = 0; id < v.size(); ++id) {
      // A duplicate keeps the lower id.
      if (v.token_types[id] == TokenType::kNormal) trie->Insert(v.token_bytes[id], id);
    }
    trie->Freeze();
  }

  // The merge trie and byte fallbacks of a SentencePiece vocabulary. Merges
  // may produce normal, user-defined and unused tokens (llama.cpp matches
  // every token's text); not control or unknown tokens, so that text never
  // becomes one, nor byte tokens, whose text <0xNN> is not their bytes.
  absl::Status BuildSentencePiece(const Vocab& v) {
    const size_t n = v.size();
    if (v.piece_texts.size() != n || v.scores.size() != n) {
      return absl::InvalidArgumentError(
          llm::StrCat(v.source, ": a SentencePiece vocabulary needs a text and a score per token"));
    }
    spm_byte.fill(Trie::kNoValue);
    for (uint32_t id = 0; id < n; ++id) {
      if (!std::isfinite(v.scores[id])) {
        return absl::InvalidArgumentError(
            llm::StrCat(v.source, ": token ", id, " has a score that is not a finite number"));
      }
      const TokenType t = v.token_types[id];
      if (t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUnused) {
        spm_trie.Insert(v.piece_texts[id], id);
      }
    }
    spm_trie.Freeze();
    for (int b = 0; b < 256; ++b) {
      spm_byte[b] = byte_fallback[b] != Trie::kNoValue
                        ? byte_fallback[b]
                        : spm_trie.Find(std::string(1, static_cast<char>(b)));
    }
    spm.trie = &spm_trie;
    return absl::OkStatus();
  }

  const Trie& NormalTrie() const {
    std::call_once(trie_once, [this] { BuildTrie(vocab, &trie); });
    return trie;
  }

  bool Matchable(const Call& call, uint32_t id) const {
    if (vocab.token_types[id] == TokenType::kUserDefined) return true;
    return call.options.allow_all_special ||
           std::binary_search(call.allowed.begin(), call.allowed.end(), id);
  }

  // Leftmost-longest special token in text[from..] accepted by `accept`:
  // {position, length, id}, or position == npos.
  template <typename Accept>
  std::tuple<size_t, size_t, uint32_t> FindSpecial(std::string_view text, size_t from,
                                                   Accept&& accept) const {
    for (size_t i = from; i < text.size(); ++i) {
      if (!special_trie.IsFirstByte(static_cast<uint8_t>(text[i]))) continue;
      size_t best_len = 0;
      uint32_t best_id = Trie::kNoValue;
      uint32_t node = Trie::kRoot;
      for (size_t j = i; j < text.size(); ++j) {
        node = special_trie.Child(node, static_cast<uint8_t>(text[j]));
        if (node == Trie::kNoNode) break;
        const uint32_t id = special_trie.Value(node);
        if (id != Trie::kNoValue && accept(id)) {
          best_len = j + 1 - i;
          best_id = id;
        }
      }
      if (best_len > 0) return {i, best_len, best_id};
    }
    return {std::string_view::npos, 0, Trie::kNoValue};
  }

  // The byte at `at` (a pointer into the request's text) has no token.
  void PushFallback(Call& call, const char* at) const {
    PushFallback(call, static_cast<uint8_t>(*at), at - call.text);
  }
  void PushFallback(Call& call, uint8_t byte, ptrdiff_t offset) const {
    if (byte_fallback[byte] != Trie::kNoValue) {
      call.ids->push_back(byte_fallback[byte]);
    } else if (unk_fallback != Trie::kNoValue) {
      call.ids->push_back(unk_fallback);
    } else if (call.status.ok()) {
      call.status = absl::InvalidArgumentError(absl::StrFormat(
          "byte 0x%02X at byte offset %d of the text has no token in vocabulary %s (no "
          "<0x%02X> byte token, no unknown token)",
          byte, offset, vocab.source, byte));
    }
  }

  void EncodePiece(Call& call, std::string_view piece) const {
    if (piece.size() == 1) {
      const auto b = static_cast<uint8_t>(piece[0]);
      if (model.byte_ids[b] != Trie::kNoValue) {
        call.ids->push_back(model.byte_ids[b]);
      } else {
        PushFallback(call, piece.data());
      }
      return;
    }
    // The cache first: it holds recent pieces whether they are whole tokens or
    // merged, and one probe of it is cheaper than a walk down the trie.
    if (call.cache != nullptr) {
      const std::span<const uint32_t> cached = call.cache->Lookup(piece);
      if (!cached.empty()) {
        // Mostly one to three ids: a loop, not vector::insert's memmove call.
        for (const uint32_t id : cached) call.ids->push_back(id);
        return;
      }
    }
    if (vocab.whole_piece_shortcut) {
      const uint32_t id = tokens.empty() ? trie.Find(piece) : tokens.Find(piece);
      if (id != Trie::kNoValue) {
        call.ids->push_back(id);
        if (call.cache != nullptr) call.cache->Insert(piece, std::span(&id, 1));
        return;
      }
    }
    const size_t before = call.ids->size();
    bool all_tokens = true;  // no byte fallback: the ids depend on the piece alone
    BytePairEncode(model, piece, call.scratch, [&](uint32_t id, uint32_t begin, uint32_t) {
      if (id != Trie::kNoValue) {
        call.ids->push_back(id);
      } else {
        all_tokens = false;
        PushFallback(call, piece.data() + begin);
      }
    });
    if (all_tokens && call.cache != nullptr) {
      call.cache->Insert(piece, std::span(*call.ids).subspan(before));
    }
    if (piece.size() >= kBpeQueueThreshold && call.scratch.ReservedBytes() > kKeptScratchBytes) {
      call.scratch = BpeScratch();
    }
  }

  void EncodeLongestMatch(Call& call, std::string_view text) const {
    for (size_t pos = 0; pos < text.size();) {
      const auto [len, id] = NormalTrie().LongestPrefix(text.substr(pos));
      if (len == 0) {
        PushFallback(call, text.data() + pos);
        ++pos;
      } else {
        call.ids->push_back(id);
        pos += len;
      }
    }
  }

  // One fragment of text between special tokens, as llama.cpp's SPM
  // tokenizer does it: a space before it when it follows the start or a
  // special token and the vocabulary asks for that, every space as U+2581,
  // then the merge loop; a character that is no token becomes its bytes'
  // tokens.
  void EncodeSentencePiece(Call& call, std::string_view text) const {
    static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
    const bool prefix = vocab.add_space_prefix && call.after_special;
    call.after_special = false;
    std::string& escaped = call.escaped;
    escaped.clear();
    if (prefix) escaped.append(kSpace);
    for (const char c : text) {
      if (c == ' ') {
        escaped.append(kSpace);
      } else {
        escaped.push_back(c);
      }
    }
    if (escaped.size() >= (1u << 31)) {
      if (call.status.ok()) {
        call.status = absl::InvalidArgumentError("text over 2 GiB between special tokens");
      }
      return;
    }
    SpmEncode(spm, escaped, call.spm, [&](uint32_t id, uint32_t begin, uint32_t end) {
      if (id != Trie::kNoValue) {
        call.ids->push_back(id);
        return;
      }
      for (uint32_t i = begin; i < end; ++i) {
        const auto b = static_cast<uint8_t>(escaped[i]);
        if (spm_byte[b] != Trie::kNoValue) {
          call.ids->push_back(spm_byte[b]);
        } else {
          PushFallback(call, b, OriginalOffset(text, prefix, i) + (text.data() - call.text));
        }
      }
    });
  }

  // Offset in `text` of byte `i` of its escaped form (the prefix counts as
  // offset 0). Only for error messages: linear in the text.
  static size_t OriginalOffset(std::string_view text, bool prefix, size_t i) {
    size_t escaped = prefix ? 3 : 0;
    if (i < escaped) return 0;
    for (size_t k = 0; k < text.size(); ++k) {
      escaped += text[k] == ' ' ? 3 : 1;
      if (i < escaped) return k;
    }
    return text.size();
  }

  void EncodeOrdinary(Call& call, std::string_view text) const {
    if (vocab.model == VocabModel::kSentencePiece) {
      if (!text.empty()) EncodeSentencePiece(call, text);
      return;
    }
    if (call.options.algorithm == Algorithm::kLongestMatch) {
      EncodeLongestMatch(call, text);
      return;
    }
    pre->ForEachPiece(text, [&](std::string_view piece) { EncodePiece(call, piece); });
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const LoadOptions& options) {
  if (absl::EndsWith(options.path, ".gguf")) {
    LLM_ASSIGN_OR_RETURN(Vocab vocab, LoadGgufVocab(options.path, options.pretokenizer));
    return Create(std::move(vocab));
  }
  TiktokenOptions tk;
  tk.pattern = options.pattern;
  tk.special_tokens = options.special_tokens;
  LLM_ASSIGN_OR_RETURN(Vocab vocab, LoadTiktokenVocab(options.path, tk));
  return Create(std::move(vocab));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  if (vocab.token_types.size() != vocab.token_bytes.size()) {
    return absl::InvalidArgumentError("vocabulary types and tokens differ in count");
  }
  const size_t n = vocab.size();
  if (n == 0 || n > (1u << 24)) {
    return absl::InvalidArgumentError(llm::StrCat("vocabulary size ", n, " is out of range"));
  }
  for (const auto& [name, id] : {std::pair{"bos", vocab.bos_id}, std::pair{"eos", vocab.eos_id},
                                 std::pair{"eot", vocab.eot_id}, std::pair{"unk", vocab.unk_id},
                                 std::pair{"pad", vocab.pad_id}}) {
    if (id.has_value() && *id >= n) {
      return absl::InvalidArgumentError(
          llm::StrCat(vocab.source, ": ", name, " token id ", *id, " is out of range"));
    }
  }
  auto impl = std::make_unique<Impl>();
  static std::atomic<uint64_t> next_owner{1};
  impl->cache_owner = next_owner.fetch_add(1, std::memory_order_relaxed);
  impl->byte_fallback.fill(Trie::kNoValue);
  std::vector<uint32_t> normal;
  normal.reserve(n);
  for (uint32_t id = 0; id < n; ++id) {
    const std::string& bytes = vocab.token_bytes[id];
    switch (vocab.token_types[id]) {
      case TokenType::kNormal:
        normal.push_back(id);
        break;
      case TokenType::kUserDefined:
        impl->has_user_defined = true;
        [[fallthrough]];
      case TokenType::kControl:
      case TokenType::kUnknown:
        impl->special_trie.Insert(bytes, id);
        break;
      case TokenType::kByte:
        if (bytes.size() == 1) impl->byte_fallback[static_cast<uint8_t>(bytes[0])] = id;
        break;
      case TokenType::kHole:
      case TokenType::kUnused:
        break;
    }
  }
  // The unknown token: unk_id if it names a token of type kUnknown, else the
  // first such token. A unk_id of another type (SmolLM2 and GPT-NeoX name
  // their control token <|endoftext|>) is ignored: ordinary text must never
  // turn into a control token.
  if (vocab.unk_id.has_value() && vocab.token_types[*vocab.unk_id] == TokenType::kUnknown) {
    impl->unk_fallback = *vocab.unk_id;
  } else {
    for (uint32_t id = 0; id < n; ++id) {
      if (vocab.token_types[id] == TokenType::kUnknown) {
        impl->unk_fallback = id;
        break;
      }
    }
  }
  impl->special_trie.Freeze();
  // The token index first; the pair table from it. Without an index (a token
  // over kMaxTokenBytes) the trie does both jobs and is built now.
  std::vector<uint32_t> canonical;
  impl->tokens = TokenIndex::Build(vocab.token_bytes, normal, &canonical);
  if (impl->tokens.empty()) {
    std::call_once(impl->trie_once, [&] { Impl::BuildTrie(vocab, &impl->trie); });
    impl->model.trie = &impl->trie;
  } else {
    impl->model.tokens = &impl->tokens;
  }
  if (vocab.merge_rule == MergeRule::kConcatenationRank) {
    impl->pairs = impl->tokens.empty()
                      ? PairTable::Build(impl->trie, vocab.token_bytes)
                      : PairTable::Build(impl->tokens, vocab.token_bytes, canonical);
    impl->model.pairs = &impl->pairs;
  }
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    impl->model.byte_ids[b] =
        impl->tokens.empty() ? impl->trie.Find(byte) : impl->tokens.Find(byte);
  }
  if (vocab.model == VocabModel::kSentencePiece) {
    LLM_RETURN_IF_ERROR(impl->BuildSentencePiece(vocab));
  } else {
    LLM_ASSIGN_OR_RETURN(impl->pre, Pretokenizer::Create(vocab.pre_regexes));
  }
  impl->vocab = std::move(vocab);
  impl->spm.scores = impl->vocab.scores.data();
  if (impl->vocab.merge_rule == MergeRule::kMergeList) impl->model.merges = &impl->vocab.merges;
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

absl::StatusOr<std::vector<uint32_t>> Tokenizer::Encode(std::string_view text,
                                                        const EncodeOptions& options) const {
  std::vector<uint32_t> ids;
  LLM_RETURN_IF_ERROR(EncodeTo(text, options, &ids));
  return ids;
}

absl::Status Tokenizer::EncodeTo(std::string_view text, const EncodeOptions& options,
                                 std::vector<uint32_t>* ids) const {
  const Impl& im = *impl_;
  Impl::Call call{options, text.data(), {}, ThreadBpeScratch(), ids, absl::OkStatus(), nullptr};
  if (options.use_piece_cache) {
    call.cache = &ThreadPieceCache(im.cache_owner);
    // Long pieces are remembered within one call only (see piece_cache.h).
    call.cache->ForgetLong();
  }
  for (const std::string& name : options.allowed_special) {
    const uint32_t id = im.special_trie.Find(name);
    if (id == Trie::kNoValue) {
      return absl::InvalidArgumentError(
          llm::StrCat("'", name, "' is not a special token of this vocabulary"));
    }
    call.allowed.push_back(id);
  }
  std::sort(call.allowed.begin(), call.allowed.end());

  if (options.disallow_special) {
    const auto [pos, len, id] = im.FindSpecial(text, 0, [&](uint32_t id) {
      return im.vocab.token_types[id] != TokenType::kUserDefined && !im.Matchable(call, id);
    });
    if (pos != std::string_view::npos) {
      return absl::InvalidArgumentError(llm::StrCat("text contains the disallowed special token '",
                                                    text.substr(pos, len), "' at byte ", pos,
                                                    "; allow it or encode it as ordinary text"));
    }
  }

  const size_t original_size = ids->size();
  if (options.add_bos) {
    if (!im.vocab.bos_id.has_value()) {
      return absl::FailedPreconditionError("this vocabulary has no BOS token");
    }
    ids->push_back(*im.vocab.bos_id);
  }
  const bool scan_specials =
      im.has_user_defined || options.allow_all_special || !call.allowed.empty();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t at = std::string_view::npos;
    size_t len = 0;
    uint32_t id = Trie::kNoValue;
    if (scan_specials) {
      std::tie(at, len, id) =
          im.FindSpecial(text, pos, [&](uint32_t id) { return im.Matchable(call, id); });
    }
    if (at == std::string_view::npos) {
      im.EncodeOrdinary(call, text.substr(pos));
      break;
    }
    im.EncodeOrdinary(call, text.substr(pos, at - pos));
    ids->push_back(id);
    call.after_special = true;
    pos = at + len;
  }
  if (!call.status.ok()) {
    ids->resize(original_size);
    return call.status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> Tokenizer::TokenBytes(uint32_t id) const {
  const Vocab& v = impl_->vocab;
  if (id >= v.size()) {
    return absl::InvalidArgumentError(
        llm::StrCat("token id ", id, " is out of range [0, ", v.size(), ")"));
  }
  if (v.token_types[id] == TokenType::kHole) {
    return absl::InvalidArgumentError(llm::StrCat("token id ", id, " names no token"));
  }
  return std::string_view(v.token_bytes[id]);
}

absl::Status Tokenizer::DecodeTo(std::span<const uint32_t> ids, std::string* out) const {
  const size_t original_size = out->size();
  for (uint32_t id : ids) {
    auto bytes = TokenBytes(id);
    if (!bytes.ok()) {
      out->resize(original_size);
      return bytes.status();
    }
    out->append(*bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::DecodeText(std::span<const uint32_t> ids) const {
  std::string out;
  LLM_RETURN_IF_ERROR(DecodeTo(ids, &out));
  // The space Encode put before the text: llama_detokenize drops one leading
  // space of the first token, whatever its type.
  const Vocab& v = impl_->vocab;
  if (v.model == VocabModel::kSentencePiece && v.add_space_prefix && !ids.empty() &&
      TokenBytes(ids[0])->starts_with(' ')) {
    out.erase(0, 1);
  }
  return out;
}

absl::StatusOr<std::string> Tokenizer::Decode(std::span<const uint32_t> ids) const {
  std::string out;
  LLM_RETURN_IF_ERROR(DecodeTo(ids, &out));
  return out;
}

bool Tokenizer::HasByteToken(uint8_t b) const {
  if (impl_->vocab.model == VocabModel::kSentencePiece) return impl_->spm_byte[b] != Trie::kNoValue;
  return impl_->model.byte_ids[b] != Trie::kNoValue;
}

const Vocab& Tokenizer::vocab() const { return impl_->vocab; }
size_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }

std::vector<std::pair<std::string, uint32_t>> Tokenizer::SpecialTokens() const {
  std::vector<std::pair<std::string, uint32_t>> out;
  const Vocab& v = impl_->vocab;
  for (uint32_t id = 0; id < v.size(); ++id) {
    const TokenType t = v.token_types[id];
    if (t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined) {
      out.emplace_back(v.token_bytes[id], id);
    }
  }
  return out;
}

}  // namespace llm::tok
