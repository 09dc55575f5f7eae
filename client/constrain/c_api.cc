#include "client/constrain/c_api.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/constraint.h"
#include "client/constrain/matcher.h"
#include "common/strings.h"
#include "common/token_mask.h"

#define LLM_CONSTRAIN_EXPORT extern "C" __attribute__((visibility("default")))

static_assert(std::endian::native == std::endian::little,
              "a TokenMask's words are the wire's bitset bytes on a little-endian host only");

struct LlmConstrainCompiler {
  std::unique_ptr<llm::constrain::Compiler> compiler;
};

struct LlmConstrainConstraint {
  std::shared_ptr<const llm::constrain::Constraint> constraint;
};

struct LlmConstrainMatcher {
  explicit LlmConstrainMatcher(std::shared_ptr<const llm::constrain::Constraint> c)
      : matcher(std::move(c)), mask(llm::TokenMask::AllowNone(matcher.vocab_size())) {}

  llm::constrain::Matcher matcher;
  llm::TokenMask mask;        // llm_constrain_matcher_wire_mask's bitset
  std::vector<uint32_t> ids;  // and its lists
};

namespace {

namespace constrain = llm::constrain;

// Returns the status's code, with its message in *error (when error is not
// null; a message that cannot be allocated is left out).
int Fail(const absl::Status& status, char** error) {
  if (error != nullptr) {
    const absl::string_view message = status.message();
    *error = static_cast<char*>(std::malloc(message.size() + 1));
    if (*error != nullptr) {
      std::memcpy(*error, message.data(), message.size());
      (*error)[message.size()] = '\0';
    }
  }
  return static_cast<int>(status.code());
}

int Ok(char** error) {
  if (error != nullptr) *error = nullptr;
  return 0;
}

// Runs f (returning an absl::Status) with every exception turned into a
// status: no exception crosses the C interface.
template <typename F>
int Guard(char** error, F f) {
  try {
    const absl::Status s = f();
    return s.ok() ? Ok(error) : Fail(s, error);
  } catch (const std::bad_alloc&) {
    return Fail(absl::ResourceExhaustedError("out of memory"), error);
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(e.what()), error);
  } catch (...) {
    return Fail(absl::InternalError("an unknown exception"), error);
  }
}

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

// Byte strings i < n of `bytes`, from n + 1 offsets.
absl::StatusOr<std::vector<std::string>> Strings(const char* bytes, const int64_t* offsets,
                                                 int32_t n, std::string_view what) {
  std::vector<std::string> out;
  if (n < 0) return Invalid(llm::StrCat("a negative number of ", what, ": ", n));
  if (n == 0) return out;
  if (offsets == nullptr) return Invalid(llm::StrCat("no offsets of the ", what));
  if (offsets[0] < 0) return Invalid(llm::StrCat("the ", what, "' first offset is negative"));
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      return Invalid(llm::StrCat("the ", what, "' offsets decrease at ", i + 1));
    }
    if (offsets[i + 1] > offsets[i] && bytes == nullptr) {
      return Invalid(llm::StrCat("no bytes of the ", what));
    }
    out.emplace_back(bytes + offsets[i], static_cast<size_t>(offsets[i + 1] - offsets[i]));
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> Ids(const int32_t* ids, int32_t n, std::string_view what) {
  if (n < 0) return Invalid(llm::StrCat("a negative number of ", what, ": ", n));
  if (n > 0 && ids == nullptr) return Invalid(llm::StrCat("no ", what));
  return n > 0 ? std::vector<int32_t>(ids, ids + n) : std::vector<int32_t>();
}

}  // namespace

LLM_CONSTRAIN_EXPORT int32_t llm_constrain_abi_version(void) { return LLM_CONSTRAIN_ABI_VERSION; }

LLM_CONSTRAIN_EXPORT void llm_constrain_free_error(char* error) { std::free(error); }

