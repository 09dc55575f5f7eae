#include "client/constrain/constraint.h"

#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/constrain/bounds.h"
#include "client/constrain/choice_grammar.h"
#include "client/constrain/lru_cache.h"
#include "client/constrain/matcher.h"
#include "client/constrain/schema_support.h"
#include "client/constrain/xgrammar_impl.h"
#include "client/constrain/xgrammar_log.h"
#include "common/strings.h"

namespace llm::constrain {

using Compiled = absl::StatusOr<std::shared_ptr<const Constraint>>;

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kJsonSchema:
      return "json_schema";
    case Kind::kJsonObject:
      return "json_object";
    case Kind::kRegex:
      return "regex";
    case Kind::kGrammar:
      return "grammar";
    case Kind::kChoice:
      return "choice";
    case Kind::kStructuralTag:
      return "structural_tag";
  }
  return "unknown";
}

Constraint::Constraint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Constraint::~Constraint() = default;
Kind Constraint::kind() const { return impl_->kind; }
int32_t Constraint::vocab_size() const { return impl_->compiled.GetTokenizerInfo().GetVocabSize(); }
size_t Constraint::memory_bytes() const { return impl_->compiled.MemorySizeBytes(); }
double Constraint::compile_ms() const { return impl_->compile_ms; }
bool Constraint::lazy() const { return impl_->lazy; }

struct Compiler::Impl {
  Impl(xgrammar::TokenizerInfo info, const CompilerOptions& options, int threads)
      : options(options),
        vocab_size(info.GetVocabSize()),
        tokenizer_info(info),
        compiler(info, threads, /*cache_enabled=*/false),
        lazy_compiler(info, threads, /*cache_enabled=*/false, /*max_memory_bytes=*/-1,
                      /*enable_dynamic_compilation=*/true),
        cache(options.cache_entries, options.cache_bytes, [](const Compiled& c) -> size_t {
          return c.ok() ? (*c)->memory_bytes() : c.status().message().size();
        }) {}

  absl::Status CheckBounds(const Spec& spec) const;
  Compiled CompileUncached(const Spec& spec);

  const CompilerOptions options;
  const int32_t vocab_size;
  const xgrammar::TokenizerInfo tokenizer_info;  // structural tags name tokens in it
  xgrammar::GrammarCompiler compiler;            // precomputes every state's tokens
  xgrammar::GrammarCompiler lazy_compiler;       // computes a state's tokens on its first mask
  LruCache<Compiled> cache;
};

