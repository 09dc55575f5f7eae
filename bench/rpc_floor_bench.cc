// rpc_floor_bench: what one decode round trip costs in gRPC alone, with no
// model behind it: the floor under the end-to-end figure of e2e_bench.py.
//
// It starts itself a second time as a server (--serve) whose DecodeStream
// answers every request with a top-1 logits response (the message a greedy
// `llm generate` gets), then drives one stream from this process the way the
// client library does (client/transport/async_call.h's BidiStream: write the token,
// read the response, one at a time) and reports, per round trip, the wall
// time and the CPU time of each process (every thread, gRPC's own included;
// the server's from /proc, in clock ticks: use enough round trips). Both
// sides use the services' gRPC setup (common/flags.cc, ServerRunner).
//
//   build/bin/rpc_floor_bench [--round_trips 20000]        back to back
//   build/bin/rpc_floor_bench --round_trips 1000 --step_us 5000 [--spin]
//
// --step_us paces the round trips like a decode step: the server answers
// that long after each request (sleeping in its read callback, or spinning
// with --spin). Beside `llm-bench -n 2048` running on every core, it shows
// what the round trip costs while the cores compute (bench/README.md).
//
// Prints one JSON line: microseconds per round trip.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/transport/async_call.h"
#include "common/flags.h"
#include "common/grpc/server_runner.h"
#include "llm/v1/model.grpc.pb.h"

ABSL_FLAG(int, round_trips, 20000, "Timed round trips (after 1000 untimed ones).");
ABSL_FLAG(int, step_us, 0,
          "The server answers each request this long after it arrives, as after a decode "
          "step: the client then waits between round trips as it does while generating.");
ABSL_FLAG(bool, spin, false, "With --step_us: the server spins through the wait (computes).");
ABSL_FLAG(bool, serve, false, "Internal: run as the echo server (prints its port).");

extern char** environ;

namespace llm {
namespace {

namespace v1 = ::llm::v1;

// DecodeStream that answers each request with a fixed-shape top-1 response.
class EchoService final : public v1::Model::CallbackService {
  grpc::ServerBidiReactor<v1::DecodeTokenRequest, v1::DecodeTokenResponse>* DecodeStream(
      grpc::CallbackServerContext*) override {
    class Reactor final
        : public grpc::ServerBidiReactor<v1::DecodeTokenRequest, v1::DecodeTokenResponse> {
     public:
      Reactor() { StartRead(&request_); }
      void OnReadDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status::OK);
          return;
        }
        if (const int step_us = absl::GetFlag(FLAGS_step_us); step_us > 0) {
          if (absl::GetFlag(FLAGS_spin)) {
            const absl::Time end = absl::Now() + absl::Microseconds(step_us);
            while (absl::Now() < end) {
            }
          } else {
            std::this_thread::sleep_for(std::chrono::microseconds(step_us));
          }
        }
        response_.Clear();
        response_.set_num_tokens(++tokens_);
        v1::Logits* logits = response_.mutable_logits();
        logits->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
        logits->add_top_ids(request_.token());
        logits->add_top_logits(17.5f);
        logits->set_log_sum_exp(18.25f);
        StartWrite(&response_);
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
          return;
        }
        StartRead(&request_);
      }
      void OnDone() override { delete this; }

     private:
      v1::DecodeTokenRequest request_;
      v1::DecodeTokenResponse response_;
      int64_t tokens_ = 0;
    };
    return new Reactor();
  }
};

int Serve() {
  // Ends with the driver, however the driver ends.
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) return 1;
  BlockTerminationSignals();
  EchoService service;
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<ServerRunner>> runner = ServerRunner::Start(options, {&service});
  if (!runner.ok()) {
    std::fprintf(stderr, "rpc_floor_bench: %s\n", runner.status().ToString().c_str());
    return 1;
  }
  (*runner)->SetServing(true);
  std::printf("%d\n", (*runner)->port());
  std::fflush(stdout);
  (*runner)->WaitForTerminationSignal();
  return 0;
}

