// libFuzzer target: the gateway's request handling (handler.h) over
// in-memory services (fake_services.h), as a client's bytes reach it.
//
// Input: one byte picks the method and path (every endpoint, Anthropic's
// included, a few wrong methods, an unknown path), one byte whether the request names a
// conversation (X-Session-Id, from a small set, so that turns meet) and
// whether the streamed client goes away after a few writes; the rest is the
// body. Each request runs on a thread with a bounded stack, as civetweb's
// workers are (100 KiB there; 256 KiB here for ASan's larger frames), so
// that an unbounded recursion over a client's input (the crash of issue 28:
// a deeply nested value quoted with a recursive dump()) is a crash here too:
// the deep_* seeds (1,500 levels where each endpoint reads a value) bring
// it back at once if the nesting bound or a bounded quote is lost (tried:
// ASan's stack-overflow in nlohmann's serializer on the first seeds).
//
// Checks: no crash, hang or sanitizer report; every answer is a status
// from 200 to 599 with a JSON body (or an event stream), and nothing is
// left in flight.
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gateway/fake_services.h"
#include "gateway/handler.h"

namespace {

// ASan's redzones make frames several times larger than in the product.
constexpr size_t kStack = 256 * 1024;

struct Route {
  const char* method;
  const char* path;
};
constexpr Route kRoutes[] = {
    {"POST", "/v1/chat/completions"},
    {"POST", "/v1/completions"},
    {"POST", "/tokenize"},
    {"POST", "/detokenize"},
    {"GET", "/v1/models"},
    {"GET", "/v1/models/fake-model"},
    {"GET", "/health"},
    {"GET", "/metrics"},
    {"GET", "/v1/chat/completions"},
    {"TRACE", "/v1/completions"},
    {"POST", "/v1/nothing"},
    {"HEAD", "/health"},
    {"POST", "/v1/messages"},
    {"POST", "/v1/messages/count_tokens"},
    {"GET", "/v1/messages"},
};

llm::gateway::Handler& TheHandler() {
  static llm::gateway::Handler* handler = [] {
    llm::gateway::HandlerOptions options;
    options.max_body_bytes = 8192;
    options.limits.max_n = 2;
    options.limits.max_prompts = 4;
    // A template with tools (Hermes syntax: <tool_call>), showing calls and results.
    absl::StatusOr<llm::client::ChatTemplate> tmpl = llm::client::ChatTemplate::FromJinja(
        "{# <tool_call> #}{% if tools %}{{ tools | tojson }}{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
        "{% for c in m.tool_calls or [] %}{{ c.function.arguments | tojson }}{% endfor %}"
        "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
        "fuzz", "", "</s>");
    if (!tmpl.ok()) std::abort();
    return new llm::gateway::Handler(
        options,
        llm::gateway::testing::FakeServices(
            llm::gateway::testing::ChainModel(/*context=*/96, /*eos_after=*/40)),
        *std::move(tmpl), [] {
          llm::gateway::ServiceHealth h;
          h.tokenizer.emplace_back("t", "SERVING");
          h.model.emplace_back("m", "SERVING");
          return h;
        });
  }();
  return *handler;
}

void* Run(void* p) {
  auto* http = static_cast<llm::gateway::testing::FakeExchange*>(p);
  TheHandler().Handle(*http);
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Route& route = kRoutes[data[0] % std::size(kRoutes)];
  std::vector<std::pair<std::string, std::string>> headers;
  if (data[1] & 0x04) {
    headers.emplace_back("X-Session-Id", std::string("conv-") + char('a' + (data[1] & 3)));
  }
  if (data[1] & 0x08) headers.emplace_back("X-Session-Id", std::string(200, 'x'));
  llm::gateway::testing::FakeExchange http(
      route.method, route.path, std::string(reinterpret_cast<const char*>(data + 2), size - 2),
      headers);
  if (data[1] & 0x10) http.FailWritesAfter(data[1] >> 5);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStack);
  pthread_t thread;
  if (pthread_create(&thread, &attr, &Run, &http) != 0) std::abort();
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);

  if (http.status() < 200 || http.status() > 599) std::abort();
  if (!http.streamed() && std::string_view(route.method) != "HEAD" &&
      std::string_view(route.path) != "/metrics" && !nlohmann::json::accept(http.response())) {
    std::abort();  // every answer but a stream and the metrics is JSON
  }
  if (TheHandler().in_flight() != 0) std::abort();
  return 0;
}
