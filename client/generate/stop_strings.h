// Stop strings over streamed text, with hold-back: text is released only when
// no stop string can still begin inside it, so a stop string never reaches
// the output, even when it is split across tokens.
//
//   StopStringMatcher m({"\n\n", "User:"});
//   for each text delta d:  StopStringMatcher::Step s = m.Feed(d);
//                           emit(s.released); if (s.stopped) break;
//   at the end of the stream:  emit(m.Finish());
//
// Invariant: the held text is the longest suffix of the output so far that is
// a proper prefix of some stop string. Every occurrence of a stop string
// therefore starts inside the held text or the new delta, and Feed finds the
// earliest one. Released text is the output exactly, cut before the first
// stop string. With valid UTF-8 stop strings and valid UTF-8 deltas, every
// release ends on a character boundary.
//
// Cost: Feed is O((held + delta) * total stop-string length) at worst; held is
// shorter than the longest stop string. Threads: one matcher per stream.
#ifndef LLM_CLIENT_GENERATE_STOP_STRINGS_H_
#define LLM_CLIENT_GENERATE_STOP_STRINGS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace llm::client {

// InvalidArgument for an empty stop string.
absl::Status ValidateStopStrings(const std::vector<std::string>& stop);

// The escapes of a command-line stop string (`llm --stop "\n\n"`), as
// llama.cpp's -e does: \n, \r, \t, \\, \" and \' become the character;
// any other backslash, and one at the end, is kept as it is.
std::string ProcessEscapes(std::string_view text);

class StopStringMatcher {
 public:
  // `stop` must pass ValidateStopStrings (empty strings are ignored here).
  explicit StopStringMatcher(std::vector<std::string> stop);

  struct Step {
    std::string released;  // text now safe to emit (possibly empty)
    bool stopped = false;  // a stop string was found: released ends before it
  };

  // Appends `delta` to the stream. After a stop, further calls release nothing.
  Step Feed(std::string_view delta);

  // End of the stream: releases the held text (nothing after a stop).
  std::string Finish();

  // Bytes held back now.
  size_t held_bytes() const { return held_.size(); }
  bool stopped() const { return stopped_; }
  // After a stop: the stop string found (the earliest in the text; of two
  // at the same place, the first given); "" before.
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stop_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_STOP_STRINGS_H_
