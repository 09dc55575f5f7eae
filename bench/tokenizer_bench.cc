// tokenizer_bench: single-threaded throughput of llm::tok::Tokenizer::Encode
// on a corpus file, and (--worst-case) how its time grows on inputs without
// whitespace. bench/tokenizer_bench.py runs it beside OpenAI's tiktoken on the
// same inputs; see bench/README.md.
//
//   tokenizer_bench --vocab cl100k_base.tiktoken --corpus corpus.txt [--repeat 5]
//                   [--worst-case] [--chunk-bytes 65536] [--ids-out FILE]
//                   [--inputs-out DIR]
//
// Output: JSON lines on stdout, one for the corpus
//   {"impl":"llm","kind":"corpus","encoding":"cl100k_base","cache":true,"bytes":...,
//    "tokens":...,"chunks":...,"chunking":"newline-65536","median_s":...,"mb_s":...}
// and with --worst-case one per generated input pair
//   {"impl":"llm","kind":"worst_case","case":"a","small_bytes":100000,
//    "large_bytes":1000000,"small_s":...,"large_s":...,"ratio":...}
// where ratio = time(large) / time(small): 10 is linear, 100 quadratic.
//
// Chunking (the rule the Python driver repeats exactly): a corpus of at most
// --chunk-bytes bytes is encoded in one call. A larger one is cut into chunks,
// each the shortest prefix of the rest that is at least --chunk-bytes long and
// ends just after a '\n' (or all of the rest when it is no longer than
// --chunk-bytes or has no '\n' past that point). --chunk-bytes 0: one call.
//
// With --no-cache-pass (the default) the corpus is timed a second time with
// the piece cache off (EncodeOptions::use_piece_cache = false): the corpus
// repeats its texts, which flatters the cache, so this line shows what every
// piece costs through the merge loop; it prints "cache":false (the main line
// "cache":true). The ids of both must be identical (else exit status 1).
//
// Timing: one untimed warm-up pass, then --repeat timed passes over all chunks
// (each chunk one Encode call that returns a fresh vector, as a caller would
// use it); the median pass is reported. MB = 10^6 bytes.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tokenizer_svc/tokenizer.h"

ABSL_FLAG(std::string, vocab, "", "Vocabulary: a .tiktoken file (its .json sidecar beside it).");
ABSL_FLAG(std::string, corpus, "", "Corpus file, read as raw bytes.");
ABSL_FLAG(int, repeat, 5, "Timed passes; the median is reported.");
ABSL_FLAG(bool, worst_case, false,
          "Also time inputs without whitespace of 100 KB and 1 MB (the corpus with all "
          "whitespace removed, and 'a' repeated) and print time(1 MB) / time(100 KB).");
ABSL_FLAG(int64_t, chunk_bytes, 65536,
          "Cut a corpus larger than this into chunks at newline boundaries (see the header "
          "comment); 0 encodes the whole file in one call.");
ABSL_FLAG(std::string, ids_out, "",
          "Write the corpus's token ids here (uint32 little-endian, chunks in order).");
ABSL_FLAG(std::string, inputs_out, "",
          "--worst-case: write each generated input to DIR/<case>_<bytes>.txt.");
ABSL_FLAG(bool, no_cache_pass, true,
          "Also time the corpus with EncodeOptions::use_piece_cache = false (every piece "
          "through the merge loop), printed as a second line with \"cache\":false.");
ABSL_FLAG(double, case_budget_s, 10.0,
          "--worst-case: stop repeating one input once its timed runs took this long "
          "(at least one run).");

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

constexpr size_t kSmallBytes = 100'000;
constexpr size_t kLargeBytes = 1'000'000;

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "tokenizer_bench: " << message << "\n";
  std::exit(1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die(llm::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) Die(llm::StrCat("cannot read ", path));
  return std::move(ss).str();
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) Die(llm::StrCat("cannot write ", path));
}

