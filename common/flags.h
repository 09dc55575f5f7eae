// Command-line parsing shared by every binary: Abseil flags, with
// `--max-tokens` accepted as a spelling of `--max_tokens` (Abseil's names use
// underscores; people type dashes), and the usage errors, --help and
// --version handled here rather than by Abseil:
//
//   - a usage error (an unknown flag, with the nearest flag's name as a
//     suggestion; a bad or missing value, naming the flag) prints one line on
//     stderr and exits with status 2 (Abseil exits 1, the status every binary
//     here gives to a failure at run time);
//   - --help (-h, --helpfull, --helpshort) prints the usage message and this
//     project's flags, without Abseil's "Flags from /source/path.cc" headers,
//     and exits 0;
//   - --version prints the project's version and build type and exits 0.
#ifndef LLM_COMMON_FLAGS_H_
#define LLM_COMMON_FLAGS_H_

#include <string>
#include <string_view>
#include <vector>

namespace llm {

// Sets the usage message, parses argv (exits as described above) and returns
// the positional arguments, argv[0] first.
std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage);

struct FlagParseOptions {
  // The name in messages ("llm generate"); empty: argv[0]'s base name.
  std::string program;
  // Printed by --help before the flags.
  std::string usage;
  // The flags this command takes (Abseil names, with underscores), in the
  // order --help lists them, and the names an unknown flag is compared with
  // for a suggestion; --help writes them with dashes. Empty: every flag
  // defined in this project (not Abseil's own), sorted by name, written with
  // underscores.
  std::vector<std::string> flags;
  // Whether another flag of the binary that is not in `flags` is a usage
  // error ("does not apply here"); false: it is accepted.
  bool reject_unlisted = false;
};

// The outcome of TryParseFlags.
struct FlagParseResult {
  enum class Kind { kOk, kHelp, kVersion, kUsageError };
  Kind kind = Kind::kOk;
  std::vector<std::string> positional;  // kOk: argv[0] first, then the positional arguments
  std::string message;                  // kHelp: the help text; kUsageError: the error
};

// Parses `args` (argv[0] first) into the flags without exiting or printing:
// ParseFlags is this plus the printing and the exit. Sets the values of the
// flags it parses (so a kUsageError may leave some set).
FlagParseResult TryParseFlags(const std::vector<std::string>& args,
                              const FlagParseOptions& options);

// Parses like TryParseFlags; prints the help text (stdout, exit 0), the
// version (stdout, exit 0) or the usage error (stderr, exit 2).
std::vector<std::string> ParseFlagsOrExit(const std::vector<std::string>& args,
                                          const FlagParseOptions& options);

// "0.1.0 (RelWithDebInfo build)": the project's version (CMake's
// project(VERSION)) and build type, and ", assertions on" when NDEBUG is not
// defined.
std::string VersionString();

// The help text of `flags` (Abseil names): for each, its spelling with
// dashes, its default and its help, wrapped to 100 columns.
std::string FlagsHelp(const std::vector<std::string>& flags);

// The name among `candidates` nearest to `name` (edit distance, at most
// about a third of the name's length), or the one it is a prefix of; "" when
// none is, or `name` is shorter than 3 characters.
std::string NearestName(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace llm

#endif  // LLM_COMMON_FLAGS_H_
