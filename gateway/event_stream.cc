#include "gateway/event_stream.h"

#include "common/strings.h"
#include "gateway/openai_api.h"

namespace llm::gateway {

bool EventStream::Start() {
  const HttpHeader headers[] = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  alive_ = http_.StartStream(200, "text/event-stream", headers);
  return alive_;
}

bool EventStream::Write(std::string_view data) {
  if (alive_ && !http_.Write(data)) alive_ = false;
  return alive_;
}

bool EventStream::Send(std::vector<nlohmann::json>& events) {
  for (const nlohmann::json& j : events) {
    if (named_events_ && j.contains("type") && j["type"].is_string()) {
      Write(
          StrCat("event: ", j["type"].get_ref<const std::string&>(), "\ndata: ", Dump(j), "\n\n"));
    } else {
      Write(StrCat("data: ", Dump(j), "\n\n"));
    }
  }
  events.clear();
  return alive_;
}

bool EventStream::Ping() { return Write(": \n\n"); }

bool EventStream::Done() { return named_events_ ? alive_ : Write("data: [DONE]\n\n"); }

}  // namespace llm::gateway
