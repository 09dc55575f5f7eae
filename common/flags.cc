#include "common/flags.h"

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"

namespace llm {

std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage) {
  absl::SetProgramUsageMessage(usage);
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
