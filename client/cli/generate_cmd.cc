#include "client/cli/generate_cmd.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "client/cli/constrain_cmd.h"
#include "client/cli/line_reader.h"
#include "client/generate/chat_file.h"
#include "client/generate/chat_session.h"
#include "client/generate/chat_template.h"
#include "client/generate/template_choice.h"
#include "client/generator.h"
#include "client/transport/connect.h"
#include "client/transport/health.h"
#include "client/transport/model_target.h"
#include "common/grpc/security_flags.h"
#include "common/strings.h"

ABSL_FLAG(std::string, tokenizer, "127.0.0.1:50051",
          "generate/chat/health: tokenizer service address.");
ABSL_FLAG(std::string, model, "127.0.0.1:50052",
          "generate/chat/health: model service: HOST:PORT, a comma-separated list of replicas "
          "(sessions are spread over them and each call goes to its session's replica), or "
          "dns:///NAME:PORT (every address NAME resolves to, e.g. a headless Service).");
ABSL_FLAG(std::string, prompt, "",
          "generate: the prompt (the user message in chat mode). Empty: read stdin.");
ABSL_FLAG(std::string, system, "",
          "generate/chat: system message (default: the template's own, if it has one).");
ABSL_FLAG(int, max_tokens, 256, "generate/chat: most tokens to generate per answer (>= 1).");
ABSL_FLAG(double, temperature, 0.8, "generate/chat: sampling temperature; 0 = greedy.");
ABSL_FLAG(int, top_k, 40, "generate/chat: keep the k most probable tokens; 0 = off.");
ABSL_FLAG(double, top_p, 0.95, "generate/chat: nucleus sampling, in (0, 1]; 1 = off.");
ABSL_FLAG(double, min_p, 0.05, "generate/chat: keep tokens with p >= min_p * p_max; 0 = off.");
ABSL_FLAG(double, repeat_penalty, 1.0,
          "generate/chat: repetition penalty over the last 64 tokens (> 0; 1 = off).");
ABSL_FLAG(int64_t, seed, -1,
          "generate/chat: random seed (>= 0 makes a run reproducible; -1: a random one). Chat "
          "turn i uses seed + i.");
ABSL_FLAG(std::vector<std::string>, stop, {},
          "generate/chat: stop string (repeat the flag for several); never printed.");
ABSL_FLAG(bool, chat, false,
          "generate: format the prompt with a chat template (the default whenever one is "
          "chosen: the model's own, --template, or the family default); an error when none is.");
ABSL_FLAG(std::string, template, "",
          "generate/chat: chat template instead of the model's own: a built-in one (chatml, "
          "gemma, llama3, mistral, phi3, qwen, zephyr), raw, or a Jinja file.");
ABSL_FLAG(bool, raw, false, "generate/chat: no chat template: the prompt is the model's input.");
ABSL_FLAG(bool, json, false,
          "generate/chat: one JSON object per token {\"text\",\"token\",\"logprob\"} and a "
          "summary {\"tokens\",\"prompt_tokens\",\"time_to_first_token_ms\","
          "\"tokens_per_second\",\"stop_reason\",\"proposed_tokens\",\"accepted_tokens\"} "
          "per answer.");
ABSL_FLAG(std::string, logits, "auto",
          "generate/chat: logits encoding: auto (the cheapest exact one), full, fp16 or "
          "top-n:N.");
ABSL_FLAG(double, timeout, 60, "deadline of each call, in seconds.");
ABSL_FLAG(std::string, detokenize, "cached",
          "generate/chat: 'cached' (each token's bytes fetched once with the tokenizer's "
          "Decode, then decoded here) or 'stream' (the tokenizer's DecodeStream, one request "
          "per token).");
ABSL_FLAG(bool, lookahead, true,
          "generate/chat: with greedy sampling (no penalties or bias), let the model service "
          "compute each next step before the token arrives (DecodeTokenRequest.lookahead).");
ABSL_FLAG(bool, ignore_eos, false, "generate/chat: do not stop at EOS / EOT (benchmarks).");
ABSL_FLAG(int, speculate, 3,
          "generate/chat: speculative decoding: propose up to N tokens per decode step, found "
          "by n-gram lookup in the conversation, computed in the same step and kept where the "
          "sampler agrees (the same output; about 2.1-2.6x the decode rate on text that "
          "repeats its input, such as edits of quoted code, 1.0-1.15x on free chat with the "
          "default model on 2 CPU threads). 0..16; 0: off.");
