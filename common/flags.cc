#include "common/flags.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#ifndef LLM_VERSION
#define LLM_VERSION "unknown"
#endif
#ifndef LLM_BUILD_TYPE
#define LLM_BUILD_TYPE ""
#endif

namespace llm {
namespace {

constexpr size_t kHelpColumns = 100;
constexpr size_t kHelpIndent = 6;

// A flag defined in this project (Abseil's own --flagfile, --helpfull, ...
// and retired flags are not).
bool IsOwnFlag(const absl::CommandLineFlag& flag) {
  return !flag.IsRetired() && flag.Filename().find("absl/") == std::string::npos;
}

std::vector<std::string> OwnFlagNames() {
  std::vector<std::string> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsOwnFlag(*flag)) names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// What a value of `flag` looks like, for the message about a bad one.
std::string Expected(const absl::CommandLineFlag& flag) {
  const auto range = [](auto lo, auto hi) {
    return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  };
  if (flag.IsOfType<bool>()) return "true or false";
  if (flag.IsOfType<int32_t>()) {
    return range(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  }
  if (flag.IsOfType<int64_t>()) {
    return range(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  }
  if (flag.IsOfType<uint32_t>()) return range(0u, std::numeric_limits<uint32_t>::max());
  if (flag.IsOfType<uint64_t>()) return range(0ull, std::numeric_limits<uint64_t>::max());
  if (flag.IsOfType<double>() || flag.IsOfType<float>()) return "a number";
  if (flag.IsOfType<absl::Duration>()) return "a duration such as 90s, 10m or 1h";
  return "";
}

// Abseil's flags that read more flags from a file or the environment.
bool IsBuiltinFileFlag(const std::string& name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv";
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

FlagParseResult UsageError(std::string message) {
  FlagParseResult r;
  r.kind = FlagParseResult::Kind::kUsageError;
  r.message = std::move(message);
  return r;
}

void Wrap(std::string_view text, std::string* out) {
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(pos, end - pos);
    if (!line.empty() && kHelpIndent + line.size() + 1 + word.size() > kHelpColumns) {
      out->append(kHelpIndent, ' ').append(line).push_back('\n');
      line.clear();
    }
    if (!line.empty()) line.push_back(' ');
    line.append(word);
    pos = end + 1;
  }
  if (!line.empty()) out->append(kHelpIndent, ' ').append(line).push_back('\n');
}

std::string FlagsHelpImpl(const std::vector<std::string>& flags, bool dashes) {
  std::string out;
  for (const std::string& name : flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    std::string value = flag->DefaultValue();
    if (flag->IsOfType<std::string>()) value = "\"" + value + "\"";
    out += "  --" + (dashes ? Dashed(name) : name) + " (default " + value + ")\n";
    Wrap(flag->Help(), &out);
  }
  return out;
}

}  // namespace

std::string VersionString() {
  std::string s = LLM_VERSION;
  const std::string type = LLM_BUILD_TYPE;
  s += " (" + (type.empty() ? std::string("unknown") : type) + " build";
#ifndef NDEBUG
  s += ", assertions on";
#endif
  return s + ")";
}

std::string FlagsHelp(const std::vector<std::string>& flags) { return FlagsHelpImpl(flags, true); }

std::string NearestName(std::string_view name, const std::vector<std::string>& candidates) {
  if (name.size() < 3) return "";  // "-x" is near every one-letter flag
  std::string best;
  size_t best_distance = std::max<size_t>(1, (name.size() + 2) / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(name, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  if (!best.empty()) return best;
  // A unique prefix ("temp" for "temperature").
  for (const std::string& c : candidates) {
    if (c.rfind(name, 0) != 0) continue;
    if (!best.empty()) return "";
    best = c;
  }
  return best;
}

FlagParseResult TryParseFlags(const std::vector<std::string>& args,
                              const FlagParseOptions& options) {
  const std::string program =
      !options.program.empty() ? options.program : BaseName(args.empty() ? "" : args[0]);
  const std::vector<std::string> own = OwnFlagNames();
  const std::vector<std::string>& allowed = options.flags.empty() ? own : options.flags;
  const bool dashes = !options.flags.empty();  // the llm command line documents dashes
  FlagParseResult result;
  if (!args.empty()) result.positional.push_back(args[0]);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      result.positional.insert(result.positional.end(),
                               args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      result.positional.push_back(arg);
      continue;
    }
    // "-name", "--name", "--name=value"; dashes in the name read as underscores.
    const size_t start = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    const bool has_value = eq != std::string::npos;
    const std::string spelled = arg.substr(0, has_value ? eq : arg.size());  // "--max-tokens"
    std::string name = arg.substr(start, (has_value ? eq : arg.size()) - start);
    std::replace(name.begin(), name.end(), '-', '_');
    std::string value = has_value ? arg.substr(eq + 1) : "";
    if (name == "help" || name == "h" || name == "helpfull" || name == "helpshort") {
      result.kind = FlagParseResult::Kind::kHelp;
      result.message = options.usage;
      if (!result.message.empty() && result.message.back() != '\n') result.message += '\n';
      const std::string flags = FlagsHelpImpl(allowed, dashes);
      if (!flags.empty()) result.message += "\nFlags:\n" + flags;
      return result;
    }
    if (name == "version") {
      result.kind = FlagParseResult::Kind::kVersion;
      result.message = program + " " + VersionString() + "\n";
      return result;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if ((flag == nullptr || flag->IsRetired()) && name.rfind("no", 0) == 0) {
      absl::CommandLineFlag* positive = absl::FindCommandLineFlag(name.substr(2));
      if (positive != nullptr && positive->IsOfType<bool>()) {
        flag = positive;
        name = name.substr(2);
        negated = true;
      }
    }
    const bool known = flag != nullptr && IsOwnFlag(*flag);
    const bool listed = known && std::find(allowed.begin(), allowed.end(), name) != allowed.end();
    if (!listed && !(known && !options.reject_unlisted)) {
      if (known) {
        return UsageError(program + ": " + spelled + " does not apply here (see " + program +
                          " --help)");
      }
      const std::string near = NearestName(name, allowed);
      std::string message = program + ": unknown flag " + spelled;
      if (!near.empty()) {
        const bool user_dashes = spelled.find('-', start) != std::string::npos ||
                                 (dashes && spelled.find('_', start) == std::string::npos);
        message += "; did you mean --" + (user_dashes ? Dashed(near) : near) + "?";
      } else {
        message += " (see " + program + " --help)";
      }
      return UsageError(message);
    }
    if (flag->IsOfType<bool>()) {
      if (negated) {
        if (has_value) return UsageError(program + ": " + spelled + " takes no value");
        value = "false";
      } else if (!has_value) {
        value = "true";
      }
    } else if (!has_value) {
      if (i + 1 >= args.size()) {
        return UsageError(program + ": " + spelled + " needs a value");
      }
      value = args[++i];
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      std::string expected = Expected(*flag);
      return UsageError(program + ": bad value '" + value + "' for " + spelled +
                        (expected.empty() ? ": " + error : ": expected " + expected));
    }
  }
  return result;
}

std::vector<std::string> ParseFlagsOrExit(const std::vector<std::string>& args,
                                          const FlagParseOptions& options) {
  // Debian builds Abseil without NDEBUG, so absl::Mutex (gRPC's locks too)
  // would run its debug deadlock detector on every acquisition: a global
  // lock-order graph updated under a global lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (!options.usage.empty()) absl::SetProgramUsageMessage(options.usage);
  FlagParseResult r = TryParseFlags(args, options);
  switch (r.kind) {
    case FlagParseResult::Kind::kOk:
      return std::move(r.positional);
    case FlagParseResult::Kind::kHelp:
    case FlagParseResult::Kind::kVersion:
      std::fputs(r.message.c_str(), stdout);
      std::fflush(stdout);
      std::exit(0);
    case FlagParseResult::Kind::kUsageError:
      std::fprintf(stderr, "%s\n", r.message.c_str());
      std::exit(2);
  }
  std::exit(2);
}

std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage) {
  std::vector<std::string> args(argv, argv + argc);
  // Abseil's --flagfile / --fromenv / --tryfromenv read flags from elsewhere:
  // left to Abseil, as before (its usage errors then exit 1).
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    std::string name = args[i].substr(args[i].find_first_not_of('-') == std::string::npos
                                          ? args[i].size()
                                          : args[i].find_first_not_of('-'));
    name = name.substr(0, name.find('='));
    if (!IsBuiltinFileFlag(name)) continue;
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    absl::SetProgramUsageMessage(usage);
    for (size_t j = 1; j < args.size() && args[j] != "--"; ++j) {  // "--foo-bar" -> "--foo_bar"
      std::string& a = args[j];
      if (a.size() < 3 || a[0] != '-' || a[1] != '-') continue;
      std::replace(a.begin() + 2,
                   a.begin() + static_cast<std::ptrdiff_t>(std::min(a.find('='), a.size())), '-',
                   '_');
    }
    std::vector<char*> ptrs;
    for (auto& a : args) ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), ptrs.data());
    return std::vector<std::string>(rest.begin(), rest.end());
  }
  FlagParseOptions options;
  options.usage = usage;
  return ParseFlagsOrExit(args, options);
}

}  // namespace llm
