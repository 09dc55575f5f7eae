#include "gateway/civetweb_exchange.h"

#include <civetweb.h>

#include <string>

#include "common/strings.h"

namespace llm::gateway {
CivetwebExchange::CivetwebExchange(mg_connection* conn) : conn_(conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  method_ = info->request_method != nullptr ? info->request_method : "";
  path_ = info->local_uri != nullptr ? info->local_uri : "";
  content_length_ = info->content_length;
}

std::optional<std::string_view> CivetwebExchange::header(std::string_view name) const {
  const char* value = mg_get_header(conn_, std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string_view(value);
}

int CivetwebExchange::Read(char* buffer, size_t size) { return mg_read(conn_, buffer, size); }

void CivetwebExchange::Respond(int status, std::string_view content_type, std::string_view body,
                               std::span<const HttpHeader> extra_headers) {
  const std::string length = std::to_string(body.size());
  mg_response_header_start(conn_, status);
  mg_response_header_add(conn_, "Content-Type", content_type.data(),
                         static_cast<int>(content_type.size()));
  mg_response_header_add(conn_, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn_, "Cache-Control", "no-store", -1);
  for (const HttpHeader& h : extra_headers) {
    const std::string name(h.name);  // civetweb copies it
    mg_response_header_add(conn_, name.c_str(), h.value.data(), static_cast<int>(h.value.size()));
  }
  mg_response_header_send(conn_);
  if (method_ != "HEAD") Write(body);
  framed_ = true;
}

bool CivetwebExchange::StartStream(int status, std::string_view content_type,
                                   std::span<const HttpHeader> extra_headers) {
  std::string head = StrCat("HTTP/1.1 ", status, " ", mg_get_response_code_text(conn_, status),
                            "\r\nContent-Type: ", content_type, "\r\n");
  for (const HttpHeader& h : extra_headers) head += StrCat(h.name, ": ", h.value, "\r\n");
  head += "Connection: close\r\n\r\n";
  return Write(head);
}

void CivetwebExchange::CloseAfterResponse() { mg_disable_connection_keep_alive(conn_); }

bool CivetwebExchange::Write(std::string_view data) {
  return mg_write(conn_, data.data(), data.size()) == static_cast<int>(data.size());
}

}  // namespace llm::gateway