ABSL_FLAG(std::string, save, "",
          "chat: after each answer, and at the end, writes the conversation and the model "
          "session's snapshot to this file (for --resume).");
ABSL_FLAG(std::string, resume, "",
          "chat: goes on with the conversation --save wrote to this file: its model session is "
          "imported (no prefill), or, when the server cannot import it (another model, no "
          "snapshots), prefilled again (said on stderr).");
ABSL_FLAG(double, wait, 0, "health: wait up to this many seconds for both services to be SERVING.");
ABSL_FLAG(double, wait_ready, 120,
          "generate/chat: wait up to this many seconds for a service that is still loading (the "
          "model server while it reads its weights), showing the time waited on stderr; 0: do "
          "not wait.");

ABSL_DECLARE_FLAG(bool, json_object);  // constrain_flags.cc

namespace llm::cli {
namespace {

using client::ChatFile;
using client::ChatMessage;
using client::ChatSession;
using client::ChatTemplate;
using client::DecodeChatFile;
using client::EncodeChatFile;
using client::GenerateParams;
using client::GenerateResult;
using client::Generator;
using client::ModelPort;
using client::Session;
using client::TokenEvent;
using client::internal::WithContext;

// The generator whose generation Ctrl-C cancels (null when none runs).
std::atomic<Generator*> active_generator{nullptr};

void OnInterrupt(int) {
  Generator* g = active_generator.load();
  if (g != nullptr && !g->cancel_requested()) {
    g->Cancel();  // first Ctrl-C: end the answer
    return;
  }
  static const char kNewline[] = "\n";
  (void)!write(STDERR_FILENO, kNewline, 1);
  _exit(130);  // second Ctrl-C, or none running
}

void InstallInterruptHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

void Fail(const absl::Status& status) {
  std::fprintf(stderr, "llm: %s\n", std::string(status.message()).c_str());
}

// Reports Connect's wait for a service that is still loading, on stderr: a
// line when the wait begins, then the seconds waited, on one line rewritten
// in place on a terminal or a line every 5 s otherwise.
std::function<void(const client::WaitProgress&)> WaitReporter() {
  struct State {
    bool started = false;
    bool line_open = false;  // a terminal line without its newline yet
    int64_t last = -1;       // the seconds last shown
  };
  return [state = std::make_shared<State>(),
          tty = isatty(STDERR_FILENO) != 0](const client::WaitProgress& p) {
    const std::string service(p.service);
    const std::string address(p.address);
    const int64_t seconds = absl::ToInt64Seconds(p.waited);
    if (!state->started) {
      state->started = true;
      std::fprintf(stderr,
                   "llm: the %s service at %s is still loading; waiting for it (up to %s, "
                   "--wait-ready)\n",
                   service.c_str(), address.c_str(), absl::FormatDuration(p.limit).c_str());
    }
    if (p.done) {
      if (state->line_open) std::fputc('\n', stderr);
      state->line_open = false;
      std::fflush(stderr);
      return;
    }
    if (seconds == state->last) return;
    if (tty) {
      std::fprintf(stderr, "\rllm: waiting for the %s service to load: %lld s", service.c_str(),
                   static_cast<long long>(seconds));
      state->line_open = true;
    } else if (seconds > 0 && seconds % 5 == 0) {
      std::fprintf(stderr, "llm: still waiting for the %s service to load (%lld s)\n",
                   service.c_str(), static_cast<long long>(seconds));
    }
    std::fflush(stderr);
    state->last = seconds;
  };
}

// A message of ValidateParams, which names the API's fields ("top_p must be
// in (0, 1] ..."), naming the command's flags instead ("--top-p must be ...").
std::string NameTheFlag(absl::string_view message) {
  static constexpr std::pair<absl::string_view, absl::string_view> kFlags[] = {
      {"temperature", "--temperature"},
      {"top_k", "--top-k"},
      {"top_p", "--top-p"},
      {"min_p", "--min-p"},
      {"repetition_penalty", "--repeat-penalty"},
      {"max_tokens", "--max-tokens"},
      {"speculate", "--speculate"},
      {"a stop string", "--stop: a stop string"},
  };
  for (const auto& [field, flag] : kFlags) {
    if (absl::StartsWith(message, field) && message.size() > field.size() &&
        message[field.size()] == ' ') {
      return StrCat(flag, message.substr(field.size()));
    }
  }
  return std::string(message);
}

// Sampling and stopping from the flags; InvalidArgument for bad values.
absl::StatusOr<GenerateParams> ParamsFromFlags(const std::vector<std::string>& stop) {
  GenerateParams p;
  p.sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  p.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  p.sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  p.sampling.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  p.sampling.repetition_penalty = static_cast<float>(absl::GetFlag(FLAGS_repeat_penalty));
  const int64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed < -1) return absl::InvalidArgumentError(StrCat("--seed must be >= -1, got ", seed));
  p.sampling.seed =
      seed >= 0 ? static_cast<uint64_t>(seed)
                : (static_cast<uint64_t>(std::random_device()()) << 32) | std::random_device()();
  p.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  p.stop = stop;
  p.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  p.speculate = absl::GetFlag(FLAGS_speculate);
  if (absl::Status s = client::ValidateParams(p); !s.ok()) {
    return absl::InvalidArgumentError(NameTheFlag(s.message()));
  }
  return p;
}

absl::StatusOr<client::ClientOptions> OptionsFromFlags() {
  client::ClientOptions o;
  o.tokenizer_address = absl::GetFlag(FLAGS_tokenizer);
  o.model_address = absl::GetFlag(FLAGS_model);
  const double timeout = absl::GetFlag(FLAGS_timeout);
  if (!(timeout > 0)) {
    return absl::InvalidArgumentError(StrCat("--timeout must be > 0 seconds, got ", timeout));
  }
  o.rpc_timeout = absl::Seconds(timeout);
  const double wait_ready = absl::GetFlag(FLAGS_wait_ready);
  if (!(wait_ready >= 0)) {
    return absl::InvalidArgumentError(
        StrCat("--wait-ready must be >= 0 seconds, got ", wait_ready));
  }
  o.ready_timeout = absl::Seconds(wait_ready);
  o.on_wait = WaitReporter();
  absl::StatusOr<client::SecurityFlags> security = client::SecurityFromFlags();
  if (!security.ok()) return absl::InvalidArgumentError(security.status().message());
  o.tls = security->tls;
  o.tls_server_name = security->server_name;
  o.auth_token = security->token;
  auto mode = client::ParseLogitsMode(absl::GetFlag(FLAGS_logits));
  if (!mode.ok()) return absl::InvalidArgumentError(StrCat("--logits: ", mode.status().message()));
  o.logits = *mode;
  o.lookahead = absl::GetFlag(FLAGS_lookahead);
  const std::string detokenize = absl::GetFlag(FLAGS_detokenize);
  if (detokenize == "stream") {
    o.detokenize = client::ClientOptions::Detokenize::kDecodeStream;
  } else if (detokenize != "cached") {
    return absl::InvalidArgumentError(
        StrCat("--detokenize must be 'cached' or 'stream', got '", detokenize, "'"));
  }
  return o;
}

// Prints one generation's events (plain text or JSON lines) and its summary.
class Printer {
 public:
  explicit Printer(bool json) : json_(json) {}

