// Server reflection for the servers (ServerRunner registers it): both
// grpc.reflection.v1 (what current grpcurl, grpcui and Postman ask first) and
// grpc.reflection.v1alpha (what older tools ask, and all that gRPC 1.51's own
// reflection plugin serves), one implementation over the generated
// descriptor pool.
//
// Every service the server lists can be described: the project's services
// (their generated code is linked into the server), grpc.health.v1.Health
// (a compiled copy of health.proto is linked for its descriptor: gRPC's
// built-in health service has none) and the two reflection services.
//
// Answers, per the protocol: list_services, file_by_filename,
// file_containing_symbol and file_containing_extension (the file and every
// file it imports, each once per response), all_extension_numbers_of_type;
// NOT_FOUND in error_response for a name the pool does not hold,
// INVALID_ARGUMENT for a request that sets none of them. Files carry no
// source comments (the generated pool keeps none).
//
// Threads: calls run on gRPC's threads; SetServiceNames() from any thread.
// Cost: one lookup in the descriptor pool per request; the stream holds no
// state between requests.
#ifndef LLM_COMMON_GRPC_REFLECTION_H_
#define LLM_COMMON_GRPC_REFLECTION_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace llm {

// The list that list_services answers, filled once the server is built
// (gRPC adds its health service while it starts).
class ServiceNameList {
 public:
  void Set(std::vector<std::string> names);
  // The names once Set() has been called; waits for it up to `timeout` (a
  // request that raced the server's start), then answers what it has.
  std::vector<std::string> Get(absl::Duration timeout) const;

 private:
  mutable absl::Mutex mutex_;
  bool set_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mutex_);
};

// The two reflection services of one server.
class ReflectionServices {
 public:
  ReflectionServices();
  ~ReflectionServices();
  ReflectionServices(const ReflectionServices&) = delete;
  ReflectionServices& operator=(const ReflectionServices&) = delete;

  // To register with the server's builder; owned by this object, which must
  // outlive the server.
  std::vector<grpc::Service*> services() const;
  // The names of the services the server hosts (ServerInitializer's list).
  void SetServiceNames(std::vector<std::string> names) { names_.Set(std::move(names)); }

 private:
  ServiceNameList names_;
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1alpha_;
};

}  // namespace llm

#endif  // LLM_COMMON_GRPC_REFLECTION_H_
