// One HTTP request and its response as the gateway's handlers see them,
// apart from the server that carries them: civetweb's connection
// (civetweb_exchange.h) in llm_gateway, bytes in memory in the fuzzer and
// the handlers' tests.
//
// A handler reads the request (method, path, headers, body), then answers
// once: Respond (a whole response, framed by Content-Length) or StartStream
// followed by any number of Writes (a response whose end is the
// connection's end: server-sent events).
//
// Threads: one request's, on the thread that handles it.
#ifndef LLM_GATEWAY_HTTP_EXCHANGE_H_
#define LLM_GATEWAY_HTTP_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace llm::gateway {

struct HttpHeader {
  std::string_view name;
  std::string_view value;
};

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  virtual std::string_view method() const = 0;
  // The path, without the query string.
  virtual std::string_view path() const = 0;
  // A request header's value (names compare case-insensitively); nullopt
  // when absent.
  virtual std::optional<std::string_view> header(std::string_view name) const = 0;
  // The request's Content-Length; -1 when it has none (no body, or chunked).
  virtual int64_t content_length() const = 0;
  // Up to `size` bytes of the request body into `buffer`: how many, 0 at the
  // end of the body, negative when reading failed (the peer closed, or a
  // read timed out).
  virtual int Read(char* buffer, size_t size) = 0;

  // The whole response. The body is left out for a HEAD request.
  virtual void Respond(int status, std::string_view content_type, std::string_view body,
                       std::span<const HttpHeader> extra_headers = {}) = 0;
  // A streamed response's status and headers (no Content-Length; the
  // connection closes at its end). False when the peer is gone.
  virtual bool StartStream(int status, std::string_view content_type,
                           std::span<const HttpHeader> extra_headers = {}) = 0;
  // A part of a streamed response. False when the peer is gone.
  virtual bool Write(std::string_view data) = 0;
  // Called before the response: the connection closes after it (the
  // request's body was not read, and the client gets no idle connection).
  virtual void CloseAfterResponse() {}
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_HTTP_EXCHANGE_H_