  void Begin() {
    start_ = absl::Now();
    first_.reset();
    ends_with_newline_ = true;
    printed_ = false;
  }

  void OnToken(const TokenEvent& e) {
    if (e.token >= 0 && !first_) first_ = absl::Now();
    if (json_) {
      nlohmann::json j;
      j["text"] = std::string(e.text);
      if (e.token >= 0) {
        j["token"] = e.token;
        j["logprob"] = e.logprob;
      } else {
        j["token"] = nullptr;
        j["logprob"] = nullptr;
      }
      WriteLine(j);
      return;
    }
    if (e.text.empty()) return;
    std::fwrite(e.text.data(), 1, e.text.size(), stdout);
    std::fflush(stdout);
    ends_with_newline_ = e.text.back() == '\n';
    printed_ = true;
  }

  void End(const GenerateResult& r) {
    const double ttft_ms = absl::ToDoubleMilliseconds((first_ ? *first_ : absl::Now()) - start_);
    if (json_) {
      nlohmann::json j;
      j["tokens"] = r.tokens.size();
      j["prompt_tokens"] = r.prompt_tokens;
      j["time_to_first_token_ms"] = ttft_ms;
      j["tokens_per_second"] = r.tokens_per_second();
      j["stop_reason"] = std::string(client::StopReasonName(r.stop_reason));
      j["session_rebuilds"] = r.session_rebuilds;
      j["proposed_tokens"] = r.proposed_tokens;
      j["accepted_tokens"] = r.accepted_tokens;
      j["forced_tokens"] = r.forced_tokens;
      WriteLine(j);
      return;
    }
    if (!ends_with_newline_ || !printed_) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (isatty(STDERR_FILENO)) {
      const std::string speculation =
          r.proposed_tokens > 0
              ? StrCat(", accepted ", r.accepted_tokens, "/", r.proposed_tokens, " proposed")
              : "";
      std::fprintf(stderr, "[%zu tokens, %.1f tok/s, first token %.0f ms, stop: %s%s]\n",
                   r.tokens.size(), r.tokens_per_second(), ttft_ms,
                   std::string(client::StopReasonName(r.stop_reason)).c_str(), speculation.c_str());
    }
  }

