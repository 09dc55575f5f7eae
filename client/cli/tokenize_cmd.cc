#include "client/cli/tokenize_cmd.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/security_flags.h"
#include "common/strings.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tokenizer_svc/json_lines.h"
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
ABSL_FLAG(int, deadline_ms, 0, "tokenize/detokenize: deprecated; use --timeout SECONDS.");
ABSL_DECLARE_FLAG(double, timeout);  // generate_cmd.cc: the deadline of each call

namespace llm::cli {
namespace {

// The deadline of each call to the service: --timeout seconds, or the
// deprecated --deadline-ms when given (with a note). InvalidArgument for a
// value that is not > 0.
absl::StatusOr<absl::Duration> CallTimeout() {
  if (const int ms = absl::GetFlag(FLAGS_deadline_ms); ms != 0) {
    if (ms < 0) return absl::InvalidArgumentError(StrCat("--deadline-ms must be > 0, got ", ms));
    std::fprintf(stderr, "llm: --deadline-ms is deprecated; use --timeout SECONDS\n");
    return absl::Milliseconds(ms);
  }
  const double seconds = absl::GetFlag(FLAGS_timeout);
  if (!(seconds > 0)) {
    return absl::InvalidArgumentError(StrCat("--timeout must be > 0 seconds, got ", seconds));
  }
  return absl::Seconds(seconds);
}

// Either an in-process tokenizer or a stub for the service.
class Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create() {
    auto b = std::unique_ptr<Backend>(new Backend());
    absl::StatusOr<absl::Duration> timeout = CallTimeout();
    if (!timeout.ok()) return timeout.status();
    b->timeout_ = *timeout;
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

  // *ids is replaced by the ids of `text`; `local` is FromProto(options).
  absl::Status Encode(std::string_view text, const v1::EncodeOptions& options,
                      const tok::EncodeOptions& local, std::vector<uint32_t>* ids) {
    ids->clear();
    if (tokenizer_) return tokenizer_->EncodeTo(text, local, ids);
    v1::EncodeRequest request;
    request.set_text_bytes(text.data(), text.size());
    *request.mutable_options() = options;
    v1::EncodeResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::Status s = stub_->Encode(&context, request, &response);
    if (!s.ok()) return FromGrpcStatus(s);
    ids->assign(response.ids().begin(), response.ids().end());
    return absl::OkStatus();
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
  void SetDeadline(grpc::ClientContext& context) const {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  }
  absl::Duration timeout_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::unique_ptr<v1::Tokenizer::Stub> stub_;
};

// Appends `j` as one line, as it has always been written (the fast writers in
// tokenizer_svc/json_lines.h give the same bytes).
void AppendJsonLine(const nlohmann::json& j, std::string* out) {
  out->append(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  out->push_back('\n');
}

// A line that the fast parsers in json_lines.h left to nlohmann::json: the
// object, or the error for a line that is none.
absl::StatusOr<nlohmann::json> ParseObject(std::string_view line) {
  nlohmann::json j =
      nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  return j;
}

// Output is written in blocks of this size (and after every line when stdout
// is a terminal).
constexpr size_t kOutputBlock = 1 << 16;

// Whether a line's error is the line's own (a value the vocabulary or the
// service refuses: exit status 2) rather than the service's (unreachable,
// timed out, refusing the token: exit status 1).
bool IsBadInput(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsOutOfRange(status) ||
         absl::IsFailedPrecondition(status) || absl::IsResourceExhausted(status);
}

// Runs `handle` on every input line: it appends its answer line to the output
// or returns the error, which gives the line {"error": "line N: ..."} (and
// the same on stderr), so that outputs stay aligned with inputs. Exit status:
// 1 if a call to the service failed, else 2 if a line was bad, else 0.
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
  int service_failures = 0;
  int bad_lines = 0;
  std::string output;
  output.reserve(2 * kOutputBlock);
  const auto flush = [&] {
    std::fwrite(output.data(), 1, output.size(), out);
    output.clear();
  };
  // getline reads what is there (a pipe's or a terminal's line at a time), so
  // a line is answered without waiting for more input.
  char* buffer = nullptr;
  size_t capacity = 0;
  size_t line_no = 0;
  ssize_t got;
  while ((got = getline(&buffer, &capacity, in)) > 0) {
    std::string_view line(buffer, static_cast<size_t>(got));
    if (line.back() == '\n') line.remove_suffix(1);
    ++line_no;
    if (line.empty()) continue;
    if (const absl::Status status = handle(**backend, line, &output); !status.ok()) {
      ++(IsBadInput(status) ? bad_lines : service_failures);
      const std::string msg = StrCat("line ", line_no, ": ", status.message());
      std::fprintf(stderr, "llm: %s\n", msg.c_str());
      AppendJsonLine(nlohmann::json{{"error", msg}}, &output);
    }
    if (interactive) {
      flush();
      std::fflush(out);
    } else if (output.size() >= kOutputBlock) {
      flush();
    }
  }
  std::free(buffer);
  flush();
  std::fflush(out);
  return service_failures > 0 ? 1 : bad_lines > 0 ? 2 : 0;
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
  const tok::EncodeOptions local = FromProto(options);  // converted once
  std::string scratch;
  std::vector<uint32_t> ids;
  return ForEachLine(
      in, out, [&](Backend& b, std::string_view line, std::string* out_lines) -> absl::Status {
        std::string_view text;
        std::string parsed;  // the text, when nlohmann::json parsed the line
        if (!tok::jsonl::ParseTextObject(line, &scratch, &text)) {
          absl::StatusOr<nlohmann::json> j = ParseObject(line);
          if (!j.ok()) return j.status();
          auto it = j->find("text");
          if (it == j->end() || !it->is_string()) {
            return absl::InvalidArgumentError("expected {\"text\": \"...\"}");
          }
          parsed = it->get<std::string>();
          text = parsed;
        }
        if (absl::Status s = b.Encode(text, options, local, &ids); !s.ok()) return s;
        tok::jsonl::AppendIdsLine(ids, out_lines);
        return absl::OkStatus();
      });
}

int RunDetokenize(std::FILE* in, std::FILE* out) {
  std::vector<uint32_t> ids;
  return ForEachLine(
      in, out, [&](Backend& b, std::string_view line, std::string* out_lines) -> absl::Status {
        if (!tok::jsonl::ParseIdsObject(line, &ids)) {
          absl::StatusOr<nlohmann::json> j = ParseObject(line);
          if (!j.ok()) return j.status();
          auto it = j->find("ids");
          if (it == j->end() || !it->is_array()) {
            return absl::InvalidArgumentError("expected {\"ids\": [...]}");
          }
          ids.clear();
          for (const auto& v : *it) {
            if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) {
              return absl::InvalidArgumentError("ids must be non-negative integers");
            }
            ids.push_back(v.get<uint32_t>());
          }
        }
        absl::StatusOr<std::string> text = b.Decode(ids);
        if (!text.ok()) return text.status();
        if (!tok::jsonl::AppendTextLine(*text, out_lines)) {
          AppendJsonLine(nlohmann::json{{"text", *text}}, out_lines);
        }
        return absl::OkStatus();
      });
}

}  // namespace llm::cli
