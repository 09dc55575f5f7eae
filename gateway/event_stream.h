// A streamed response as server-sent events (text/event-stream), as
// OpenAI's streaming endpoints send them: the headers once, each event as
// "data: <json>\n\n", "data: [DONE]\n\n" at the end. A comment line
// (": \n\n") is written when a token adds no event, so that a client that
// went away is noticed within a token or two (the first write after the
// peer closes may still succeed).
//
// Named events (Anthropic's streams): each event is written as "event:
// <its \"type\">\ndata: <json>\n\n", and Done() writes nothing (the last
// event, message_stop, ends such a stream).
//
// Once a write fails the stream is dead: later writes are skipped, alive()
// is false, and the caller stops generating.
//
// Threads: one request's. Ownership: borrows the exchange.
#ifndef LLM_GATEWAY_EVENT_STREAM_H_
#define LLM_GATEWAY_EVENT_STREAM_H_

#include <nlohmann/json.hpp>
#include <vector>

#include "gateway/http_exchange.h"

namespace llm::gateway {

class EventStream {
 public:
  explicit EventStream(HttpExchange& http, bool named_events = false)
      : http_(http), named_events_(named_events) {}

  // The response's status line and headers.
  bool Start();
  // Each event as "data: <json>\n\n" (named: "event: <type>\n" first),
  // then `events` is cleared.
  bool Send(std::vector<nlohmann::json>& events);
  // A comment: nothing for the client, a write to notice one that is gone.
  bool Ping();
  // The end: "data: [DONE]\n\n" (named: nothing).
  bool Done();
  bool alive() const { return alive_; }

 private:
  bool Write(std::string_view data);

  HttpExchange& http_;
  const bool named_events_;
  bool alive_ = true;
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_EVENT_STREAM_H_