 private:
  static void WriteLine(const nlohmann::json& j) {
    const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }

  const bool json_;
  absl::Time start_;
  std::optional<absl::Time> first_;
  bool ends_with_newline_ = true;
  bool printed_ = false;
};

// The template to use (template_choice.h): raw with --raw; otherwise
// --template, the model's own, or the family default, with a note on stderr
// when it is not the model's own. --chat when that ends in raw text is an
// error (exit 2).
absl::StatusOr<ChatTemplate> ChooseTemplate(const Generator& g) {
  if (absl::GetFlag(FLAGS_raw)) return ChatTemplate::Raw();
  absl::StatusOr<client::TemplateChoice> choice =
      client::ChooseChatTemplate(g.template_info(), absl::GetFlag(FLAGS_template));
  if (!choice.ok()) return choice.status();
  if (choice->chat_template.kind() == ChatTemplate::Kind::kRaw && absl::GetFlag(FLAGS_chat)) {
    return absl::InvalidArgumentError(StrCat("--chat: no chat template for this model",
                                             choice->note.empty() ? "" : ": ", choice->note));
  }
  if (!choice->note.empty()) std::fprintf(stderr, "llm: %s\n", choice->note.c_str());
  return choice->chat_template;
}

// A connected generator and the chat template to use with it.
struct Connection {
  std::unique_ptr<Generator> generator;
  ChatTemplate chat_template;
};

// Connects and chooses the template, or prints why not. Exit status in
// *exit_code on failure: 2 for bad flags or an unusable --chat, 1 when the
// services cannot be reached.
std::optional<Connection> ConnectOrFail(int* exit_code) {
  absl::StatusOr<client::ClientOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    Fail(options.status());
    *exit_code = 2;
    return std::nullopt;
  }
  absl::StatusOr<std::unique_ptr<Generator>> g = Generator::Connect(*options);
  if (!g.ok()) {
    if (absl::IsDeadlineExceeded(g.status()) &&
        absl::StrContains(g.status().message(), "still loading")) {
      Fail(absl::DeadlineExceededError(
          StrCat(g.status().message(), " (--wait-ready ", absl::GetFlag(FLAGS_wait_ready),
                 "); give it longer with a larger --wait-ready, or check the server's log")));
    } else {
      Fail(g.status());
    }
    // A malformed --model is a usage error; anything else is the services'.
    *exit_code = absl::IsInvalidArgument(g.status()) ? 2 : 1;
    return std::nullopt;
  }
  absl::StatusOr<ChatTemplate> tmpl = ChooseTemplate(**g);
  if (!tmpl.ok()) {
    Fail(tmpl.status());
    *exit_code = 2;
    return std::nullopt;
  }
  return Connection{std::move(*g), *std::move(tmpl)};
}

bool ReadAll(std::FILE* in, std::string* out) {
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), in)) > 0) out->append(buf, n);
  return !std::ferror(in);
}

