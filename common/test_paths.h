// Paths for tests: the repository and the shared reference data beside it.
// LLM_SHARED_DIR overrides the default ../shared next to the checkout.
#ifndef LLM_COMMON_TEST_PATHS_H_
#define LLM_COMMON_TEST_PATHS_H_

#include <cstdlib>
#include <string>

namespace llm::testing {

inline std::string SourceDir() {
#ifdef LLM_SOURCE_DIR
  return LLM_SOURCE_DIR;
#else
  const char* env = std::getenv("LLM_SOURCE_DIR");
  return env != nullptr ? env : ".";
#endif
}

inline std::string SharedDir() {
  const char* env = std::getenv("LLM_SHARED_DIR");
  if (env != nullptr && *env != '\0') return env;
  return SourceDir() + "/../shared";
}

inline std::string BinaryDir() {
#ifdef LLM_BINARY_DIR
  return LLM_BINARY_DIR;
#else
  return ".";
#endif
}

}  // namespace llm::testing

#endif  // LLM_COMMON_TEST_PATHS_H_
