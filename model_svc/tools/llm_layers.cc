// llm-layers: writes a model's intermediate tensors on a token sequence, to
// compare them op by op with llama.cpp's (bench/layer_compare.py).
//
// The tokens (a JSON array of ids) run through one sequence from an empty
// cache, in steps of --ubatch tokens (default: all in one step, our prefill;
// 1: the decode path). Every tensor LlamaModel's observer names (see
// llama_model.h; --names picks some) is written as DIR/ours/NAME-LAYER.f32:
// raw little-endian float32, one row per token, row-major. With --reference
// the fp64 reference forward (testing/reference_forward.h) writes the same
// names to DIR/reference/NAME-LAYER.f64 (float64); --reference_q8 rounds its
// matmul inputs as the CPU backend does. With --logits, the logits of every
// position go to DIR/ours/result_output.f32 (and .f64 for the reference).
// Prints one JSON line: the token count and the files' row widths by name.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/gguf/gguf.h"
#include "common/mapped_file.h"
#include "model_svc/backend/backend_factory.h"
#include "model_svc/model/llama_model.h"
#include "model_svc/testing/reference_forward.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "Path to a GGUF model (required).");
ABSL_FLAG(std::string, tokens, "", "JSON array of token ids (required).");
ABSL_FLAG(std::string, out, "", "Output directory (required; created).");
ABSL_FLAG(std::string, names, "", "Comma-separated tensor names to write (empty: all).");
ABSL_FLAG(std::string, kv_cache_type, "f16", "f16, f32 or q8_0 (keys and values).");
ABSL_FLAG(int, ubatch, 0, "Tokens per forward step (0: all in one).");
ABSL_FLAG(int, threads, 0, "CPU threads; 0: every core the process may use.");
ABSL_FLAG(bool, reference, false, "Also run the fp64 reference forward.");
ABSL_FLAG(bool, reference_q8, false, "The reference rounds matmul inputs to int8 blocks.");
ABSL_FLAG(bool, logits, false, "Also write the logits of every position.");

namespace {

constexpr char kUsage[] =
    "llm-layers --model PATH --tokens IDS.json --out DIR [--names a,b] [--ubatch N]\n"
    "           [--kv_cache_type f16|f32|q8_0] [--reference [--reference_q8]] [--logits]\n"
    "Writes the forward's intermediate tensors per layer (llama.cpp's names) as raw\n"
    "row-major files DIR/ours/NAME-LAYER.f32 (and DIR/reference/NAME-LAYER.f64).";

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "llm-layers: %s\n", message.c_str());
  std::exit(1);
}

void WriteFile(const std::filesystem::path& path, const void* data, size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!f) Fail("cannot write " + path.string());
}