// The reason in WaitUntilServing's error, without its "ADDRESS is not serving
// (...)" around it.
std::string WhyNotServing(const absl::Status& status, const std::string& address) {
  absl::string_view why = status.message();
  const std::string wrapper = StrCat(address, " is not serving (");
  if (absl::StartsWith(why, wrapper) && absl::EndsWith(why, ")")) {
    why.remove_prefix(wrapper.size());
    why.remove_suffix(1);
  }
  return std::string(why);
}

}  // namespace

// The constraint the flags ask for, compiled for the connected model
// (params->constraint); false, with the error said and *exit_code set, when
// it cannot be (2: a usage error or a spec the engine refuses, naming why).
bool ConstrainOrFail(const std::optional<constrain::Spec>& spec, Generator& g,
                     GenerateParams* params, int* exit_code) {
  if (!spec.has_value()) return true;
  absl::StatusOr<std::shared_ptr<const constrain::Constraint>> c =
      g.services().CompileConstraint(*spec);
  if (!c.ok()) {
    Fail(absl::Status(c.status().code(), StrCat("the ", constrain::KindName(spec->kind),
                                                " constraint: ", c.status().message())));
    *exit_code = absl::IsInvalidArgument(c.status()) ? 2 : 1;
    return false;
  }
  params->constraint = *std::move(c);
  return true;
}

int RunGenerate(const std::vector<std::string>& stop, const std::vector<std::string>& choices) {
  if (absl::GetFlag(FLAGS_chat) && absl::GetFlag(FLAGS_raw)) {
    std::fprintf(stderr, "llm generate: give --chat or --raw, not both\n");
    return 2;
  }
  absl::StatusOr<GenerateParams> params = ParamsFromFlags(stop);
  if (!params.ok()) {
    Fail(params.status());
    return 2;
  }
  absl::StatusOr<std::optional<constrain::Spec>> spec =
      ConstraintSpecFromFlags(choices, absl::GetFlag(FLAGS_json_object));
  if (!spec.ok()) {
    Fail(spec.status());
    return 2;
  }
  std::string prompt = absl::GetFlag(FLAGS_prompt);
  if (prompt.empty()) {
    if (isatty(STDIN_FILENO) || !ReadAll(stdin, &prompt) || prompt.empty()) {
      std::fprintf(stderr, "llm generate: --prompt TEXT is required (or a prompt on stdin)\n");
      return 2;
    }
  }
  int exit_code = 0;
  std::optional<Connection> connection = ConnectOrFail(&exit_code);
  if (!connection) return exit_code;
  auto& [g, tmpl] = *connection;
  if (!ConstrainOrFail(*spec, *g, &*params, &exit_code)) return exit_code;
  Printer printer(absl::GetFlag(FLAGS_json));
  const auto on_token = [&](const TokenEvent& e) { printer.OnToken(e); };
  InstallInterruptHandler();
  active_generator.store(g.get());
  printer.Begin();
  absl::StatusOr<GenerateResult> result;
  if (tmpl.kind() == ChatTemplate::Kind::kRaw) {
    client::Session session;
    client::EncodeOptions encode;
    encode.add_bos = g->tokenizer_info().add_bos();
    absl::StatusOr<std::vector<int32_t>> ids = g->Encode(prompt, encode);
    result = ids.ok() ? g->Generate(session, *ids, *params, on_token)
                      : absl::StatusOr<GenerateResult>(ids.status());
    g->Release(session).IgnoreError();
  } else {
    ChatSession chat(g->loop(), tmpl, absl::GetFlag(FLAGS_system));
    result = chat.Send(prompt, *params, on_token);
    chat.ReleaseSession().IgnoreError();
  }
  active_generator.store(nullptr);
  if (!result.ok()) {
    Fail(result.status());
    return absl::IsInvalidArgument(result.status()) ? 2 : 1;
  }
  printer.End(*result);
  return 0;
}

