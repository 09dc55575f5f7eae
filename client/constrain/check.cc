#include "client/constrain/check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/matcher.h"
#include "common/strings.h"

namespace llm::constrain {

Vocabulary VocabularyOf(const tok::Vocab& vocab) {
  Vocabulary v;
  v.token_bytes = vocab.token_bytes;
  for (const auto& id : {vocab.eos_id, vocab.eot_id}) {
    if (id.has_value() && std::find(v.end_ids.begin(), v.end_ids.end(),
                                    static_cast<int32_t>(*id)) == v.end_ids.end()) {
      v.end_ids.push_back(static_cast<int32_t>(*id));
    }
  }
  for (size_t id = 0; id < vocab.token_types.size(); ++id) {
    const tok::TokenType t = vocab.token_types[id];
    if (t == tok::TokenType::kControl || t == tok::TokenType::kUnknown ||
        t == tok::TokenType::kUnused) {
      if (std::find(v.end_ids.begin(), v.end_ids.end(), static_cast<int32_t>(id)) ==
          v.end_ids.end()) {
        v.special_ids.push_back(static_cast<int32_t>(id));
      }
    }
  }
  return v;
}

absl::StatusOr<InstanceCheck> CheckTokens(std::shared_ptr<const Constraint> constraint,
                                          std::span<const uint32_t> ids,
                                          std::vector<double>* mask_us) {
  Matcher m(std::move(constraint));
  std::vector<uint32_t> mask(m.mask_words());
  InstanceCheck result;
  result.tokens = static_cast<int>(ids.size());
  auto fill = [&]() -> absl::Status {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = m.FillMask(mask);
    const auto end = std::chrono::steady_clock::now();
    if (mask_us != nullptr) {
      mask_us->push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    return s;
  };
  auto allowed = [&](int64_t id) {
    return id < m.vocab_size() && ((mask[id / 32] >> (id % 32)) & 1) != 0;
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    if (absl::Status s = fill(); !s.ok()) return s;
    const bool in_mask = allowed(ids[i]);
    const bool accepted = ids[i] <= INT32_MAX && m.Accept(static_cast<int32_t>(ids[i]));
    if (in_mask != accepted) {
      return absl::InternalError(llm::StrCat("token ", i, " (id ", ids[i], ") is ",
                                             in_mask ? "" : "not ", "in the mask but ",
                                             accepted ? "" : "not ", "accepted"));
    }
    if (!accepted) {
      result.refused_at = static_cast<int>(i);
      return result;
    }
  }
  if (absl::Status s = fill(); !s.ok()) return s;
  if (!m.CanEnd()) {
    result.refused_at = result.tokens;
    return result;
  }
  result.accepted = true;
  return result;
}

absl::StatusOr<InstanceCheck> CheckText(std::shared_ptr<const Constraint> constraint,
                                        const tok::Tokenizer& tokenizer, std::string_view text,
                                        std::vector<double>* mask_us) {
  absl::StatusOr<std::vector<uint32_t>> ids = tokenizer.Encode(text, {});
  if (!ids.ok()) return ids.status();
  return CheckTokens(std::move(constraint), *ids, mask_us);
}

absl::StatusOr<std::unique_ptr<tok::Tokenizer>> TokenizerForChecks(tok::Vocab vocab) {
  vocab.add_space_prefix = false;
  return tok::Tokenizer::Create(std::move(vocab));
}

absl::StatusOr<std::unique_ptr<ConstraintChecker>> ConstraintChecker::Load(
    const std::string& vocab_path, const CompilerOptions& options) {
  absl::StatusOr<std::unique_ptr<tok::Tokenizer>> tokenizer =
      tok::Tokenizer::Load({.path = vocab_path});
  if (!tokenizer.ok()) return tokenizer.status();
  const Vocabulary vocabulary = VocabularyOf((*tokenizer)->vocab());
  if ((*tokenizer)->vocab().add_space_prefix) {
    tokenizer = TokenizerForChecks((*tokenizer)->vocab());
    if (!tokenizer.ok()) return tokenizer.status();
  }
  absl::StatusOr<std::unique_ptr<Compiler>> compiler = Compiler::Create(vocabulary, options);
  if (!compiler.ok()) return compiler.status();
  return std::unique_ptr<ConstraintChecker>(
      new ConstraintChecker(*std::move(tokenizer), *std::move(compiler)));
}

absl::StatusOr<ConstraintChecker::Report> ConstraintChecker::Run(
    const Spec& spec, const std::vector<std::string>& instances) {
  Report report;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::shared_ptr<const Constraint>> constraint = compiler_->Compile(spec);
  report.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!constraint.ok()) {
    if (!absl::IsInvalidArgument(constraint.status())) return constraint.status();
    report.error = std::string(constraint.status().message());
    return report;
  }
  report.compiled = true;
  for (const std::string& text : instances) {
    Instance& instance = report.instances.emplace_back();
    absl::StatusOr<InstanceCheck> check =
        CheckText(*constraint, *tokenizer_, text, &report.mask_us);
    if (absl::IsInternal(check.status())) return check.status();
    if (!check.ok()) {
      instance.error = std::string(check.status().message());
    } else {
      instance.accepted = check->accepted;
    }
  }
  return report;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * values.size()));
  const size_t index = std::clamp<size_t>(rank, 1, values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + index, values.end());
  return values[index];
}

}  // namespace llm::constrain