std::vector<std::string_view> SplitChunks(std::string_view text, size_t target) {
  std::vector<std::string_view> chunks;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.size();
    if (target > 0 && text.size() - pos > target) {
      const size_t nl = text.find('\n', pos + target - 1);
      if (nl != std::string_view::npos) end = nl + 1;
    }
    chunks.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return chunks;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Encodes every chunk once; returns the number of tokens.
size_t EncodeAll(const llm::tok::Tokenizer& tok, const std::vector<std::string_view>& chunks,
                 const llm::tok::EncodeOptions& options, std::vector<uint32_t>* keep) {
  size_t tokens = 0;
  for (std::string_view chunk : chunks) {
    auto ids = tok.Encode(chunk, options);
    if (!ids.ok()) Die(llm::StrCat("Encode failed: ", ids.status().ToString()));
    tokens += ids->size();
    if (keep != nullptr) keep->insert(keep->end(), ids->begin(), ids->end());
  }
  return tokens;
}

// Seconds of `repeat` timed passes (after one warm-up pass), stopping early
// once `budget_s` is spent (0: no budget).
std::vector<double> TimePasses(const llm::tok::Tokenizer& tok,
                               const std::vector<std::string_view>& chunks,
                               const llm::tok::EncodeOptions& options, int repeat, double budget_s,
                               size_t* tokens) {
  *tokens = EncodeAll(tok, chunks, options, nullptr);
  std::vector<double> times;
  double spent = 0;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    const size_t n = EncodeAll(tok, chunks, options, nullptr);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (n != *tokens) Die("token count changed between passes");
    times.push_back(s);
    spent += s;
    if (budget_s > 0 && spent >= budget_s) break;
  }
  return times;
}

// Decodes one UTF-8 sequence at text[i]; returns its code point and sets *len,
// or returns -1 (with *len = 1) for an invalid byte.
int32_t DecodeUtf8(std::string_view text, size_t i, size_t* len) {
  const auto b0 = static_cast<uint8_t>(text[i]);
  *len = 1;
  if (b0 < 0x80) return b0;
  size_t n = 0;
  int32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return -1;
  }
  if (i + n > text.size()) return -1;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(text[i + k]);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = n;
  return cp;
}

