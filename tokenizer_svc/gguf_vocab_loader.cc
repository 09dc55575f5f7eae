#include "tokenizer_svc/gguf_vocab_loader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "tokenizer_svc/byte_level.h"
#include "tokenizer_svc/pretokenizer.h"

namespace llm::tok {
namespace {

constexpr size_t kMaxTokens = 1u << 24;

absl::Status KeyError(const gguf::File& f, std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(llm::StrCat(f.name(), ": ", key, ": ", what));
}

// "<0x0A>" -> 0x0A.
std::optional<uint8_t> ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  uint8_t value = 0;
  const char* end = text.data() + 5;
  const auto [ptr, ec] = std::from_chars(text.data() + 3, end, value, 16);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

absl::Status ReadOptionalId(const gguf::File& f, std::string_view key,
                            std::optional<uint32_t>* out) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr) return absl::OkStatus();
  LLM_ASSIGN_OR_RETURN(uint64_t id, v->AsUint());
  if (id >= kMaxTokens) return KeyError(f, key, llm::StrCat("id ", id, " is out of range"));
  *out = static_cast<uint32_t>(id);
  return absl::OkStatus();
}

// Texts of end-of-generation tokens that llama.cpp makes control tokens
// whatever the file says (llama_vocab::impl::load's EOG list): Phi-3 marks
// </s> user-defined, which would otherwise match in any text.
bool IsEndOfGenerationText(std::string_view text) {
  static constexpr std::string_view kTexts[] = {
      "<|eot_id|>",
      "<|im_end|>",
      "<|end|>",
      "<|return|>",
      "<|call|>",
      "<|flush|>",
      "<|calls|>",
      "<end_of_turn>",
      "<|endoftext|>",
      "</s>",
      "<|eom_id|>",
      "<EOT>",
      "_<EOT>",
      "[EOT]",
      "[EOS]",
      "<|end_of_text|>",
      "<end_of_utterance>",
      "<eos>",
      "<turn|>",
      "<|tool_response>",
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81"
      "of\xE2\x96\x81"
      "sentence\xEF\xBD\x9C>",
      "[e~[",
  };
  return std::find(std::begin(kTexts), std::end(kTexts), text) != std::end(kTexts);
}

// SentencePiece normal tokens spell a space U+2581.
std::string UnescapeSpaces(std::string_view text) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpace.size()) == kSpace) {
      out.push_back(' ');
      i += kSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// tokenizer.ggml.merges: "LEFT RIGHT", the index is the rank.
absl::Status ReadMerges(const gguf::File& f,
                        const absl::flat_hash_map<std::string_view, uint32_t>& id_of_text,
                        Vocab* vocab) {
  Vocab& v = *vocab;
  const gguf::Value* merges_value = f.Find("tokenizer.ggml.merges");
  if (merges_value == nullptr) return KeyError(f, "tokenizer.ggml.merges", "missing");
  LLM_ASSIGN_OR_RETURN(std::vector<std::string_view> merges, merges_value->AsStringArray());
  v.merges.reserve(merges.size());
  for (uint32_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      return KeyError(f, "tokenizer.ggml.merges", llm::StrCat("entry ", rank, " has no space"));
    }
    const std::string_view left = m.substr(0, space);
    const std::string_view right = m.substr(space + 1);
    // A merge must join two tokens into a token (Hugging Face refuses the
    // file otherwise); a merge that names something else is a broken file,
    // not a rule that never applies.
    auto l = id_of_text.find(left);
    auto r = id_of_text.find(right);
    if (l == id_of_text.end() || r == id_of_text.end()) {
      return KeyError(f, "tokenizer.ggml.merges",
                      llm::StrCat("entry ", rank, " '", m, "' names '",
                                  l == id_of_text.end() ? left : right, "', which is not a token"));
    }
    const std::string joined = llm::StrCat(left, right);
    auto j = id_of_text.find(joined);
    if (j == id_of_text.end()) {
      return KeyError(
          f, "tokenizer.ggml.merges",
          llm::StrCat("entry ", rank, " '", m, "' makes '", joined, "', which is not a token"));
    }
    v.merges.emplace(PairKey(l->second, r->second), Merge{rank, j->second});
  }
  v.merge_rule = MergeRule::kMergeList;
  return absl::OkStatus();
}

