// The .tiktoken parser on arbitrary bytes: an error or a usable vocabulary,
// never a crash or an unbounded allocation.
#include <cstdint>
#include <string_view>

#include "tokenizer_svc/tiktoken_loader.h"
#include "tokenizer_svc/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm::tok;
  const std::string_view contents(reinterpret_cast<const char*>(data), size);
  TiktokenOptions options;
  options.pattern = R"('s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  options.special_tokens = {{"<|end|>", 7}};
  auto vocab = ParseTiktoken(contents, "fuzz.tiktoken", options);
  if (!vocab.ok()) return 0;
  auto tok = Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) return 0;
  auto ids = (*tok)->Encode("Hello, world! 123 <|end|>", {.allow_all_special = true});
  if (ids.ok()) (void)(*tok)->Decode(*ids);
  return 0;
}
