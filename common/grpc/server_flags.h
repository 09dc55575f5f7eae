// Flags that both servers take, defined once: metrics, request logs, TLS and
// the bearer token. A server links llm_server_flags and reads them with
// absl::GetFlag(FLAGS_...) after llm::ParseFlags.
#ifndef LLM_COMMON_GRPC_SERVER_FLAGS_H_
#define LLM_COMMON_GRPC_SERVER_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, metrics_listen);
ABSL_DECLARE_FLAG(std::string, log_level);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, auth_token_file);

#endif  // LLM_COMMON_GRPC_SERVER_FLAGS_H_