// Unicode White_Space, the set tiktoken's `\s` matches.
bool IsWhiteSpace(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

std::string RemoveWhiteSpace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    const int32_t cp = DecodeUtf8(text, i, &len);
    if (cp < 0 || !IsWhiteSpace(cp)) out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

// `base` repeated and cut to at most `size` bytes, at a UTF-8 character
// boundary.
std::string RepeatToSize(std::string_view base, size_t size) {
  std::string out;
  out.reserve(size + base.size());
  while (out.size() < size) out.append(base);
  size_t cut = size;
  while (cut > 0 && (static_cast<uint8_t>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  return out;
}

Json WorstCase(const llm::tok::Tokenizer& tok, const std::string& encoding, const std::string& name,
               std::string_view base, int repeat, double budget_s, const std::string& inputs_dir) {
  Json line;
  line["impl"] = "llm";
  line["kind"] = "worst_case";
  line["encoding"] = encoding;
  line["case"] = name;
  std::vector<double> medians;
  for (const auto& [label, size] :
       {std::pair{"small", kSmallBytes}, std::pair{"large", kLargeBytes}}) {
    const std::string input = RepeatToSize(base, size);
    if (!inputs_dir.empty()) {
      WriteFile(llm::StrCat(inputs_dir, "/", name, "_", size, ".txt"), input);
    }
    size_t tokens = 0;
    const std::vector<std::string_view> one{input};
    const std::vector<double> times = TimePasses(tok, one, {}, repeat, budget_s, &tokens);
    const double median = Median(times);
    medians.push_back(median);
    line[llm::StrCat(label, "_bytes")] = input.size();
    line[llm::StrCat(label, "_tokens")] = tokens;
    line[llm::StrCat(label, "_runs")] = times.size();
    line[llm::StrCat(label, "_s")] = median;
    line[llm::StrCat(label, "_min_s")] = *std::min_element(times.begin(), times.end());
  }
  line["ratio"] = medians[0] > 0 ? medians[1] / medians[0] : 0.0;
  const double min_small = line["small_min_s"].get<double>();
  line["ratio_of_min"] = min_small > 0 ? line["large_min_s"].get<double>() / min_small : 0.0;
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv,
                  "tokenizer_bench --vocab PATH --corpus FILE [--repeat 5] [--worst-case]\n"
                  "Times single-threaded Tokenizer::Encode on FILE; prints JSON lines.");
  const std::string vocab_path = absl::GetFlag(FLAGS_vocab);
  const std::string corpus_path = absl::GetFlag(FLAGS_corpus);
  const int repeat = absl::GetFlag(FLAGS_repeat);
  const int64_t chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  if (vocab_path.empty() || corpus_path.empty()) Die("--vocab and --corpus are required");
  if (repeat < 1) Die("--repeat must be at least 1");
  if (chunk_bytes < 0) Die("--chunk-bytes must not be negative");

  const auto load_start = Clock::now();
  auto loaded = llm::tok::Tokenizer::Load({.path = vocab_path});
  if (!loaded.ok()) Die(loaded.status().ToString());
  const llm::tok::Tokenizer& tok = **loaded;
  const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  std::string encoding = tok.vocab().pretokenizer;
  if (encoding.empty() || encoding == "custom") {
    encoding = vocab_path.substr(vocab_path.find_last_of('/') + 1);
    encoding = encoding.substr(0, encoding.find('.'));
  }

  const std::string corpus = ReadFile(corpus_path);
  const size_t target = static_cast<size_t>(chunk_bytes);
  const std::vector<std::string_view> chunks = SplitChunks(corpus, target);
  const bool split = target > 0 && corpus.size() > target;

  const std::string ids_out = absl::GetFlag(FLAGS_ids_out);
  if (!ids_out.empty()) {
    std::vector<uint32_t> ids;
    EncodeAll(tok, chunks, {}, &ids);
    std::string bytes;
    bytes.reserve(ids.size() * 4);
    for (uint32_t id : ids) {
      for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((id >> (8 * k)) & 0xFF));
    }
    WriteFile(ids_out, bytes);
  }

  auto corpus_line = [&](bool cache) {
    size_t tokens = 0;
    const std::vector<double> times =
        TimePasses(tok, chunks, {.use_piece_cache = cache}, repeat, 0, &tokens);
    const double median = Median(times);
    Json line;
    line["impl"] = "llm";
    line["kind"] = "corpus";
    line["encoding"] = encoding;
    line["cache"] = cache;
    line["bytes"] = corpus.size();
    line["tokens"] = tokens;
    line["chunks"] = chunks.size();
    line["chunking"] = split ? llm::StrCat("newline-", target) : std::string("whole");
    line["repeat"] = repeat;
    line["load_s"] = load_s;
    line["median_s"] = median;
    line["min_s"] = *std::min_element(times.begin(), times.end());
    line["mb_s"] = median > 0 ? static_cast<double>(corpus.size()) / median / 1e6 : 0.0;
    std::cout << line.dump() << std::endl;
  };
  corpus_line(true);
  if (absl::GetFlag(FLAGS_no_cache_pass)) {
    std::vector<uint32_t> with_cache, without_cache;
    EncodeAll(tok, chunks, {}, &with_cache);
    EncodeAll(tok, chunks, {.use_piece_cache = false}, &without_cache);
    if (with_cache != without_cache) Die("the ids differ with and without the piece cache");
    corpus_line(false);
  }

  if (absl::GetFlag(FLAGS_worst_case)) {
    const double budget_s = absl::GetFlag(FLAGS_case_budget_s);
    const std::string inputs_dir = absl::GetFlag(FLAGS_inputs_out);
    const std::string no_ws = RemoveWhiteSpace(corpus);
    if (no_ws.empty()) Die("the corpus has nothing but whitespace; no worst-case input");
    for (const auto& [name, base] :
         {std::pair{std::string("no_ws_corpus"), std::string_view(no_ws)},
          std::pair{std::string("a"), std::string_view("a")}}) {
      const Json wc = WorstCase(tok, encoding, name, base, repeat, budget_s, inputs_dir);
      std::cout << wc.dump() << std::endl;
      std::cerr << "tokenizer_bench: " << encoding << " worst case " << name << ": "
                << wc["small_s"].get<double>() << " s for " << wc["small_bytes"].get<size_t>()
                << " B, " << wc["large_s"].get<double>() << " s for "
                << wc["large_bytes"].get<size_t>() << " B, ratio " << wc["ratio"].get<double>()
                << "\n";
    }
  }
  return 0;
}
