// `llm generate`, `llm chat` and `llm health`: the command-line front of
// llm_client (generator.h, chat_session.h, health.h). Flags are read here
// (absl flags); the exit status follows the usage text in llm_main.cc:
// 0 done, 1 a service failed or cannot be reached, 2 bad usage or values.
#ifndef LLM_CLIENT_CLI_GENERATE_CMD_H_
#define LLM_CLIENT_CLI_GENERATE_CMD_H_

#include <string>
#include <vector>

namespace llm::cli {

// `stop`: the values of every --stop flag, in order (collected from argv by
// main, since an absl flag keeps only its last value).
int RunGenerate(const std::vector<std::string>& stop, const std::vector<std::string>& choices);
int RunChat(const std::vector<std::string>& stop, const std::vector<std::string>& choices);
int RunHealth();

}  // namespace llm::cli

#endif  // LLM_CLIENT_CLI_GENERATE_CMD_H_
