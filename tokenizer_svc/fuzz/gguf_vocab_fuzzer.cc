// The GGUF reader plus the GGUF vocabulary loader on arbitrary bytes: an error
// or a usable tokenizer, never a crash or an unbounded allocation.
#include <cstdint>
#include <string>

#include "common/gguf/gguf.h"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  auto file =
      gguf::File::FromBytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
  if (!file.ok()) return 0;
  auto vocab = tok::VocabFromGguf(**file, std::nullopt);
  if (!vocab.ok()) return 0;
  auto tok = tok::Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) return 0;
  auto ids = (*tok)->Encode("Hello, world! 123  \xE4\xB8\xAD", {.allow_all_special = true});
  if (ids.ok()) (void)(*tok)->Decode(*ids);
  return 0;
}
