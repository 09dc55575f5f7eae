// In-memory services and HTTP exchanges for the gateway's handler tests and
// its fuzzer: no gRPC, no sockets.
//
// ByteTokenizer: one token per byte (ids 0..255), and kEos (256, "</s>",
// read from that text when special tokens are allowed). ChainModel: the
// client's FakeModel with the argmax after token t (t + 1) % 256 (so greedy
// "a" continues "bcd..."), and kEos after `eos_after` tokens of a session;
// clearing its `sessions` is a restarted server (the next call on one is
// NOT_FOUND, and the client rebuilds it).
//
// Threads: one test's (the tokenizer is thread-safe, the model is not).
// FakeExchange is one request's.
#ifndef LLM_GATEWAY_FAKE_SERVICES_H_
#define LLM_GATEWAY_FAKE_SERVICES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "client/generate/cached_text.h"
#include "client/generate/detokenizer.h"
#include "client/generate/fake_ports.h"
#include "client/services.h"
#include "common/strings.h"
#include "gateway/http_exchange.h"

namespace llm::gateway::testing {

inline constexpr int32_t kEos = 256;
inline constexpr int32_t kVocab = 257;
inline constexpr char kEosText[] = "</s>";

class ByteTokenizer : public client::TokenizerPort {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const client::EncodeOptions& options) override {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size(); ++i) {
      if (options.allow_special && text.substr(i).starts_with(kEosText)) {
        ids.push_back(kEos);
        i += std::string_view(kEosText).size() - 1;
      } else {
        ids.push_back(static_cast<unsigned char>(text[i]));
      }
    }
    return ids;
  }
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) override {
    std::string text;
    for (int32_t id : ids) {
      if (id < 0 || id >= kVocab) return absl::InvalidArgumentError(StrCat("no token ", id));
      text += id == kEos ? std::string(kEosText) : std::string(1, static_cast<char>(id));
    }
    return text;
  }
  absl::StatusOr<std::string> TokenBytes(int32_t id) override { return cache_.Get(id); }
  absl::StatusOr<std::unique_ptr<client::TextStream>> OpenText(int32_t) override {
    return std::make_unique<client::CachedText>(cache_);
  }
  std::span<const int32_t> end_ids() const override { return end_ids_; }
  bool add_bos() const override { return false; }

 private:
  client::TokenBytesCache cache_{
      [this](int32_t id) { return Decode(std::span<const int32_t>(&id, 1)); }};
  const std::vector<int32_t> end_ids_ = {kEos};
};

// Logits over the fake vocabulary whose argmax is `token` (10 against 0).
inline v1::Logits ArgmaxLogits(int32_t token) {
  std::vector<float> values(kVocab, 0.0f);
  values[token] = 10.0f;
  v1::Logits logits;
  logits.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  logits.set_float32(std::string(reinterpret_cast<const char*>(values.data()), 4 * values.size()));
  return logits;
}

// A model whose greedy answer continues the alphabet: the argmax after token
// t is (t + 1) % 256, and kEos once a session holds `eos_after` tokens
// (client/generate/fake_ports.h's FakeModel over this vocabulary).
inline std::unique_ptr<client::testing::FakeModel> ChainModel(int64_t context = 512,
                                                              int eos_after = 1000) {
  auto model = std::make_unique<client::testing::FakeModel>(/*log=*/nullptr);
  model->vocab = kVocab;
  model->context = context;
  model->capacity = context;
  model->logits_after = [eos_after](const std::vector<int32_t>& held) {
    const int32_t last = held.empty() ? 0 : held.back();
    return ArgmaxLogits(static_cast<int64_t>(held.size()) >= eos_after ? kEos : (last + 1) % 256);
  };
  return model;
}

// Services over a ByteTokenizer and `model` (owned by them).
inline std::shared_ptr<client::Services> FakeServices(
    std::unique_ptr<client::testing::FakeModel> model) {
  v1::InfoResponse tokenizer;
  tokenizer.set_vocab_size(kVocab);
  tokenizer.set_eos_id(kEos);
  v1::SpecialToken* eos = tokenizer.add_special_tokens();
  eos->set_id(kEos);
  eos->set_text(kEosText);
  v1::ModelInfo info;
  info.set_name("fake model");
  info.set_architecture("llama");
  info.set_vocab_size(kVocab);
  info.set_context_length(model->context_length());
  client::ClientOptions options;
  options.lookahead = false;
  return std::make_shared<client::Services>(options, std::make_unique<ByteTokenizer>(),
                                            std::move(model), std::move(tokenizer),
                                            std::move(info));
}

// A request in memory; the response as written.
class FakeExchange : public HttpExchange {
 public:
  FakeExchange(std::string method, std::string path, std::string body = "",
               std::vector<std::pair<std::string, std::string>> headers = {})
      : method_(std::move(method)),
        path_(std::move(path)),
        body_(std::move(body)),
        headers_(std::move(headers)) {}

  std::string_view method() const override { return method_; }
  std::string_view path() const override { return path_; }
  std::optional<std::string_view> header(std::string_view name) const override {
    for (const auto& [n, v] : headers_) {
      if (absl::EqualsIgnoreCase(n, absl::string_view(name.data(), name.size())))
        return std::string_view(v);
    }
    return std::nullopt;
  }
  int64_t content_length() const override { return static_cast<int64_t>(body_.size()); }
  int Read(char* buffer, size_t size) override {
    const size_t n = std::min(size, body_.size() - read_);
    std::copy_n(body_.data() + read_, n, buffer);
    read_ += n;
    return static_cast<int>(n);
  }
  void Respond(int status, std::string_view content_type, std::string_view body,
               std::span<const HttpHeader> extra) override {
    status_ = status;
    content_type_ = content_type;
    response_ = body;
    for (const HttpHeader& h : extra) response_headers_.emplace_back(h.name, h.value);
  }
  bool StartStream(int status, std::string_view content_type,
                   std::span<const HttpHeader> extra) override {
    status_ = status;
    content_type_ = content_type;
    streamed_ = true;
    for (const HttpHeader& h : extra) response_headers_.emplace_back(h.name, h.value);
    return Write("");
  }
  bool Write(std::string_view data) override {
    if (writes_left_ == 0) return false;
    if (writes_left_ > 0) --writes_left_;
    response_ += data;
    return true;
  }

  int status() const { return status_; }
  const std::string& response() const { return response_; }
  bool streamed() const { return streamed_; }
  std::optional<std::string> response_header(std::string_view name) const {
    for (const auto& [n, v] : response_headers_) {
      if (absl::EqualsIgnoreCase(n, absl::string_view(name.data(), name.size()))) return v;
    }
    return std::nullopt;
  }
  // The client goes away after this many more writes (-1: never).
  void FailWritesAfter(int n) { writes_left_ = n; }

 private:
  const std::string method_;
  const std::string path_;
  const std::string body_;
  const std::vector<std::pair<std::string, std::string>> headers_;
  size_t read_ = 0;
  int status_ = 0;
  std::string content_type_;
  std::string response_;
  std::vector<std::pair<std::string, std::string>> response_headers_;
  bool streamed_ = false;
  int writes_left_ = -1;
};

}  // namespace llm::gateway::testing

#endif  // LLM_GATEWAY_FAKE_SERVICES_H_
