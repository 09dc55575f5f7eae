// The model's id in the OpenAI API (/v1/models, "model" in responses) when
// --served_model_name does not give one: the GGUF file's base name without
// ".gguf" and without a trailing quantization type, as llama-server and
// Ollama name a model (SmolLM2-135M-Instruct.Q4_1.gguf ->
// "SmolLM2-135M-Instruct", gemma-3-270m-q4_k_m.gguf -> "gemma-3-270m").
//
// Threads: pure functions. Cost: linear in the name.
#ifndef LLM_GATEWAY_MODEL_ID_H_
#define LLM_GATEWAY_MODEL_ID_H_

#include <string>
#include <string_view>

namespace llm::gateway {

// Whether `part` names a llama.cpp quantization or float type, in any case:
// F32, F16, BF16 (FP32, FP16), Q4_0, Q4_1, Q5_K_M, Q8_0, IQ4_XS, IQ2_XXS, TQ1_0, MXFP4, ...
// (a Q, IQ or TQ and a digit, then "_" groups of 1-3 letters or digits).
bool IsQuantizationName(std::string_view part);

// The id for a model file: `file_name` (a base name or a path; "" gives "")
// without its directory, a ".gguf" ending (any case) and a last ".QUANT" or
// "-QUANT" part (IsQuantizationName), unless that would leave nothing;
// blanks as '-', so that the id is one path segment (/v1/models/{id}).
std::string ModelIdFromFileName(std::string_view file_name);

// The default id of the model that a model server's Info describes:
// ModelIdFromFileName(file_name), or, from a server that does not send the
// file's name, the GGUF's general.name, else its architecture, with blanks
// and slashes as '-'.
std::string DefaultModelId(std::string_view file_name, std::string_view general_name,
                           std::string_view architecture);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_MODEL_ID_H_
