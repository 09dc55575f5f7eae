#include "client/constrain/xgrammar_log.h"

#include <string>

// xgrammar's internal logging header (in its sdist's cpp/ folder), compiled
// with XGRAMMAR_LOG_CUSTOMIZE=1 as xgrammar itself is.
#include "support/logging.h"

namespace llm::constrain {
namespace {
thread_local WarningCapture* current_capture = nullptr;
}  // namespace

WarningCapture::WarningCapture() : previous_(current_capture) { current_capture = this; }
WarningCapture::~WarningCapture() { current_capture = previous_; }

void WarningCapture::Report(const std::string& message) {
  if (current_capture != nullptr) current_capture->warnings_.push_back(message);
}

std::string XgrammarErrorMessage(const std::exception& e) {
  if (const auto* fatal = dynamic_cast<const xgrammar::LogFatalError*>(&e)) {
    return fatal->std::runtime_error::what();
  }
  return e.what();
}

}  // namespace llm::constrain

namespace xgrammar {

[[noreturn]] void LogFatalImpl(const std::string& file, int lineno, const std::string& message) {
  throw LogFatalError(file, lineno, message);
}

void LogMessageImpl(const std::string& file, int lineno, int level, const std::string& message) {
  if (level == XGRAMMAR_LOG_LEVEL_WARNING) llm::constrain::WarningCapture::Report(message);
}

}  // namespace xgrammar
