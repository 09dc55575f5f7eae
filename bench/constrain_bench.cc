// constrain_bench: the grammar engine of client/constrain on one thread: the
// time of each token's mask while instances are fed token by token, and the
// compile time of each schema, first and cached. bench/constrain_bench.py runs
// it beside xgrammar's and llguidance's Python packages on the same schemas,
// instances and token ids; see bench/README.md.
//
//   constrain_bench --vocab MODEL.gguf --cases bench/constrain_cases.json
//                   --out FILE [--repeat 5] [--compile_repeat 5]
//
// --cases: a JSON array of {"name", "schema", "instances": [text, ...]}.
// --out gets one JSON object: the vocabulary (token bytes in hex, end and
// special ids, size) and per case the prepared schema (after
// client/constrain's rewrites, the text xgrammar compiles), whether it
// compiled (else the error) and lazily, each instance's token ids and
// verdict, compile_first_ms (each a compile that misses the cache),
// compile_cached_us (each answered by the cache) and mask_us (every FillMask
// of --repeat passes over the instances, each pass with fresh matchers).
// A summary line goes to stdout.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "client/constrain/check.h"
#include "client/constrain/constraint.h"
#include "client/constrain/matcher.h"
#include "client/constrain/schema_support.h"
#include "common/flags.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, vocab, "", "Vocabulary: a .gguf (or .tiktoken) file.");
ABSL_FLAG(std::string, cases, "", "The schemas and instances (JSON).");
ABSL_FLAG(std::string, out, "", "Where to write the results (JSON).");
ABSL_FLAG(int, repeat, 5, "Passes over every instance, each with fresh matchers.");
ABSL_FLAG(int, compile_repeat, 5, "Compiles of each schema (first, and cached).");
ABSL_FLAG(int, threads, 0, "Threads of one compilation (0: min(8, cores)).");

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;
using namespace llm::constrain;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "constrain_bench: %s\n", message.c_str());
  std::exit(2);
}

double Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv,
                  "constrain_bench --vocab MODEL.gguf --cases CASES.json --out FILE\n"
                  "Times client/constrain's masks and compiles on one thread.");
  const int repeat = absl::GetFlag(FLAGS_repeat);
  const int compile_repeat = absl::GetFlag(FLAGS_compile_repeat);
  if (absl::GetFlag(FLAGS_vocab).empty() || absl::GetFlag(FLAGS_cases).empty() ||
      absl::GetFlag(FLAGS_out).empty()) {
    Die("--vocab, --cases and --out are required");
  }
  if (repeat < 1 || compile_repeat < 1) Die("--repeat and --compile_repeat must be >= 1");
  std::ifstream cases_in(absl::GetFlag(FLAGS_cases));
  if (!cases_in) Die("cannot read " + absl::GetFlag(FLAGS_cases));
  const Json cases = Json::parse(cases_in);

  const CompilerOptions options{.threads = absl::GetFlag(FLAGS_threads)};
  auto checker = ConstraintChecker::Load(absl::GetFlag(FLAGS_vocab), options);
  if (!checker.ok()) Die(std::string(checker.status().message()));
  const Vocabulary vocabulary = VocabularyOf((*checker)->tokenizer().vocab());
  // Every compile of this one misses: one entry, schemas taken in turn.
  CompilerOptions uncached_options = options;
  uncached_options.cache_entries = 1;
  auto uncached = Compiler::Create(vocabulary, uncached_options);
  if (!uncached.ok()) Die(std::string(uncached.status().message()));

  Json out;
  Json tokens = Json::array();
  for (const std::string& t : vocabulary.token_bytes) tokens.push_back(Hex(t));
  out["vocab"] = {{"path", absl::GetFlag(FLAGS_vocab)},
                  {"size", (*checker)->compiler().vocab_size()},
                  {"tokens_hex", tokens},
                  {"end_ids", vocabulary.end_ids},
                  {"special_ids", vocabulary.special_ids}};
  std::vector<Spec> specs;
  for (const Json& c : cases) {
    specs.push_back({.kind = Kind::kJsonSchema, .text = c["schema"].dump()});
  }
  // Compile first: schemas in turn, compile_repeat rounds.
  std::vector<std::vector<double>> first_ms(specs.size());
  for (int r = 0; r < compile_repeat; ++r) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const auto start = Clock::now();
      auto compiled = (*uncached)->Compile(specs[i]);
      if (compiled.ok()) first_ms[i].push_back(Micros(start, Clock::now()) / 1000);
    }
  }
  std::vector<double> all_mask_us;
  std::vector<double> all_first_ms;
  std::vector<double> all_cached_us;
  Json results = Json::array();
  for (size_t i = 0; i < specs.size(); ++i) {
    const Json& c = cases[i];
    Json r = {{"name", c["name"]}};
    absl::StatusOr<std::string> prepared = PrepareSchema(specs[i].text, /*lenient=*/false);
    r["prepared_schema"] = prepared.ok() ? *prepared : "";
    auto constraint = (*checker)->compiler().Compile(specs[i]);
    r["compiled"] = constraint.ok();
    if (!constraint.ok()) {
      r["error"] = std::string(constraint.status().message());
      results.push_back(r);
      continue;
    }
    r["lazy"] = (*constraint)->lazy();
    std::vector<double> cached_us;
    for (int k = 0; k < compile_repeat; ++k) {
      const auto start = Clock::now();
      auto again = (*checker)->compiler().Compile(specs[i]);
      cached_us.push_back(Micros(start, Clock::now()));
      if (!again.ok() || again->get() != constraint->get()) Die("the cache lost " + r.dump());
    }
    Json instances = Json::array();
    std::vector<std::vector<uint32_t>> ids;
    for (const Json& text : c["instances"]) {
      auto encoded = (*checker)->tokenizer().Encode(text.get<std::string>(), {});
      if (!encoded.ok()) Die(std::string(encoded.status().message()));
      ids.push_back(*encoded);
    }
    std::vector<double> mask_us;
    for (int pass = 0; pass < repeat; ++pass) {
      for (size_t k = 0; k < ids.size(); ++k) {
        auto check = CheckTokens(*constraint, ids[k], &mask_us);
        if (!check.ok()) Die(std::string(check.status().message()));
        if (pass == 0) instances.push_back({{"ids", ids[k]}, {"accepted", check->accepted}});
      }
    }
    r["instances"] = instances;
    r["compile_first_ms"] = first_ms[i];
    r["compile_cached_us"] = cached_us;
    r["mask_us"] = mask_us;
    all_mask_us.insert(all_mask_us.end(), mask_us.begin(), mask_us.end());
    all_first_ms.insert(all_first_ms.end(), first_ms[i].begin(), first_ms[i].end());
    all_cached_us.insert(all_cached_us.end(), cached_us.begin(), cached_us.end());
    results.push_back(r);
  }
  out["cases"] = results;
  std::ofstream(absl::GetFlag(FLAGS_out)) << out.dump();
  std::printf("%s\n", Json{{"impl", "llm"},
                           {"vocab_size", (*checker)->compiler().vocab_size()},
                           {"masks", all_mask_us.size()},
                           {"mask_us_p50", Percentile(all_mask_us, 50)},
                           {"mask_us_p99", Percentile(all_mask_us, 99)},
                           {"compile_first_ms_p50", Percentile(all_first_ms, 50)},
                           {"compile_first_ms_p99", Percentile(all_first_ms, 99)},
                           {"compile_cached_us_p50", Percentile(all_cached_us, 50)},
                           {"compile_cached_us_p99", Percentile(all_cached_us, 99)}}
                          .dump()
                          .c_str());
  return 0;
}