// CPU seconds (user + system, all threads) of process `pid` so far.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces): state is field 3,
  // utime field 14, stime field 15.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

int Drive(const char* self) {
  // The server: this binary again, its port on a pipe.
  int out[2];
  if (pipe(out) != 0) {
    std::perror("rpc_floor_bench: pipe");
    return 1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, out[1]);
  std::string exe = self, serve = "--serve",
              step = "--step_us=" + std::to_string(absl::GetFlag(FLAGS_step_us)),
              spin = absl::GetFlag(FLAGS_spin) ? "--spin" : "--nospin";
  std::vector<char*> argv = {exe.data(), serve.data(), step.data(), spin.data(), nullptr};
  pid_t server = 0;
  const int spawned =
      posix_spawn(&server, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    std::fprintf(stderr, "rpc_floor_bench: cannot start the server: %s\n", std::strerror(spawned));
    close(out[0]);
    return 1;
  }
  auto stop_server = [server] {
    kill(server, SIGTERM);
    waitpid(server, nullptr, 0);
  };
  FILE* port_in = fdopen(out[0], "r");
  int port = 0;
  const bool started = port_in != nullptr && std::fscanf(port_in, "%d", &port) == 1 && port > 0;
  if (port_in != nullptr) {
    std::fclose(port_in);
  } else {
    close(out[0]);
  }
  if (!started) {
    std::fprintf(stderr, "rpc_floor_bench: the server did not start\n");
    stop_server();
    return 1;
  }

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Model::NewStub(channel);
  using Stream = client::internal::BidiStream<v1::DecodeTokenRequest, v1::DecodeTokenResponse>;
  Stream stream("echo server", absl::Seconds(30), absl::Now() + absl::Hours(1));
  int rc = 0;
  absl::Status s = stream.Start([&](grpc::ClientContext* c, grpc::CompletionQueue* q) {
    return stub->PrepareAsyncDecodeStream(c, q);
  });
  v1::DecodeTokenRequest request;
  request.set_session_id("0123456789abcdef");
  request.mutable_logits()->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  request.mutable_logits()->set_top_n(1);
  auto round_trips = [&](int n) {
    for (int i = 0; s.ok() && i < n; ++i) {
      request.set_token(i % 49152);
      s = stream.Write(request);
      if (!s.ok()) break;
      stream.StartRead();
      s = stream.AwaitRead();
    }
  };
  round_trips(1000);
  const int n = absl::GetFlag(FLAGS_round_trips);
  const double client0 = SelfCpuSeconds(), server0 = ProcessCpuSeconds(server);
  const absl::Time t0 = absl::Now();
  round_trips(n);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double client = SelfCpuSeconds() - client0,
               server_cpu = ProcessCpuSeconds(server) - server0;
  if (s.ok()) s = stream.Close();
  if (!s.ok()) {
    std::fprintf(stderr, "rpc_floor_bench: %s\n", s.ToString().c_str());
    rc = 1;
  } else {
    const double us = 1e6 / n;
    std::printf(
        "{\"round_trips\":%d,\"wall_us\":%.1f,\"client_cpu_us\":%.1f,\"server_cpu_us\":%.1f,"
        "\"total_cpu_us\":%.1f}\n",
        n, wall * us, client * us, server_cpu * us, (client + server_cpu) * us);
  }
  stop_server();
  return rc;
}

}  // namespace
}  // namespace llm

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv,
                  "Usage: rpc_floor_bench [--round_trips 20000] [--step_us 0 [--spin]]\n"
                  "The CPU and wall time of one DecodeStream round trip in gRPC alone.");
  if (absl::GetFlag(FLAGS_round_trips) < 1 || absl::GetFlag(FLAGS_step_us) < 0) {
    std::fprintf(stderr, "rpc_floor_bench: --round_trips must be >= 1 and --step_us >= 0\n");
    return 2;
  }
  return absl::GetFlag(FLAGS_serve) ? llm::Serve() : llm::Drive(argv[0]);
}
