#include "common/grpc/reflection.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>
#include <utility>

#include "common/strings.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace llm {
namespace {

namespace pb = google::protobuf;

// What one request gets, before it is written in either version's message.
struct Answer {
  enum class Kind { kFiles, kExtensionNumbers, kServices, kError };
  Kind kind = Kind::kError;
  std::vector<std::string> items;  // serialized FileDescriptorProtos, or service names
  std::string base_type;           // kExtensionNumbers
  std::vector<int> numbers;        // kExtensionNumbers
  grpc::StatusCode error_code = grpc::StatusCode::OK;
  std::string error_message;
};

Answer Error(grpc::StatusCode code, std::string message) {
  Answer a;
  a.error_code = code;
  a.error_message = std::move(message);
  return a;
}

Answer NotFound(std::string_view what, std::string_view name) {
  return Error(grpc::StatusCode::NOT_FOUND,
               StrCat(what, " '", name, "' is not known to this server"));
}

const pb::DescriptorPool& Pool() { return *pb::DescriptorPool::generated_pool(); }

// `file` first, then every file it imports, directly or not, each once.
Answer Files(const pb::FileDescriptor* file) {
  Answer a;
  a.kind = Answer::Kind::kFiles;
  std::set<std::string> seen;
  std::vector<const pb::FileDescriptor*> todo = {file};
  while (!todo.empty()) {
    const pb::FileDescriptor* f = todo.back();
    todo.pop_back();
    if (!seen.insert(f->name()).second) continue;
    pb::FileDescriptorProto proto;
    f->CopyTo(&proto);
    f->CopyJsonNameTo(&proto);
    a.items.push_back(proto.SerializeAsString());
    for (int i = f->dependency_count(); i-- > 0;) todo.push_back(f->dependency(i));
  }
  return a;
}

Answer FileByName(const std::string& name) {
  const pb::FileDescriptor* file = Pool().FindFileByName(name);
  return file != nullptr ? Files(file) : NotFound("file", name);
}

Answer FileContainingSymbol(const std::string& symbol) {
  const pb::FileDescriptor* file = Pool().FindFileContainingSymbol(symbol);
  return file != nullptr ? Files(file) : NotFound("symbol", symbol);
}

Answer FileContainingExtension(const std::string& type, int number) {
  const pb::Descriptor* message = Pool().FindMessageTypeByName(type);
  if (message == nullptr) return NotFound("message type", type);
  const pb::FieldDescriptor* extension = Pool().FindExtensionByNumber(message, number);
  if (extension == nullptr) return NotFound("extension", StrCat(type, " ", number));
  return Files(extension->file());
}

Answer ExtensionNumbers(const std::string& type) {
  const pb::Descriptor* message = Pool().FindMessageTypeByName(type);
  if (message == nullptr) return NotFound("message type", type);
  std::vector<const pb::FieldDescriptor*> extensions;
  Pool().FindAllExtensions(message, &extensions);
  Answer a;
  a.kind = Answer::Kind::kExtensionNumbers;
  a.base_type = type;
  for (const pb::FieldDescriptor* e : extensions) a.numbers.push_back(e->number());
  return a;
}

// One version of the service: the generated Service, Request and Response of
// grpc.reflection.v1 or v1alpha, whose members have the same names.
template <typename Service, typename Request, typename Response>
class Reflection final : public Service {
 public:
  explicit Reflection(const ServiceNameList* names) : names_(names) {}

  grpc::Status ServerReflectionInfo(grpc::ServerContext*,
                                    grpc::ServerReaderWriter<Response, Request>* stream) override {
    Request request;
    while (stream->Read(&request)) {
      Response response;
      response.set_valid_host(request.host());
      *response.mutable_original_request() = request;
      Write(Lookup(request), &response);
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  Answer Lookup(const Request& r) const {
    switch (r.message_request_case()) {
      case Request::kFileByFilename:
        return FileByName(r.file_by_filename());
      case Request::kFileContainingSymbol:
        return FileContainingSymbol(r.file_containing_symbol());
      case Request::kFileContainingExtension:
        return FileContainingExtension(r.file_containing_extension().containing_type(),
                                       r.file_containing_extension().extension_number());
      case Request::kAllExtensionNumbersOfType:
        return ExtensionNumbers(r.all_extension_numbers_of_type());
      case Request::kListServices: {
        Answer a;
        a.kind = Answer::Kind::kServices;
        a.items = names_->Get(absl::Seconds(5));
        return a;
      }
      default:
        return Error(grpc::StatusCode::INVALID_ARGUMENT,
                     "the request sets none of file_by_filename, file_containing_symbol, "
                     "file_containing_extension, all_extension_numbers_of_type, list_services");
    }
  }

  static void Write(const Answer& a, Response* response) {
    switch (a.kind) {
      case Answer::Kind::kFiles:
        for (const std::string& f : a.items) {
          response->mutable_file_descriptor_response()->add_file_descriptor_proto(f);
        }
        return;
      case Answer::Kind::kExtensionNumbers: {
        auto* numbers = response->mutable_all_extension_numbers_response();
        numbers->set_base_type_name(a.base_type);
        for (int n : a.numbers) numbers->add_extension_number(n);
        return;
      }
      case Answer::Kind::kServices: {
        auto* list = response->mutable_list_services_response();
        for (const std::string& name : a.items) list->add_service()->set_name(name);
        return;
      }
      case Answer::Kind::kError:
        response->mutable_error_response()->set_error_code(static_cast<int>(a.error_code));
        response->mutable_error_response()->set_error_message(a.error_message);
        return;
    }
  }

  const ServiceNameList* names_;
};

namespace v1 = grpc::reflection::v1;
namespace v1alpha = grpc::reflection::v1alpha;
using ReflectionV1 = Reflection<v1::ServerReflection::Service, v1::ServerReflectionRequest,
                                v1::ServerReflectionResponse>;
using ReflectionV1Alpha =
    Reflection<v1alpha::ServerReflection::Service, v1alpha::ServerReflectionRequest,
               v1alpha::ServerReflectionResponse>;

}  // namespace

void ServiceNameList::Set(std::vector<std::string> names) {
  absl::MutexLock lock(&mutex_);
  names_ = std::move(names);
  set_ = true;
}

std::vector<std::string> ServiceNameList::Get(absl::Duration timeout) const {
  absl::MutexLock lock(&mutex_);
  mutex_.AwaitWithTimeout(absl::Condition(&set_), timeout);
  return names_;
}

ReflectionServices::ReflectionServices()
    : v1_(std::make_unique<ReflectionV1>(&names_)),
      v1alpha_(std::make_unique<ReflectionV1Alpha>(&names_)) {
  // Uses health.pb.o, so that the linker keeps it: its static initializer
  // adds grpc/health/v1/health.proto to the generated pool.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
}

ReflectionServices::~ReflectionServices() = default;

std::vector<grpc::Service*> ReflectionServices::services() const {
  return {v1_.get(), v1alpha_.get()};
}

}  // namespace llm