namespace {

// "JSON schema: ", "regex: ", ...: what an error message starts with.
std::string ErrorPrefix(Kind kind) {
  if (kind == Kind::kJsonSchema || kind == Kind::kJsonObject) return "JSON schema: ";
  return llm::StrCat(KindName(kind), ": ");
}

// Everything that makes two specs compile differently, with lengths so that
// no two specs share a key.
std::string CacheKey(const Spec& spec) {
  std::string key = llm::StrCat(KindName(spec.kind), "|", spec.strict, spec.any_order, spec.lenient,
                                spec.any_whitespace, "|", spec.max_whitespace, "|");
  if (spec.kind == Kind::kChoice) {
    for (const std::string& c : spec.choices) llm::StrAppend(&key, c.size(), ":", c);
  } else {
    llm::StrAppend(&key, spec.text);
  }
  return key;
}

absl::Status CheckIds(const std::vector<int32_t>& ids, int32_t size, std::string_view what) {
  for (int32_t id : ids) {
    if (id < 0 || id >= size) {
      return absl::InvalidArgumentError(
          llm::StrCat("vocabulary: ", what, " id ", id, " is outside [0, ", size, ")"));
    }
  }
  return absl::OkStatus();
}

// The size of a grammar for the estimate of its compile time: its EBNF text,
// plus 16 bytes per repetition its quantifiers allow ("{1, 65535}" builds a
// state per repetition, which the text does not show).
double GrammarSize(const std::string& ebnf) {
  double size = static_cast<double>(ebnf.size());
  for (size_t i = ebnf.find('{'); i != std::string::npos; i = ebnf.find('{', i + 1)) {
    long long low = 0;
    long long high = 0;
    if (std::sscanf(ebnf.c_str() + i, "{%lld, %lld}", &low, &high) == 2) {
      size += 16.0 * static_cast<double>(std::max(low, high));
    }
  }
  return size;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Compiler>> Compiler::Create(const Vocabulary& vocabulary,
                                                           const CompilerOptions& options) {
  const int64_t tokens = static_cast<int64_t>(vocabulary.token_bytes.size());
  if (tokens == 0) return absl::InvalidArgumentError("vocabulary: no tokens");
  if (tokens > INT32_MAX) return absl::InvalidArgumentError("vocabulary: too many tokens");
  const int32_t size = vocabulary.size == 0 ? static_cast<int32_t>(tokens) : vocabulary.size;
  if (size < tokens) {
    return absl::InvalidArgumentError(
        llm::StrCat("vocabulary: size ", size, " is below its ", tokens, " tokens"));
  }
  if (absl::Status s = CheckIds(vocabulary.end_ids, size, "end"); !s.ok()) return s;
  if (absl::Status s = CheckIds(vocabulary.special_ids, size, "special"); !s.ok()) return s;
  if (options.max_nesting < 1 || options.cache_entries < 1 || options.threads < 0) {
    return absl::InvalidArgumentError("compiler options: a bound below 1");
  }
  // xgrammar reads a token without bytes as a special token: never allowed.
  std::vector<std::string> bytes = vocabulary.token_bytes;
  for (int32_t id : vocabulary.special_ids) {
    if (id < tokens) bytes[id].clear();
  }
  const int threads =
      options.threads > 0
          ? options.threads
          : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  try {
    xgrammar::TokenizerInfo info(bytes, xgrammar::VocabType::RAW, size, vocabulary.end_ids,
                                 /*add_prefix_space=*/false);
    return std::unique_ptr<Compiler>(
        new Compiler(std::make_unique<Impl>(std::move(info), options, threads)));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("vocabulary: out of memory");
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(llm::StrCat("vocabulary: ", XgrammarErrorMessage(e)));
  }
}

Compiler::Compiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Compiler::~Compiler() = default;

int32_t Compiler::vocab_size() const { return impl_->vocab_size; }

Compiler::CacheStats Compiler::cache_stats() const {
  const auto s = impl_->cache.stats();
  return {s.hits, s.misses, s.evictions, s.entries, s.bytes};
}

absl::StatusOr<std::shared_ptr<const Constraint>> Compiler::Compile(const Spec& spec) {
  if (absl::Status s = impl_->CheckBounds(spec); !s.ok()) return s;
  return impl_->cache.GetOrCompute(CacheKey(spec), [&] { return impl_->CompileUncached(spec); });
}

absl::Status Compiler::Impl::CheckBounds(const Spec& spec) const {
  const std::string prefix = ErrorPrefix(spec.kind);
  size_t bytes = spec.text.size();
  if (spec.kind == Kind::kChoice) {
    if (spec.choices.empty()) return absl::InvalidArgumentError("choice: no choices");
    if (spec.choices.size() > options.max_choices) {
      return absl::InvalidArgumentError(llm::StrCat(
          "choice: ", spec.choices.size(), " choices; the limit is ", options.max_choices));
    }
    bytes = 0;
    for (const std::string& c : spec.choices) bytes += c.size();
  }
  if (bytes > options.max_text_bytes) {
    return absl::InvalidArgumentError(
        llm::StrCat(prefix, bytes, " bytes; the limit is ", options.max_text_bytes, " bytes"));
  }
  if (spec.kind == Kind::kJsonSchema || spec.kind == Kind::kJsonObject) {
    if (spec.max_whitespace < 20 || spec.max_whitespace > options.max_whitespace_limit) {
      return absl::InvalidArgumentError(llm::StrCat(prefix, "max_whitespace ", spec.max_whitespace,
                                                    " is outside [20, ",
                                                    options.max_whitespace_limit, "]"));
    }
  }
  absl::Status nesting;
  switch (spec.kind) {
    case Kind::kJsonSchema:
    case Kind::kStructuralTag:
      nesting = CheckJsonNesting(spec.text, options.max_nesting);
      break;
    case Kind::kRegex:
      nesting = CheckRegexNesting(spec.text, options.max_nesting);
      break;
    case Kind::kGrammar:
      nesting = CheckGrammarNesting(spec.text, options.max_nesting);
      break;
    case Kind::kJsonObject:
    case Kind::kChoice:
      break;
  }
  if (!nesting.ok()) return absl::InvalidArgumentError(llm::StrCat(prefix, nesting.message()));
  return absl::OkStatus();
}

namespace {

// xgrammar's grammar of a spec whose text is ready (a prepared schema, a
// choice's grammar). Throws what xgrammar throws.
xgrammar::Grammar ToGrammar(const Spec& spec, const std::string& text) {
  switch (spec.kind) {
    case Kind::kJsonSchema:
    case Kind::kJsonObject:
      return xgrammar::Grammar::FromJSONSchema(
          text, spec.any_whitespace, /*indent=*/std::nullopt, /*separators=*/std::nullopt,
          /*strict_mode=*/spec.kind == Kind::kJsonSchema && spec.strict,
          spec.any_whitespace ? std::optional<int>(spec.max_whitespace) : std::nullopt,
          /*print_converted_ebnf=*/false, spec.any_order);
    case Kind::kRegex:
      return xgrammar::Grammar::FromRegex(text);
    case Kind::kGrammar:
    case Kind::kChoice:
    case Kind::kStructuralTag:  // CompileUncached
      break;
  }
  return xgrammar::Grammar::FromEBNF(text, "root");
}

}  // namespace

Compiled Compiler::Impl::CompileUncached(const Spec& spec) {
  const absl::Time start = absl::Now();
  const std::string prefix = ErrorPrefix(spec.kind);
  std::string text = spec.text;
  if (spec.kind == Kind::kJsonSchema) {
    absl::StatusOr<std::string> prepared =
        PrepareSchema(spec.text, spec.lenient, options.max_text_bytes);
    if (!prepared.ok()) return prepared.status();
    text = *std::move(prepared);
  } else if (spec.kind == Kind::kJsonObject) {
    text = R"({"type": "object"})";
  } else if (spec.kind == Kind::kChoice) {
    absl::StatusOr<std::string> grammar = ChoiceGrammar(spec.choices);
    if (!grammar.ok()) return grammar.status();
    text = *std::move(grammar);
  }
  WarningCapture warnings;
  try {
    std::optional<xgrammar::Grammar> tagged;
    if (spec.kind == Kind::kStructuralTag) {
      auto made = xgrammar::Grammar::FromStructuralTag(text, tokenizer_info);
      if (const auto* error = std::get_if<xgrammar::StructuralTagError>(&made)) {
        return absl::InvalidArgumentError(llm::StrCat(
            prefix, std::visit([](const auto& e) { return std::string(e.what()); }, *error)));
      }
      tagged = std::get<xgrammar::Grammar>(std::move(made));
    }
    const xgrammar::Grammar grammar = tagged ? *std::move(tagged) : ToGrammar(spec, text);
    // What xgrammar says it ignored of the schema.
    if (spec.kind == Kind::kJsonSchema && !spec.lenient && !warnings.warnings().empty()) {
      std::vector<std::string> distinct;
      for (const std::string& w : warnings.warnings()) {
        if (std::find(distinct.begin(), distinct.end(), w) == distinct.end()) distinct.push_back(w);
      }
      return absl::InvalidArgumentError(
          llm::StrCat(prefix, "unsupported: ", llm::StrJoin(distinct, "; ")));
    }
    // Precomputing every state's tokens costs about the grammar's size times
    // the vocabulary's; past the limit the states are computed on their first
    // mask instead, so that no compile runs for minutes.
    const bool lazy = GrammarSize(grammar.ToString()) * vocab_size > options.eager_compile_limit;
    auto impl = std::make_unique<Constraint::Impl>(Constraint::Impl{
        spec.kind, (lazy ? lazy_compiler : compiler).CompileGrammar(grammar), 0, lazy});
    impl->compile_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    auto constraint = std::make_shared<const Constraint>(std::move(impl));
    // A constraint no token can start (an empty language) is refused here,
    // naming the spec, rather than failing the first step of a generation.
    Matcher first(constraint);
    std::vector<uint32_t> mask(static_cast<size_t>(first.mask_words()));
    if (!first.FillMask(mask).ok()) {
      return absl::InvalidArgumentError(
          llm::StrCat(prefix,
                      "allows no output: no token of the vocabulary can start it (its language "
                      "is empty, or the vocabulary cannot spell it)"));
    }
    return constraint;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(llm::StrCat(prefix, "out of memory while compiling"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(llm::StrCat(prefix, XgrammarErrorMessage(e)));
  }
}

}  // namespace llm::constrain