// --save: the conversation and its model session's snapshot (an empty
// one when the server cannot export it: --resume then prefills the tokens),
// written to a temporary file renamed over FILE.
absl::Status SaveChat(const ChatSession& chat, ModelPort& model, const std::string& path) {
  ChatFile file;
  for (const ChatMessage& m : chat.messages()) {
    file.messages.push_back({.role = m.role, .content = m.content});
  }
  file.text = chat.text();
  Session session = chat.session();
  file.tokens = session.tokens;
  if (!session.id.empty() && !session.unsynced) {
    // Rejected proposals after the tokens: rolled back, so that the
    // snapshot holds the tokens and no more.
    absl::Status trimmed = absl::OkStatus();
    if (session.overhang)
      trimmed = model.Truncate(session, static_cast<int64_t>(file.tokens.size()));
    absl::StatusOr<std::string> snapshot =
        trimmed.ok() ? model.ExportSession(session) : absl::StatusOr<std::string>(trimmed);
    if (snapshot.ok()) file.snapshot = *std::move(snapshot);
  }
  const std::string temp = StrCat(path, ".tmp");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    const std::string bytes = EncodeChatFile(file);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.good()) return absl::UnavailableError(StrCat("cannot write ", temp));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(StrCat("cannot rename ", temp, " to ", path));
  }
  return absl::OkStatus();
}

// --resume: the conversation of FILE goes on in `chat`, its model session
// imported, or its tokens prefilled again by the next turn when the import
// fails (said on stderr). INVALID_ARGUMENT for a file that is no chat file.
absl::Status ResumeChat(const std::string& path, ModelPort& model, ChatSession& chat) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("--resume ", path, ": cannot open it"));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<ChatFile> file = DecodeChatFile(bytes);
  if (!file.ok()) return WithContext(file.status(), StrCat("--resume ", path));
  Session session;
  session.tokens = std::move(file->tokens);
  absl::StatusOr<std::string> id =
      file->snapshot.empty()
          ? absl::StatusOr<std::string>(absl::NotFoundError("the file holds no snapshot"))
          : model.ImportSession(file->snapshot);
  if (id.ok()) {
    session.id = *std::move(id);
  } else if (!session.tokens.empty()) {
    std::fprintf(stderr,
                 "llm chat: the model session could not be restored (%s); its %zu tokens are "
                 "prefilled again\n",
                 id.status().ToString().c_str(), session.tokens.size());
  }
  chat.Resume(std::move(file->messages), std::move(file->text), std::move(session));
  return absl::OkStatus();
}

int RunChat(const std::vector<std::string>& stop, const std::vector<std::string>& choices) {
  absl::StatusOr<GenerateParams> params = ParamsFromFlags(stop);
  if (!params.ok()) {
    Fail(params.status());
    return 2;
  }
  absl::StatusOr<std::optional<constrain::Spec>> spec =
      ConstraintSpecFromFlags(choices, absl::GetFlag(FLAGS_json_object));
  if (!spec.ok()) {
    Fail(spec.status());
    return 2;
  }
  int exit_code = 0;
  std::optional<Connection> connection = ConnectOrFail(&exit_code);
  if (!connection) return exit_code;
  auto& [g, tmpl] = *connection;
  if (!ConstrainOrFail(*spec, *g, &*params, &exit_code)) return exit_code;
  LineReader reader;
  const bool interactive = reader.interactive();
  if (interactive) {
    std::fprintf(stderr,
                 "llm chat: %s (%s template). One message per line; Ctrl-C stops an answer, "
                 "Ctrl-C again or Ctrl-D quits.\n",
                 g->model_info().name().c_str(), std::string(tmpl.name()).c_str());
  }
  Printer printer(absl::GetFlag(FLAGS_json));
  const auto on_token = [&](const TokenEvent& e) { printer.OnToken(e); };
  InstallInterruptHandler();
  ChatSession chat(g->loop(), tmpl, absl::GetFlag(FLAGS_system));
  if (const std::string resume = absl::GetFlag(FLAGS_resume); !resume.empty()) {
    if (absl::Status st = ResumeChat(resume, g->loop().model(), chat); !st.ok()) {
      Fail(st);
      return 2;
    }
  }
  const std::string save = absl::GetFlag(FLAGS_save);
  auto save_chat = [&] {
    if (save.empty()) return;
    if (absl::Status st = SaveChat(chat, g->loop().model(), save); !st.ok()) {
      Fail(WithContext(st, "--save"));
      exit_code = 1;
    }
  };
  const uint64_t seed = params->sampling.seed;
  int turn = 0;
  while (true) {
    const std::optional<std::string> read = reader.Read("> ");
    if (!read) break;
    const std::string& line = *read;
    if (line.empty()) continue;
    params->sampling.seed = seed + static_cast<uint64_t>(turn++);
    g->ClearCancel();
    active_generator.store(g.get());
    printer.Begin();
    const int64_t recomputed = chat.recomputed();
    absl::StatusOr<GenerateResult> result = chat.Send(line, *params, on_token);
    active_generator.store(nullptr);
    if (result.ok() && chat.recomputed() != recomputed) {
      std::fprintf(stderr,
                   "llm: the chat template rewrote earlier turns (e.g. dropped an answer's "
                   "reasoning); %lld tokens of the conversation were computed again\n",
                   static_cast<long long>(chat.recomputed() - recomputed));
    }
    if (!result.ok()) {
      Fail(result.status());
      exit_code = 1;
      continue;
    }
    printer.End(*result);
    save_chat();
  }
  if (interactive) std::fputc('\n', stdout);
  save_chat();
  chat.ReleaseSession().IgnoreError();
  return exit_code;
}