LLM_CONSTRAIN_EXPORT int llm_constrain_compiler_create(const char* bytes, const int64_t* offsets,
                                                       int32_t num_tokens, const int32_t* end_ids,
                                                       int32_t num_end_ids,
                                                       const int32_t* special_ids,
                                                       int32_t num_special_ids, int32_t vocab_size,
                                                       LlmConstrainCompiler** out, char** error) {
  return Guard(error, [&]() -> absl::Status {
    if (out == nullptr) return Invalid("no place for the compiler (out is null)");
    *out = nullptr;
    constrain::Vocabulary v;
    absl::StatusOr<std::vector<std::string>> tokens = Strings(bytes, offsets, num_tokens, "tokens");
    if (!tokens.ok()) return tokens.status();
    v.token_bytes = *std::move(tokens);
    absl::StatusOr<std::vector<int32_t>> ends = Ids(end_ids, num_end_ids, "end ids");
    if (!ends.ok()) return ends.status();
    v.end_ids = *std::move(ends);
    absl::StatusOr<std::vector<int32_t>> specials =
        Ids(special_ids, num_special_ids, "special ids");
    if (!specials.ok()) return specials.status();
    v.special_ids = *std::move(specials);
    v.size = vocab_size;
    absl::StatusOr<std::unique_ptr<constrain::Compiler>> compiler = constrain::Compiler::Create(v);
    if (!compiler.ok()) return compiler.status();
    *out = new LlmConstrainCompiler{*std::move(compiler)};
    return absl::OkStatus();
  });
}

LLM_CONSTRAIN_EXPORT void llm_constrain_compiler_free(LlmConstrainCompiler* compiler) {
  delete compiler;
}

LLM_CONSTRAIN_EXPORT int llm_constrain_compile(LlmConstrainCompiler* compiler, int32_t kind,
                                               const char* text, size_t text_len,
                                               const char* choice_bytes,
                                               const int64_t* choice_offsets, int32_t num_choices,
                                               uint32_t flags, int32_t max_whitespace,
                                               LlmConstrainConstraint** out, char** error) {
  return Guard(error, [&]() -> absl::Status {
    if (out == nullptr) return Invalid("no place for the constraint (out is null)");
    *out = nullptr;
    if (compiler == nullptr) return Invalid("no compiler");
    if (kind < LLM_CONSTRAIN_JSON_SCHEMA || kind > LLM_CONSTRAIN_CHOICE) {
      return Invalid(llm::StrCat("unknown constraint kind ", kind));
    }
    constexpr uint32_t kFlags = LLM_CONSTRAIN_STRICT | LLM_CONSTRAIN_COMPACT_JSON |
                                LLM_CONSTRAIN_ANY_ORDER | LLM_CONSTRAIN_LENIENT;
    if ((flags & ~kFlags) != 0) return Invalid(llm::StrCat("unknown flags ", flags & ~kFlags));
    if (text_len > 0 && text == nullptr) return Invalid("no text");
    constrain::Spec spec;
    spec.kind = static_cast<constrain::Kind>(kind);
    if (text_len > 0) spec.text.assign(text, text_len);
    absl::StatusOr<std::vector<std::string>> choices =
        Strings(choice_bytes, choice_offsets, num_choices, "choices");
    if (!choices.ok()) return choices.status();
    spec.choices = *std::move(choices);
    spec.strict = (flags & LLM_CONSTRAIN_STRICT) != 0;
    spec.any_whitespace = (flags & LLM_CONSTRAIN_COMPACT_JSON) == 0;
    spec.any_order = (flags & LLM_CONSTRAIN_ANY_ORDER) != 0;
    spec.lenient = (flags & LLM_CONSTRAIN_LENIENT) != 0;
    spec.max_whitespace = max_whitespace;
    absl::StatusOr<std::shared_ptr<const constrain::Constraint>> compiled =
        compiler->compiler->Compile(spec);
    if (!compiled.ok()) return compiled.status();
    *out = new LlmConstrainConstraint{*std::move(compiled)};
    return absl::OkStatus();
  });
}

LLM_CONSTRAIN_EXPORT void llm_constrain_constraint_free(LlmConstrainConstraint* constraint) {
  delete constraint;
}

LLM_CONSTRAIN_EXPORT int32_t
llm_constrain_constraint_vocab_size(const LlmConstrainConstraint* constraint) {
  return constraint == nullptr ? 0 : constraint->constraint->vocab_size();
}

LLM_CONSTRAIN_EXPORT double llm_constrain_constraint_compile_ms(
    const LlmConstrainConstraint* constraint) {
  return constraint == nullptr ? 0 : constraint->constraint->compile_ms();
}

LLM_CONSTRAIN_EXPORT int llm_constrain_matcher_create(const LlmConstrainConstraint* constraint,
                                                      LlmConstrainMatcher** out, char** error) {
  return Guard(error, [&]() -> absl::Status {
    if (out == nullptr) return Invalid("no place for the matcher (out is null)");
    *out = nullptr;
    if (constraint == nullptr) return Invalid("no constraint");
    *out = new LlmConstrainMatcher(constraint->constraint);
    return absl::OkStatus();
  });
}

LLM_CONSTRAIN_EXPORT void llm_constrain_matcher_free(LlmConstrainMatcher* matcher) {
  delete matcher;
}

