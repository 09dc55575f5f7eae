#include "common/flags.h"

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/synchronization/mutex.h"

namespace llm {
namespace {

// --help lists the flags defined in this project. (Abseil's default lists
// only those of a file named after the program, and every main here is
// main.cc, so --help listed none.)
bool IsOwnFlag(absl::string_view path) { return path.find("absl/") == absl::string_view::npos; }

}  // namespace

std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage) {
  // Debian builds Abseil without NDEBUG, so absl::Mutex (gRPC's locks too)
  // would run its debug deadlock detector on every acquisition: a global
  // lock-order graph updated under a global lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = IsOwnFlag;
  config.contains_helpshort_flags = IsOwnFlag;
  absl::SetFlagsUsageConfig(config);
  // Rewrite "--foo-bar[=v]" as "--foo_bar[=v]"; stop at a bare "--".
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-' || a[1] != '-') continue;
    const size_t end = a.find('=');
    for (size_t j = 2; j < std::min(end, a.size()); ++j) {
      if (a[j] == '-') a[j] = '_';
    }
  }
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), ptrs.data());
  return std::vector<std::string>(rest.begin(), rest.end());
}

}  // namespace llm
