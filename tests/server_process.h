// Test support for integration tests of the servers: start a real server
// binary as a child process on a free loopback port, wait until its health
// service says SERVING, stop it with SIGTERM and collect its exit status.
// The health service is called through a generic stub and a few lines of
// protobuf wire format (reflection: common/grpc/reflection_testing.h).
//
// Shared by the integration tests in this folder.
#ifndef LLM_TESTS_SERVER_PROCESS_H_
#define LLM_TESTS_SERVER_PROCESS_H_

#include <fcntl.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "common/test_paths.h"

namespace llm::testing {

using Clock = std::chrono::steady_clock;

inline std::string BinPath(const std::string& name) { return BinaryDir() + "/bin/" + name; }

// Forks and execs argv[0] with the given stdin and stdout (-1: inherit). The
// child gets SIGTERM if this thread dies, so a crashed test leaves no server
// behind. Returns the pid, or -1 with *error set.
inline pid_t Spawn(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd,
                   std::string* error) {
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    *error = StrCat("fork: ", std::strerror(errno));
    return -1;
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(126);
    if (stdin_fd >= 0 && dup2(stdin_fd, STDIN_FILENO) < 0) _exit(126);
    if (stdout_fd >= 0 && dup2(stdout_fd, STDOUT_FILENO) < 0) _exit(126);
    execv(ptrs[0], ptrs.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` until `timeout`; then SIGKILLs it. Returns the wait status,
// or nullopt if it had to be killed.
inline std::optional<int> WaitForExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return StrCat("killed by signal ", WTERMSIG(status));
  return StrCat("wait status ", status);
}

inline bool ExitedZero(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// A server child process (build/bin/<binary>) that prints
// "<binary>: listening on port N" on stdout once it listens.
class ServerProcess {
 public:
  // Starts the server with `flags` on 127.0.0.1:0 and waits for its port
  // line. Returns null with *error set on failure.
  static std::unique_ptr<ServerProcess> Start(const std::string& binary,
                                              const std::vector<std::string>& flags,
                                              std::string* error) {
    std::vector<std::string> argv = {BinPath(binary), "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    if (access(argv[0].c_str(), X_OK) != 0) {
      *error = StrCat(argv[0], " is not built");
      return nullptr;
    }
    int out_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) {
      *error = StrCat("pipe2: ", std::strerror(errno));
      return nullptr;
    }
    const pid_t pid = Spawn(argv, -1, out_pipe[1], error);
    close(out_pipe[1]);
    if (pid < 0) {
      close(out_pipe[0]);
      return nullptr;
    }
    std::unique_ptr<ServerProcess> server(new ServerProcess(binary, pid, out_pipe[0]));
    const std::string line = server->ReadStdoutLine(std::chrono::seconds(60));
    const std::string prefix = binary + ": listening on port ";
    if (line.rfind(prefix, 0) != 0) {
      const std::optional<int> status = server->Terminate(std::chrono::seconds(5));
      *error = StrCat("no port line from ", binary, " (got '", line, "'; ",
                      status ? DescribeWaitStatus(*status) : std::string("had to be killed"), ")");
      return nullptr;
    }
    server->port_ = std::atoi(line.c_str() + prefix.size());
    if (server->port_ <= 0 || server->port_ > 65535) {
      *error = StrCat("bad port line '", line, "'");
      return nullptr;
    }
    return server;
  }

  ~ServerProcess() {
    if (pid_ > 0) Terminate(std::chrono::seconds(10));
    if (stdout_fd_ >= 0) close(stdout_fd_);
  }

  const std::string& binary() const { return binary_; }
  pid_t pid() const { return pid_; }  // -1 once it has exited
  int port() const { return port_; }
  std::string address() const { return StrCat("127.0.0.1:", port_); }

  // Sends `sig` and waits for the exit; SIGKILL after `timeout`. Returns
  // the wait status, or nullopt if the server had to be killed.
  std::optional<int> Terminate(std::chrono::milliseconds timeout, int sig = SIGTERM) {
    if (pid_ <= 0) return std::nullopt;
    kill(pid_, sig);
    const std::optional<int> status = WaitForExit(pid_, timeout);
    pid_ = -1;
    return status;
  }

  // One line of the child's stdout (after the port line: a second port, a
  // note), without the newline; "" on EOF/timeout.
  std::string ReadStdoutLine(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::string line;
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return "";
      pollfd p{stdout_fd_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return "";
      char c;
      const ssize_t n = read(stdout_fd_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return line;
      if (c == '\n') return line;
      line.push_back(c);
    }
  }

 private:
  ServerProcess(std::string binary, pid_t pid, int stdout_fd)
      : binary_(std::move(binary)), pid_(pid), stdout_fd_(stdout_fd) {}

  std::string binary_;
  pid_t pid_;
  int stdout_fd_;
  int port_ = 0;
};

// ---------------------------------------------------------------------------
// Minimal protobuf wire format, for the services without generated stubs.

inline void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline void AppendStringField(std::string* out, uint32_t field, std::string_view value) {
  AppendVarint(out, (field << 3) | 2);
  AppendVarint(out, value.size());
  out->append(value.data(), value.size());
}

inline grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

inline std::string FromByteBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// Waits for the one pending operation on `cq`; true if it was `tag` and ok.
inline bool Await(grpc::CompletionQueue& cq, void* tag) {
  void* got = nullptr;
  bool ok = false;
  if (!cq.Next(&got, &ok)) return false;
  return ok && got == tag;
}

inline void Drain(grpc::CompletionQueue& cq) {
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

// grpc.health.v1.Health/Check. The response's field 1 is the ServingStatus
// enum: 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN.
struct HealthResult {
  grpc::Status status;
  int serving_status = -1;
};

constexpr int kServing = 1;
constexpr int kNotServing = 2;

// One unary call of `method` ("/package.Service/Method") with the serialized
// message `request`; *response: the serialized answer.
inline grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& method, const std::string& request,
                                 std::chrono::milliseconds timeout, std::string* response) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Status status;
  grpc::ByteBuffer buffer;
  {
    auto call = stub.PrepareUnaryCall(&context, method, ToByteBuffer(request), &cq);
    call->StartCall();
    int tag = 0;
    call->Finish(&buffer, &status, &tag);
    if (!Await(cq, &tag) && status.ok()) {
      status = grpc::Status(grpc::StatusCode::UNKNOWN, "completion queue failed");
    }
  }
  Drain(cq);
  if (status.ok()) *response = FromByteBuffer(buffer);
  return status;
}

inline HealthResult CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service, std::chrono::milliseconds timeout) {
  HealthResult result;
  std::string request;
  if (!service.empty()) AppendStringField(&request, 1, service);  // HealthCheckRequest.service
  std::string response;
  result.status =
      RawUnaryCall(channel, "/grpc.health.v1.Health/Check", request, timeout, &response);
  if (!result.status.ok()) return result;
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(response)) {
    result.status = grpc::Status(grpc::StatusCode::INTERNAL, "unparsable HealthCheckResponse");
    return result;
  }
  result.serving_status = 0;  // proto3 default when the field is absent
  for (int i = 0; i < fields.field_count(); ++i) {
    const auto& f = fields.field(i);
    if (f.number() == 1 && f.type() == google::protobuf::UnknownField::TYPE_VARINT) {
      result.serving_status = static_cast<int>(f.varint());
    }
  }
  return result;
}

// Waits until the health service says SERVING.
inline bool WaitUntilServing(const std::shared_ptr<grpc::Channel>& channel,
                             std::chrono::milliseconds timeout, std::string* last_error) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    const HealthResult h = CheckHealth(channel, "", std::chrono::seconds(2));
    if (h.status.ok() && h.serving_status == kServing) return true;
    *last_error = h.status.ok() ? StrCat("serving status ", h.serving_status)
                                : StrCat("health check: ", h.status.error_message());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Starts tokenizer_server (the vocabulary of `model_path`) and model_server
// (`model_path`, 64 MiB of KV cache) and waits until both are SERVING, as the
// gateway's tests need them. "" on success, else what failed (the processes
// started are stopped then).
inline std::string StartTokenizerAndModel(const std::string& model_path,
                                          std::unique_ptr<ServerProcess>* tokenizer,
                                          std::unique_ptr<ServerProcess>* model) {
  std::string error;
  *tokenizer = ServerProcess::Start("tokenizer_server", {"--vocab", model_path}, &error);
  if (*tokenizer == nullptr) return StrCat(error, " (run scripts/fetch-model.sh)");
  *model =
      ServerProcess::Start("model_server", {"--model", model_path, "--kv_cache_mb", "64"}, &error);
  if (*model == nullptr) {
    tokenizer->reset();
    return error;
  }
  for (ServerProcess* s : {tokenizer->get(), model->get()}) {
    auto channel = grpc::CreateChannel(s->address(), grpc::InsecureChannelCredentials());
    if (!WaitUntilServing(channel, std::chrono::seconds(60), &error)) {
      model->reset();
      tokenizer->reset();
      return StrCat(s->binary(), ": ", error);
    }
  }
  return "";
}

// ---------------------------------------------------------------------------
// Servers in test fixtures.

// A started server: the process, a channel to it and a stub of `Service` (a
// generated gRPC service class, e.g. v1::Model).
template <typename Service>
struct ServerState {
  std::unique_ptr<ServerProcess> process;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<typename Service::Stub> stub;
  std::string error;  // why the server is not there
};

// Starts build/bin/<binary> with `flags` and waits up to `serving_timeout`
// for its health service to say SERVING. On failure state->stub stays null
// and state->error says why.
template <typename Service>
void StartServer(ServerState<Service>* state, const std::string& binary,
                 const std::vector<std::string>& flags, std::chrono::milliseconds serving_timeout) {
  state->process = ServerProcess::Start(binary, flags, &state->error);
  if (state->process == nullptr) return;
  state->channel =
      grpc::CreateChannel(state->process->address(), grpc::InsecureChannelCredentials());
  std::string why;
  if (!WaitUntilServing(state->channel, serving_timeout, &why)) {
    state->error = StrCat(binary, " on ", state->process->address(), " never SERVING: ", why);
    state->process->Terminate(std::chrono::seconds(5));
    state->process.reset();
    state->channel.reset();
    return;
  }
  state->stub = Service::NewStub(state->channel);
}

// Stops the server with SIGTERM and checks that it exits with status 0.
template <typename Service>
void StopServerAndExpectCleanExit(ServerState<Service>* state) {
  state->stub.reset();
  state->channel.reset();
  if (state->process == nullptr) return;
  const std::string binary = state->process->binary();
  const std::optional<int> status = state->process->Terminate(std::chrono::seconds(15));
  state->process.reset();
  ASSERT_TRUE(status.has_value()) << binary << " did not exit within 15 s of SIGTERM";
  EXPECT_TRUE(ExitedZero(*status)) << binary << " after SIGTERM: " << DescribeWaitStatus(*status);
}

// Base of the fixtures that talk to the server in state(). SetUp fails the
// test while that server is not running.
template <typename Service>
class ServerTestBase : public ::testing::Test {
 public:
  using State = ServerState<Service>;

 protected:
  virtual State& state() const = 0;

  void SetUp() override { ASSERT_NE(state().stub, nullptr) << state().error; }

  typename Service::Stub& stub() const { return *state().stub; }
  const std::shared_ptr<grpc::Channel>& channel() const { return state().channel; }
  std::string address() const { return state().process->address(); }
};

// A fixture whose suite shares one server. `Base` is a ServerTestBase or
// derives from one; `Suite`, the fixture itself, has a public
// `static void StartSuiteServer(State*)`, which SetUpTestSuite calls.
// TearDownTestSuite stops the server and checks that it exits with status 0.
template <typename Suite, typename Base>
class SuiteServerTest : public Base {
 public:
  using State = typename Base::State;

  static void SetUpTestSuite() {
    state_ = new State();
    Suite::StartSuiteServer(state_);
  }

  static void TearDownTestSuite() {
    StopServerAndExpectCleanExit(state_);
    delete state_;
    state_ = nullptr;
  }

 protected:
  State& state() const override { return *state_; }

 private:
  static inline State* state_ = nullptr;
};

}  // namespace llm::testing

#endif  // LLM_TESTS_SERVER_PROCESS_H_
