#include "client/tokenize_cmd.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "client/security_flags.h"
#include "common/grpc/grpc_status.h"
#include "common/strings.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tokenizer_svc/service/tokenizer_service.h"
#include "tokenizer_svc/tokenizer.h"

ABSL_FLAG(std::string, vocab, "",
          "tokenize/detokenize in process: vocabulary file (.tiktoken or .gguf).");
ABSL_FLAG(std::string, server, "",
          "tokenize/detokenize through the tokenizer service at this address.");
ABSL_FLAG(bool, jsonl, true,
          "tokenize/detokenize: JSON lines on stdin and stdout (the only format).");
ABSL_FLAG(bool, add_bos, false, "tokenize: prepend the vocabulary's BOS token.");
ABSL_FLAG(std::string, allowed_special, "",
          "tokenize: comma-separated special tokens to recognize, or 'all'. Default: none "
          "(special-token text is encoded as ordinary text).");
ABSL_FLAG(std::string, algorithm, "bpe",
          "tokenize: 'bpe' (exact, the model's tokenization) or 'longest-match' (the seed "
          "article's greedy trie match; NOT the model's tokenization).");
ABSL_FLAG(int, deadline_ms, 10000, "--server: deadline of each call.");

namespace llm::cli {
namespace {

// Either an in-process tokenizer or a stub for the service.
class Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create() {
    auto b = std::unique_ptr<Backend>(new Backend());
    const std::string vocab = absl::GetFlag(FLAGS_vocab);
    const std::string server = absl::GetFlag(FLAGS_server);
    if (vocab.empty() == server.empty()) {
      return absl::InvalidArgumentError("give exactly one of --vocab PATH or --server ADDR");
    }
    if (!vocab.empty()) {
      auto tok = tok::Tokenizer::Load({.path = vocab});
      if (!tok.ok()) return tok.status();
      b->tokenizer_ = std::move(*tok);
    } else {
      absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = client::ChannelFromFlags(server);
      if (!channel.ok()) return channel.status();
      b->stub_ = v1::Tokenizer::NewStub(*channel);
    }
    return b;
  }

  absl::StatusOr<std::vector<uint32_t>> Encode(const std::string& text,
                                               const v1::EncodeOptions& options) {
    if (tokenizer_) return tokenizer_->Encode(text, FromProto(options));
    v1::EncodeRequest request;
    request.set_text(text);
    *request.mutable_options() = options;
    v1::EncodeResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::Status s = stub_->Encode(&context, request, &response);
    if (!s.ok()) return FromGrpcStatus(s);
    return std::vector<uint32_t>(response.ids().begin(), response.ids().end());
  }

  absl::StatusOr<std::string> Decode(const std::vector<uint32_t>& ids) {
    if (tokenizer_) return tokenizer_->Decode(ids);
    v1::DecodeRequest request;
    request.mutable_ids()->Assign(ids.begin(), ids.end());
    v1::DecodeResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::Status s = stub_->Decode(&context, request, &response);
    if (!s.ok()) return FromGrpcStatus(s);
    return response.text();
  }

 private:
  Backend() = default;
  static void SetDeadline(grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(absl::GetFlag(FLAGS_deadline_ms)));
  }
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::unique_ptr<v1::Tokenizer::Stub> stub_;
};

bool ReadLine(std::FILE* in, std::string* line) {
  line->clear();
  int c;
  while ((c = std::fgetc(in)) != EOF) {
    if (c == '\n') return true;
    line->push_back(static_cast<char>(c));
  }
  return !line->empty();
}

void WriteLine(std::FILE* out, const nlohmann::json& j) {
  const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fwrite(s.data(), 1, s.size(), out);
  std::fputc('\n', out);
}

// Runs `handle` on every input line; writes its result or {"error": ...}.
template <typename Handle>
int ForEachLine(std::FILE* in, std::FILE* out, Handle&& handle) {
  if (!absl::GetFlag(FLAGS_jsonl)) {
    std::fprintf(stderr, "llm: only --jsonl input is supported\n");
    return 2;
  }
  auto backend = Backend::Create();
  if (!backend.ok()) {
    std::fprintf(stderr, "llm: %s\n", std::string(backend.status().message()).c_str());
    return 2;
  }
  const bool interactive = isatty(fileno(out));
  int failures = 0;
  std::string line;
  size_t line_no = 0;
  while (ReadLine(in, &line)) {
    ++line_no;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    absl::StatusOr<nlohmann::json> result =
        j.is_object()
            ? handle(**backend, j)
            : absl::StatusOr<nlohmann::json>(absl::InvalidArgumentError("not a JSON object"));
    if (!result.ok()) {
      ++failures;
      const std::string msg = StrCat("line ", line_no, ": ", result.status().message());
      std::fprintf(stderr, "llm: %s\n", msg.c_str());
      WriteLine(out, nlohmann::json{{"error", msg}});
    } else {
      WriteLine(out, *result);
    }
    if (interactive) std::fflush(out);
  }
  std::fflush(out);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int RunTokenize(std::FILE* in, std::FILE* out) {
  v1::EncodeOptions options;
  options.set_add_bos(absl::GetFlag(FLAGS_add_bos));
  const std::string allowed = absl::GetFlag(FLAGS_allowed_special);
  if (allowed == "all") {
    options.set_allow_all_special(true);
  } else if (!allowed.empty()) {
    for (const std::string& s : std::vector<std::string>(absl::StrSplit(allowed, ','))) {
      options.add_allowed_special(s);
    }
  }
  const std::string algorithm = absl::GetFlag(FLAGS_algorithm);
  if (algorithm == "longest-match" || algorithm == "longest_match") {
    options.set_algorithm(v1::ALGORITHM_LONGEST_MATCH);
  } else if (algorithm != "bpe") {
    std::fprintf(stderr, "llm: --algorithm must be 'bpe' or 'longest-match'\n");
    return 2;
  }
  return ForEachLine(in, out,
                     [&](Backend& b, const nlohmann::json& j) -> absl::StatusOr<nlohmann::json> {
                       auto it = j.find("text");
                       if (it == j.end() || !it->is_string()) {
                         return absl::InvalidArgumentError("expected {\"text\": \"...\"}");
                       }
                       auto ids = b.Encode(it->get<std::string>(), options);
                       if (!ids.ok()) return ids.status();
                       return nlohmann::json{{"ids", *ids}};
                     });
}

int RunDetokenize(std::FILE* in, std::FILE* out) {
  return ForEachLine(in, out,
                     [&](Backend& b, const nlohmann::json& j) -> absl::StatusOr<nlohmann::json> {
                       auto it = j.find("ids");
                       if (it == j.end() || !it->is_array()) {
                         return absl::InvalidArgumentError("expected {\"ids\": [...]}");
                       }
                       std::vector<uint32_t> ids;
                       for (const auto& v : *it) {
                         if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) {
                           return absl::InvalidArgumentError("ids must be non-negative integers");
                         }
                         ids.push_back(v.get<uint32_t>());
                       }
                       auto text = b.Decode(ids);
                       if (!text.ok()) return text.status();
                       return nlohmann::json{{"text", *text}};
                     });
}

}  // namespace llm::cli