std::string FileName(std::string_view name, int64_t layer) {
  return std::string(name) + "-" + std::to_string(layer);
}

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv, kUsage);
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string out_dir = absl::GetFlag(FLAGS_out);
  if (model_path.empty() || out_dir.empty() || absl::GetFlag(FLAGS_tokens).empty()) {
    Fail(std::string("--model, --tokens and --out are required\n") + kUsage);
  }
  auto token_text = llm::ReadFileToString(absl::GetFlag(FLAGS_tokens));
  if (!token_text.ok()) Fail(std::string(token_text.status().message()));
  const std::vector<int32_t> tokens =
      nlohmann::json::parse(*token_text).get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) Fail("no tokens");
  const std::vector<std::string> name_list =
      absl::StrSplit(absl::GetFlag(FLAGS_names), ',', absl::SkipEmpty());
  const std::set<std::string, std::less<>> names(name_list.begin(), name_list.end());
  auto wanted = [&names](std::string_view name) { return names.empty() || names.contains(name); };
  const std::string kv_type = absl::GetFlag(FLAGS_kv_cache_type);
  if (kv_type != "f16" && kv_type != "f32" && kv_type != "q8_0") {
    Fail("--kv_cache_type must be f16, f32 or q8_0");
  }
  const int64_t ubatch = absl::GetFlag(FLAGS_ubatch) > 0 ? absl::GetFlag(FLAGS_ubatch) : n;

  auto file = llm::gguf::File::Open(model_path);
  if (!file.ok()) Fail(std::string(file.status().message()));
  std::shared_ptr<const llm::gguf::File> shared(*std::move(file));
  llm::model::BackendOptions backend_options;
  backend_options.threads = absl::GetFlag(FLAGS_threads);
  auto backend = llm::model::CreateBackend(backend_options);
  if (!backend.ok()) Fail(std::string(backend.status().message()));
  llm::model::ModelOptions options;
  options.max_step_tokens = ubatch;
  options.max_logit_rows = ubatch;
  options.kv_block_size = 16;
  options.kv_blocks = static_cast<int32_t>((n + 15) / 16);
  options.kv_type = kv_type == "f32"    ? llm::model::KvType::kF32
                    : kv_type == "q8_0" ? llm::model::KvType::kQ8_0
                                        : llm::model::KvType::kF16;
  options.context_length = n;
  auto model = llm::model::LlamaModel::Load(shared, *std::move(backend), options);
  if (!model.ok()) Fail(std::string(model.status().message()));
  llm::model::LlamaModel& m = **model;

  // (name, layer) -> rows of every step, appended in token order.
  std::map<std::pair<std::string, int64_t>, std::vector<float>> ours;
  std::map<std::string, int64_t> widths;
  m.set_tensor_observer([&](std::string_view name, int64_t layer, const llm::model::Tensor& t) {
    if (!wanted(name)) return;
    std::vector<float>& rows = ours[{std::string(name), layer}];
    const size_t old = rows.size();
    rows.resize(old + t.rows * t.cols);
    const absl::Status s =
        m.backend().ReadTensor(t, std::span<float>(rows.data() + old, t.rows * t.cols));
    if (!s.ok()) Fail(std::string(s.message()));
    widths[std::string(name)] = t.cols;
  });
  std::vector<int32_t> blocks(options.kv_blocks);
  for (int32_t i = 0; i < options.kv_blocks; ++i) blocks[i] = i;
  std::vector<float> logits;
  for (int64_t start = 0; start < n; start += ubatch) {
    llm::model::StepBatch batch;
    const int64_t count = std::min(ubatch, n - start);
    llm::model::SequenceStep s;
    s.num_new = count;
    s.start_pos = start;
    s.blocks = std::span<const int32_t>(blocks).subspan(0, (start + count + 15) / 16);
    batch.sequences.push_back(s);
    for (int64_t t = 0; t < count; ++t) {
      batch.tokens.push_back(tokens[start + t]);
      batch.positions.push_back(static_cast<int32_t>(start + t));
      batch.logit_rows.push_back(t);
    }
    std::vector<llm::model::LogitsSpec> specs(count);
    std::vector<llm::model::Logits> out;
    const absl::Status status = m.Forward(batch, specs, &out);
    if (!status.ok()) Fail(std::string(status.message()));
    if (absl::GetFlag(FLAGS_logits)) {
      for (const llm::model::Logits& l : out) {
        logits.insert(logits.end(), l.values.begin(), l.values.end());
      }
    }
  }
  const std::filesystem::path dir(out_dir);
  std::filesystem::create_directories(dir / "ours");
  for (const auto& [key, rows] : ours) {
    WriteFile(dir / "ours" / (FileName(key.first, key.second) + ".f32"), rows.data(),
              rows.size() * sizeof(float));
  }
  if (!logits.empty()) {
    WriteFile(dir / "ours" / "result_output.f32", logits.data(), logits.size() * sizeof(float));
  }

  if (absl::GetFlag(FLAGS_reference)) {
    std::map<std::pair<std::string, int64_t>, std::vector<double>> ref;
    llm::model::testing::ReferenceOptions ro;
    ro.q8_activations = absl::GetFlag(FLAGS_reference_q8);
    ro.observer = [&](std::string_view name, int64_t layer, int64_t position,
                      std::span<const double> values) {
      if (!wanted(name)) return;
      std::vector<double>& rows = ref[{std::string(name), layer}];
      if (rows.empty()) rows.resize(n * values.size());
      std::copy(values.begin(), values.end(), rows.begin() + position * values.size());
    };
    const std::vector<std::vector<float>> ref_logits =
        llm::model::testing::ReferenceLogits(*shared, tokens, ro);
    std::filesystem::create_directories(dir / "reference");
    for (const auto& [key, rows] : ref) {
      WriteFile(dir / "reference" / (FileName(key.first, key.second) + ".f64"), rows.data(),
                rows.size() * sizeof(double));
    }
    if (absl::GetFlag(FLAGS_logits)) {
      std::vector<double> all;
      for (const auto& row : ref_logits) all.insert(all.end(), row.begin(), row.end());
      WriteFile(dir / "reference" / "result_output.f64", all.data(), all.size() * sizeof(double));
    }
  }
  nlohmann::json summary;
  summary["tokens"] = n;
  summary["widths"] = widths;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}