// tokenizer.ggml.pre, or the override.
absl::Status ReadPretokenizer(const gguf::File& f, const std::optional<std::string>& pretokenizer,
                              Vocab* vocab) {
  Vocab& v = *vocab;
  std::string pre = "default";
  if (pretokenizer.has_value()) {
    pre = *pretokenizer;
  } else if (const gguf::Value* p = f.Find("tokenizer.ggml.pre")) {
    LLM_ASSIGN_OR_RETURN(std::string_view name, p->AsString());
    pre = std::string(name);
  }
  const PretokenizerPreset* preset = FindGgufPreset(pre);
  if (preset == nullptr) {
    return KeyError(f, "tokenizer.ggml.pre",
                    llm::StrCat("unknown pre-tokenizer '", pre,
                                "'; known: ", llm::StrJoin(GgufPresetNames(), ", ")));
  }
  v.pretokenizer = std::string(preset->name);
  for (std::string_view re : preset->regexes) v.pre_regexes.emplace_back(re);
  v.whole_piece_shortcut = preset->ignore_merges;
  return absl::OkStatus();
}

// SentencePiece: the raw texts the merge loop matches, the scores (0 when the
// file has none, as in llama.cpp), add_space_prefix (default true) and
// add_bos (default true, llama.cpp's default for this model).
absl::Status ReadSentencePiece(const gguf::File& f, const std::vector<std::string_view>& tokens,
                               Vocab* vocab) {
  Vocab& v = *vocab;
  const size_t n = tokens.size();
  v.piece_texts.assign(tokens.begin(), tokens.end());
  v.scores.assign(n, 0.0f);
  if (const gguf::Value* scores = f.Find("tokenizer.ggml.scores")) {
    LLM_ASSIGN_OR_RETURN(std::vector<float> s, scores->AsFloatArray());
    if (s.size() != n) {
      return KeyError(f, "tokenizer.ggml.scores",
                      llm::StrCat(s.size(), " entries for ", n, " tokens"));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s[i])) {
        return KeyError(f, "tokenizer.ggml.scores",
                        llm::StrCat("entry ", i, " is not a finite number"));
      }
    }
    v.scores = std::move(s);
  }
  v.merge_rule = MergeRule::kMergeList;  // no merges: the scores decide
  v.whole_piece_shortcut = false;
  v.pretokenizer = "sentencepiece";
  v.add_bos = true;
  v.add_space_prefix = true;
  if (const gguf::Value* p = f.Find("tokenizer.ggml.add_space_prefix")) {
    LLM_ASSIGN_OR_RETURN(v.add_space_prefix, p->AsBool());
  }
  return absl::OkStatus();
}

