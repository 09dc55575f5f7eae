// xgrammar's log, routed (it is built with XGRAMMAR_LOG_CUSTOMIZE=1, see
// cmake/xgrammar.cmake): a fatal error throws xgrammar::LogFatalError as
// xgrammar expects (Compile catches it at the boundary), and a warning goes to
// the WarningCapture alive on the calling thread, or nowhere: the library
// writes nothing to stderr. xgrammar warns when it ignores part of a schema
// ("multipleOf is not supported for type:number; ignoring multipleOf"), which
// Compile turns into an error unless the spec is lenient.
//
// Threads: a capture sees the warnings of its own thread only.
#ifndef LLM_CLIENT_CONSTRAIN_XGRAMMAR_LOG_H_
#define LLM_CLIENT_CONSTRAIN_XGRAMMAR_LOG_H_

#include <exception>
#include <string>
#include <vector>

namespace llm::constrain {

class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;

  const std::vector<std::string>& warnings() const { return warnings_; }

  // Appends `message` to this thread's innermost capture, if any.
  static void Report(const std::string& message);

 private:
  std::vector<std::string> warnings_;
  WarningCapture* previous_;
};

// The message of an exception from xgrammar: a fatal error's own text,
// without the time and source line xgrammar adds to what().
std::string XgrammarErrorMessage(const std::exception& e);

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_XGRAMMAR_LOG_H_