LLM_CONSTRAIN_EXPORT int llm_constrain_matcher_fill_mask(LlmConstrainMatcher* matcher,
                                                         uint32_t* words, int32_t num_words,
                                                         char** error) {
  return Guard(error, [&]() -> absl::Status {
    if (matcher == nullptr) return Invalid("no matcher");
    if (num_words < 0 || (num_words > 0 && words == nullptr)) return Invalid("no mask words");
    return matcher->matcher.FillMask(std::span<uint32_t>(words, static_cast<size_t>(num_words)));
  });
}

LLM_CONSTRAIN_EXPORT int llm_constrain_matcher_wire_mask(LlmConstrainMatcher* matcher,
                                                         int32_t* encoding, const void** data,
                                                         int64_t* size, char** error) {
  return Guard(error, [&]() -> absl::Status {
    if (matcher == nullptr) return Invalid("no matcher");
    if (encoding == nullptr || data == nullptr || size == nullptr) {
      return Invalid("no place for the mask (encoding, data or size is null)");
    }
    llm::TokenMask& mask = matcher->mask;
    const std::span<uint64_t> words = mask.mutable_words();
    // The matcher writes 32-bit words: the same bits on a little-endian host.
    if (absl::Status s = matcher->matcher.FillMask(std::span<uint32_t>(
            reinterpret_cast<uint32_t*>(words.data()), matcher->matcher.mask_words()));
        !s.ok()) {
      return s;
    }
    switch (llm::CheapestTokenMaskEncoding(mask)) {
      case llm::TokenMaskEncoding::kBitset:
        *encoding = LLM_CONSTRAIN_MASK_BITSET;
        *data = words.data();
        *size = (mask.vocab_size() + 7) / 8;
        return absl::OkStatus();
      case llm::TokenMaskEncoding::kAllowed:
        *encoding = LLM_CONSTRAIN_MASK_ALLOWED;
        break;
      case llm::TokenMaskEncoding::kDisallowed:
        *encoding = LLM_CONSTRAIN_MASK_DISALLOWED;
        break;
    }
    matcher->ids.clear();
    mask.ForEachId(*encoding == LLM_CONSTRAIN_MASK_ALLOWED,
                   [&](uint32_t id) { matcher->ids.push_back(id); });
    *data = matcher->ids.data();
    *size = static_cast<int64_t>(matcher->ids.size());
    return absl::OkStatus();
  });
}

LLM_CONSTRAIN_EXPORT int llm_constrain_matcher_accept(LlmConstrainMatcher* matcher, int32_t id) {
  return matcher != nullptr && matcher->matcher.Accept(id) ? 1 : 0;  // Accept catches xgrammar's
}

LLM_CONSTRAIN_EXPORT int llm_constrain_matcher_rollback(LlmConstrainMatcher* matcher, int32_t n,
                                                        char** error) {
  return Guard(error, [&]() -> absl::Status {
    if (matcher == nullptr) return Invalid("no matcher");
    return matcher->matcher.Rollback(n);
  });
}

LLM_CONSTRAIN_EXPORT int32_t llm_constrain_matcher_forced_tokens(LlmConstrainMatcher* matcher,
                                                                 int32_t* ids, int32_t capacity) {
  if (matcher == nullptr) return 0;
  try {
    const std::vector<int32_t> forced = matcher->matcher.ForcedTokens();
    const size_t n =
        capacity > 0 && ids != nullptr ? std::min(forced.size(), static_cast<size_t>(capacity)) : 0;
    std::copy_n(forced.begin(), n, ids);
    return static_cast<int32_t>(forced.size());
  } catch (...) {  // out of memory: nothing is forced
    return 0;
  }
}

LLM_CONSTRAIN_EXPORT int llm_constrain_matcher_can_end(const LlmConstrainMatcher* matcher) {
  return matcher != nullptr && matcher->matcher.CanEnd() ? 1 : 0;
}

LLM_CONSTRAIN_EXPORT int llm_constrain_matcher_is_terminated(const LlmConstrainMatcher* matcher) {
  return matcher != nullptr && matcher->matcher.IsTerminated() ? 1 : 0;
}

LLM_CONSTRAIN_EXPORT int32_t llm_constrain_matcher_accepted(const LlmConstrainMatcher* matcher) {
  return matcher == nullptr ? 0 : matcher->matcher.accepted();
}

LLM_CONSTRAIN_EXPORT void llm_constrain_matcher_reset(LlmConstrainMatcher* matcher) {
  if (matcher != nullptr) matcher->matcher.Reset();
}
