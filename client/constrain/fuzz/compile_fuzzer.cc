// Constraint compilation on arbitrary bytes: the first byte picks the kind
// (JSON schema, regex, GBNF grammar, choices split at '\n'; bit 3 lenient,
// bit 4 strict) and the rest is the text. An error or a constraint whose
// matcher then runs a few steps, never a crash, a hang or an unbounded
// allocation. The vocabulary is small, so compiling is cheap.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/constrain/constraint.h"
#include "client/constrain/matcher.h"
#include "client/constrain/testing_vocab.h"

namespace {

llm::constrain::Compiler& TheCompiler() {
  static llm::constrain::Compiler* compiler = [] {
    // A small cache: inputs rarely repeat.
    auto c = llm::constrain::Compiler::Create(llm::constrain::testing::SmallVocabulary(),
                                              {.cache_entries = 4, .threads = 1});
    return c.ok() ? c->release() : nullptr;
  }();
  return *compiler;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm::constrain;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  Spec spec;
  switch (data[0] & 3) {
    case 0:
      spec.kind = Kind::kJsonSchema;
      break;
    case 1:
      spec.kind = Kind::kRegex;
      break;
    case 2:
      spec.kind = Kind::kGrammar;
      break;
    default:
      spec.kind = Kind::kChoice;
      for (size_t start = 0; start <= text.size();) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        spec.choices.emplace_back(text.substr(start, end - start));
        start = end + 1;
      }
      break;
  }
  spec.text = std::string(text);
  spec.lenient = (data[0] & 8) != 0;
  spec.strict = (data[0] & 16) != 0;
  auto constraint = TheCompiler().Compile(spec);
  if (!constraint.ok()) return 0;
  // A few steps: the forced tokens, then the first allowed token, each mask.
  Matcher m(*constraint);
  std::vector<uint32_t> mask(m.mask_words());
  for (int step = 0; step < 8 && !m.IsTerminated(); ++step) {
    for (int32_t id : m.ForcedTokens()) {
      if (!m.Accept(id)) __builtin_trap();  // a forced token must be allowed
    }
    if (m.IsTerminated() || !m.FillMask(mask).ok()) break;
    int32_t next = -1;
    for (int32_t id = 0; id < m.vocab_size() && next < 0; ++id) {
      if ((mask[id / 32] >> (id % 32)) & 1) next = id;
    }
    if (next < 0 || !m.Accept(next)) __builtin_trap();  // a mask is never empty
  }
  if (m.accepted() > 0) (void)m.Rollback(m.accepted());
  return 0;
}