int RunHealth() {
  const absl::Duration wait = absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_wait)));
  const std::string tokenizer = absl::GetFlag(FLAGS_tokenizer);
  const std::string model = absl::GetFlag(FLAGS_model);
  if (tokenizer.empty() && model.empty()) {
    std::fprintf(stderr, "llm health: nothing to check: --tokenizer and --model are empty\n");
    return 2;
  }
  struct Check {
    std::string name;     // "tokenizer" or "model"
    std::string address;  // one server
    std::string service;  // the gRPC service it must serve
  };
  std::vector<Check> checks;
  if (!tokenizer.empty()) checks.push_back({"tokenizer", tokenizer, client::kTokenizerServiceName});
  // Every model replica the target names ("": the model is not checked).
  client::ModelTarget target;
  int exit_code = 0;
  if (!model.empty()) {
    absl::StatusOr<client::ModelTarget> parsed = client::ParseModelTarget(model);
    if (!parsed.ok()) {
      std::fprintf(stderr, "llm health: --model: %s\n",
                   std::string(parsed.status().message()).c_str());
      return 2;
    }
    target = *std::move(parsed);
  }
  // A headless Service lists no address until a pod is ready: resolve until
  // --wait runs out.
  const absl::Time give_up = absl::Now() + wait;
  if (!model.empty()) {
    absl::StatusOr<std::vector<std::string>> replicas = client::TargetAddresses(target);
    while ((!replicas.ok() || replicas->empty()) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(500));
      replicas = client::TargetAddresses(target);
    }
    if (!replicas.ok() || replicas->empty()) {
      std::printf("model %s: UNREACHABLE (%s)\n", model.c_str(),
                  replicas.ok() ? "the name resolves to no address"
                                : std::string(replicas.status().message()).c_str());
      exit_code = 1;  // the tokenizer is still checked
    } else {
      for (const std::string& address : *replicas) {
        checks.push_back({"model", address, client::kModelServiceName});
      }
    }
  }
  for (const Check& check : checks) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        client::ChannelFromFlags(check.address, check.name == "model" ? target.dns_host : "");
    if (!channel.ok()) {
      std::fprintf(stderr, "llm health: %s\n", std::string(channel.status().message()).c_str());
      return 2;
    }
    // The named service: the server's overall status ("") says SERVING for
    // whichever service it hosts.
    absl::Status s = client::WaitUntilServing(check.address,
                                              std::max(give_up - absl::Now(), absl::ZeroDuration()),
                                              *channel, check.service);
    if (s.ok()) {
      std::printf("%s %s: SERVING\n", check.name.c_str(), check.address.c_str());
    } else {
      // A server that answered has a connected channel; one that could not
      // be reached (nothing listens, a TLS handshake failed, no route) has
      // not, and is not said to be "not serving".
      const bool reached = (*channel)->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
      std::printf("%s %s: %s (%s)\n", check.name.c_str(), check.address.c_str(),
                  reached ? "NOT SERVING" : "UNREACHABLE", WhyNotServing(s, check.address).c_str());
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace llm::cli
