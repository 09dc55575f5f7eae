// Differential fuzzing of the tokenizer's fast paths against their plain
// counterparts, on arbitrary bytes (the text a client sends is untrusted):
//   - the hand-written ASCII pre-tokenizer scanner in front of PCRE2 against
//     PCRE2 alone (ascii_scanner.h), for the cl100k_base and o200k_base
//     patterns: the same pieces;
//   - Encode with the per-thread piece cache against Encode without it: the
//     same ids (the cache is warm from earlier inputs, as in a server).
// The first byte picks the encoding; the rest is the text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "tokenizer_svc/fuzz/fuzz_vocab.h"
#include "tokenizer_svc/pretokenizer.h"

namespace {

using llm::tok::Pretokenizer;

struct Encoding {
  const llm::tok::Tokenizer* tokenizer;
  std::unique_ptr<Pretokenizer> fast, pcre;
};

Encoding Load(const std::string& name) {
  const std::string base = llm::tok::fuzz::SharedDir() + "/tokenizer/" + name;
  std::ifstream in(base + ".json");
  if (!in) {
    std::fprintf(stderr, "fuzzer setup: cannot read %s.json\n", base.c_str());
    std::exit(2);
  }
  const std::string pattern = nlohmann::json::parse(in).at("pat_str").get<std::string>();
  auto fast = Pretokenizer::Create({pattern});
  auto pcre = Pretokenizer::Create({pattern}, /*ascii_scanner=*/false);
  if (!fast.ok() || !pcre.ok()) std::exit(2);
  return {&llm::tok::fuzz::LoadOnce("tokenizer/" + name + ".tiktoken"), *std::move(fast),
          *std::move(pcre)};
}

std::vector<std::string_view> Pieces(const Pretokenizer& pre, std::string_view text) {
  std::vector<std::string_view> out;
  pre.ForEachPiece(text, [&](std::string_view p) { out.push_back(p); });
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Encoding cl100k = Load("cl100k_base");
  static const Encoding o200k = Load("o200k_base");
  if (size == 0) return 0;
  const Encoding& e = (data[0] & 1) ? o200k : cl100k;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (Pieces(*e.fast, text) != Pieces(*e.pcre, text)) __builtin_trap();
  llm::tok::EncodeOptions cached, uncached;
  uncached.use_piece_cache = false;
  auto a = e.tokenizer->Encode(text, cached);
  auto b = e.tokenizer->Encode(text, uncached);
  if (!a.ok() || !b.ok() || *a != *b) __builtin_trap();
  return 0;
}
