#include "client/transport/health.h"

#include <grpcpp/generic/generic_stub.h>

#include <vector>

#include "absl/time/clock.h"
#include "common/grpc/grpc_status.h"
#include "common/strings.h"

namespace llm::client {
namespace {

// Reads a varint at s[*pos]; false if truncated.
bool ReadVarint(const std::string& s, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < s.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(s[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout) {
  // HealthCheckRequest { string service = 1; }
  std::string request;
  if (!service.empty()) {
    request.push_back(static_cast<char>((1 << 3) | 2));
    uint64_t n = service.size();
    while (n >= 0x80) {
      request.push_back(static_cast<char>((n & 0x7F) | 0x80));
      n >>= 7;
    }
    request.push_back(static_cast<char>(n));
    request += service;
  }
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::Status status;
  grpc::ByteBuffer response;
  {
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", buffer, &queue);
    call->StartCall();
    int tag = 0;
    call->Finish(&response, &status, &tag);
    void* got = nullptr;
    bool ok = false;
    queue.Next(&got, &ok);
  }
  queue.Shutdown();
  void* tag;
  bool ok;
  while (queue.Next(&tag, &ok)) {
  }
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  // HealthCheckResponse { ServingStatus status = 1; } (absent: UNKNOWN)
  ServingStatus result = ServingStatus::kUnknown;
  for (size_t pos = 0; pos < bytes.size();) {
    uint64_t key = 0, value = 0;
    if (!ReadVarint(bytes, &pos, &key)) break;
    if ((key & 7) != 0 || !ReadVarint(bytes, &pos, &value)) break;  // only varints expected
    if ((key >> 3) == 1) result = static_cast<ServingStatus>(value);
  }
  return result;
}

std::string WrongServiceMessage(const std::shared_ptr<grpc::Channel>& channel, Service expected,
                                absl::Duration timeout) {
  const bool tokenizer = expected == Service::kTokenizer;
  const std::string want = tokenizer ? kTokenizerServiceName : kModelServiceName;
  const std::string other = tokenizer ? kModelServiceName : kTokenizerServiceName;
  absl::StatusOr<ServingStatus> s = CheckHealth(channel, other, timeout);
  if (s.ok()) {
    return StrCat("this address serves the ", tokenizer ? "model" : "tokenizer", ", not the ",
                  tokenizer ? "tokenizer" : "model");
  }
  return StrCat("this address does not serve ", want);
}

namespace {

std::string StatusName(ServingStatus s) {
  switch (s) {
    case ServingStatus::kUnknown:
      return "UNKNOWN";
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return StrCat("serving status ", static_cast<int>(s));
}

}  // namespace

absl::Status WaitUntilServing(const std::string& address, absl::Duration timeout,
                              std::shared_ptr<grpc::Channel> channel, const std::string& service) {
  if (channel == nullptr)
    channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  const absl::Time give_up = absl::Now() + timeout;
  std::string last;
  while (true) {
    const absl::Duration left = std::max(give_up - absl::Now(), absl::Milliseconds(100));
    absl::StatusOr<ServingStatus> s =
        CheckHealth(channel, service, std::min(left, absl::Seconds(5)));
    if (s.ok() && *s == ServingStatus::kServing) return absl::OkStatus();
    if (!s.ok() && absl::IsNotFound(s.status()) && !service.empty()) {
      // The server is up and does not host `service`.
      const Service expected =
          service == kTokenizerServiceName ? Service::kTokenizer : Service::kModel;
      return absl::NotFoundError(WrongServiceMessage(channel, expected, absl::Seconds(5)));
    }
    last = s.ok() ? StatusName(*s) : std::string(s.status().message());
    if (absl::Now() >= give_up) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::UnavailableError(StrCat(address, " is not serving (", last, ")"));
}

}  // namespace llm::client