absl::StatusOr<Vocab> ReadVocab(const gguf::File& f,
                                const std::optional<std::string>& pretokenizer) {
  LLM_ASSIGN_OR_RETURN(std::string_view model, f.GetString("tokenizer.ggml.model"));
  if (model != "gpt2" && model != "llama") {
    return KeyError(f, "tokenizer.ggml.model",
                    llm::StrCat("tokenizer model '", model,
                                "' is not supported (only byte-level BPE, 'gpt2', and "
                                "SentencePiece-style, 'llama')"));
  }
  const bool spm = model == "llama";
  const gguf::Value* tokens_value = f.Find("tokenizer.ggml.tokens");
  if (tokens_value == nullptr) return KeyError(f, "tokenizer.ggml.tokens", "missing");
  LLM_ASSIGN_OR_RETURN(std::vector<std::string_view> tokens, tokens_value->AsStringArray());
  const size_t n = tokens.size();
  if (n == 0 || n > kMaxTokens) {
    return KeyError(f, "tokenizer.ggml.tokens", llm::StrCat(n, " tokens is out of range"));
  }

  // The model's embedding and output matrices have one row per token id: a
  // vocabulary of another size leaves rows without a token (ids the model may
  // produce that nothing decodes) or tokens without a row. llama.cpp refuses
  // such a file too (the tensor's shape does not match). Only in files that
  // hold the model; vocabulary-only files have no tensors.
  for (const std::string_view tensor : {"token_embd.weight", "output.weight"}) {
    const gguf::TensorInfo* t = f.FindTensor(tensor);
    if (t == nullptr || t->n_dims != 2 || t->ne[1] == static_cast<int64_t>(n)) continue;
    return KeyError(f, "tokenizer.ggml.tokens",
                    llm::StrCat(n, " tokens, but the model's ", tensor, " has ", t->ne[1],
                                " rows (one per token id)"));
  }

  Vocab v;
  v.source = f.name();
  v.format = "gguf";
  v.model = spm ? VocabModel::kSentencePiece : VocabModel::kBpe;
  v.token_types.assign(n, TokenType::kNormal);
  if (const gguf::Value* types = f.Find("tokenizer.ggml.token_type")) {
    LLM_ASSIGN_OR_RETURN(std::vector<int64_t> t, types->AsIntArray());
    if (t.size() != n) {
      return KeyError(f, "tokenizer.ggml.token_type",
                      llm::StrCat(t.size(), " entries for ", n, " tokens"));
    }
    for (size_t i = 0; i < n; ++i) {
      if (t[i] < 1 || t[i] > 6) {
        return KeyError(f, "tokenizer.ggml.token_type",
                        llm::StrCat("entry ", i, " has unknown type ", t[i]));
      }
      v.token_types[i] = static_cast<TokenType>(t[i]);
      if (v.token_types[i] == TokenType::kUserDefined && IsEndOfGenerationText(tokens[i])) {
        v.token_types[i] = TokenType::kControl;
      }
    }
  }

  v.token_bytes.resize(n);
  absl::flat_hash_map<std::string_view, uint32_t> id_of_text;
  id_of_text.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    // A token text names one id: llama.cpp maps a duplicate to its higher id
    // and then refuses the file (GGML_ASSERT on the sizes of its maps), our
    // tries would keep the lower one, so there is no agreed meaning. Empty
    // texts name nothing (llama.cpp renames them [EMPTY_<id>]; here they are
    // tokens nothing encodes to) and may repeat; no merge can name them.
    if (!tokens[i].empty()) {
      if (auto [it, fresh] = id_of_text.emplace(tokens[i], i); !fresh) {
        return KeyError(f, "tokenizer.ggml.tokens",
                        llm::StrCat("entries ", it->second, " and ", i, " are the same token '",
                                    tokens[i], "'"));
      }
    }
    switch (v.token_types[i]) {
      case TokenType::kNormal:
        v.token_bytes[i] = spm ? UnescapeSpaces(tokens[i]) : ByteLevelDecode(tokens[i]);
        break;
      case TokenType::kByte: {
        const auto byte = ParseByteToken(tokens[i]);
        if (!byte.has_value()) {
          return KeyError(f, "tokenizer.ggml.tokens",
                          llm::StrCat("byte token ", i, " is not of the form <0xNN>"));
        }
        v.token_bytes[i] = std::string(1, static_cast<char>(*byte));
        break;
      }
      default:
        v.token_bytes[i] = std::string(tokens[i]);
        break;
    }
  }

  if (spm) {
    LLM_RETURN_IF_ERROR(ReadSentencePiece(f, tokens, &v));
  } else {
    LLM_RETURN_IF_ERROR(ReadMerges(f, id_of_text, &v));
    LLM_RETURN_IF_ERROR(ReadPretokenizer(f, pretokenizer, &v));
  }

  LLM_RETURN_IF_ERROR(ReadOptionalId(f, "tokenizer.ggml.bos_token_id", &v.bos_id));
  LLM_RETURN_IF_ERROR(ReadOptionalId(f, "tokenizer.ggml.eos_token_id", &v.eos_id));
  LLM_RETURN_IF_ERROR(ReadOptionalId(f, "tokenizer.ggml.eot_token_id", &v.eot_id));
  LLM_RETURN_IF_ERROR(ReadOptionalId(f, "tokenizer.ggml.unknown_token_id", &v.unk_id));
  LLM_RETURN_IF_ERROR(ReadOptionalId(f, "tokenizer.ggml.padding_token_id", &v.pad_id));
  if (const gguf::Value* b = f.Find("tokenizer.ggml.add_bos_token")) {
    LLM_ASSIGN_OR_RETURN(v.add_bos, b->AsBool());
  }
  if (const gguf::Value* t = f.Find("tokenizer.chat_template")) {
    LLM_ASSIGN_OR_RETURN(std::string_view tmpl, t->AsString());
    v.chat_template = std::string(tmpl);
  }
  return v;
}

}  // namespace

absl::StatusOr<Vocab> VocabFromGguf(const gguf::File& f,
                                    const std::optional<std::string>& pretokenizer) {
  absl::StatusOr<Vocab> v = ReadVocab(f, pretokenizer);
  // Errors from gguf::Value accessors name the key but not the file.
  if (!v.ok() && !absl::StartsWith(v.status().message(), f.name())) {
    return absl::Status(v.status().code(), llm::StrCat(f.name(), ": ", v.status().message()));
  }
  return v;
}

absl::StatusOr<Vocab> LoadGgufVocab(const std::string& path,
                                    const std::optional<std::string>& pretokenizer) {
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(path));
  return VocabFromGguf(*file, pretokenizer);
}

}  // namespace llm::tok
