// HttpExchange (http_exchange.h) over one civetweb connection, for the
// request a worker thread is handling.
//
// Threads: the worker's. Ownership: borrows the connection.
#ifndef LLM_GATEWAY_CIVETWEB_EXCHANGE_H_
#define LLM_GATEWAY_CIVETWEB_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "gateway/http_exchange.h"

struct mg_connection;

namespace llm::gateway {

class CivetwebExchange : public HttpExchange {
 public:
  explicit CivetwebExchange(mg_connection* conn);

  std::string_view method() const override { return method_; }
  std::string_view path() const override { return path_; }
  std::optional<std::string_view> header(std::string_view name) const override;
  int64_t content_length() const override { return content_length_; }
  int Read(char* buffer, size_t size) override;
  void Respond(int status, std::string_view content_type, std::string_view body,
               std::span<const HttpHeader> extra_headers) override;
  bool StartStream(int status, std::string_view content_type,
                   std::span<const HttpHeader> extra_headers) override;
  bool Write(std::string_view data) override;
  void CloseAfterResponse() override;

  // Whether the response had a Content-Length (Respond), so that the
  // connection may stay open for another request.
  bool framed() const { return framed_; }

 private:
  mg_connection* const conn_;
  std::string_view method_;
  std::string_view path_;
  int64_t content_length_ = -1;
  bool framed_ = false;
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_CIVETWEB_EXCHANGE_H_
