#include "common/grpc/server_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus metrics on (HTTP, text format at /metrics); port 0 "
          "picks a free port (printed on startup after the gRPC port line); empty: no metrics.");
ABSL_FLAG(std::string, log_level, "info",
          "Request log level: error, warning, info or debug. Every call is logged as one "
          "key=value line on stderr (service, method, session, tokens, duration_ms, status): "
          "OK calls at info, INTERNAL/UNKNOWN/DATA_LOSS at error, other failures at warning.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the server: serve TLS (with --tls_key). Empty: plaintext.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle: mutual TLS, every client must present a certificate signed by it "
          "(needs --tls_cert and --tls_key).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding a bearer token: every call except health checks (grpc.health.v1) and "
          "reflection must carry the metadata 'authorization: Bearer <token>', else "
          "UNAUTHENTICATED. Empty: no token.");
