#include "gateway/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "common/strings.h"
#include "gateway/json_fields.h"
#include "gateway/openai_tools.h"

namespace llm::gateway {
namespace {

using nlohmann::json;

// A logit_bias key: a token id in decimal digits only (strtol would take
// " 5", "+5" and "5 "), at most int32's maximum.
std::optional<int32_t> TokenIdKey(std::string_view key) {
  if (key.empty() || key.size() > 10) return std::nullopt;
  int64_t id = 0;
  for (const char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + (c - '0');
  }
  if (id > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(id);
}

}  // namespace

namespace {

// The body as a JSON object (ParseJsonBody's bounds), or the error.
std::optional<ApiError> ParseObject(std::string_view body, json* out) {
  if (auto e = ParseJsonBody(body, out)) return e;
  if (!out->is_object()) {
    ApiError e;
    e.message = "the request body must be a JSON object";
    return e;
  }
  return std::nullopt;
}

// A JSON schema given as an object (or, from some clients, as its JSON
// text), as the constraint's text.
std::optional<ApiError> SchemaText(const json& schema, std::string_view param, std::string* out) {
  if (schema.is_string()) {
    *out = schema.get<std::string>();
  } else if (schema.is_object() || schema.is_boolean()) {
    *out = schema.dump();  // bounded: the body's nesting is at most 64 levels
  } else {
    return BadParam(param, StrCat(param, " must be a JSON schema (an object)"));
  }
  return std::nullopt;
}

// Structured output, the three ways clients ask for it (one per request):
//   OpenAI's response_format: {"type": "text"} (the default: nothing),
//     {"type": "json_object"}, {"type": "json_schema", "json_schema":
//     {"name", "schema", "strict"}};
//   vLLM's structured_outputs: {"json": SCHEMA} | {"json_object": true} |
//     {"regex": RE} | {"grammar": GBNF} | {"choice": [A, B, ...]};
//   llama.cpp's server: "json_schema": SCHEMA, "grammar": GBNF.
std::optional<ApiError> ReadConstraint(const json& j, GenerationRequest* r) {
  const auto set = [&](std::string param, constrain::Spec spec) -> std::optional<ApiError> {
    if (r->constraint.has_value()) {
      return BadParam(param, StrCat(param, " and ", r->constraint_param,
                                    " both ask for structured output: give one"));
    }
    r->constraint = std::move(spec);
    r->constraint_param = std::move(param);
    return std::nullopt;
  };
  if (const json* format = Field(j, "response_format")) {
    const json* type = format->is_object() ? Field(*format, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      return BadParam("response_format",
                      "response_format must be an object with a string \"type\" ({\"type\": "
                      "\"text\"})");
    }
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "json_object") {
      if (auto e = set("response_format", {.kind = constrain::Kind::kJsonObject})) return e;
    } else if (t == "json_schema") {
      const json* spec = Field(*format, "json_schema");
      const json* schema = spec != nullptr && spec->is_object() ? Field(*spec, "schema") : nullptr;
      if (schema == nullptr) {
        return BadParam("response_format",
                        "response_format json_schema needs {\"json_schema\": {\"name\": ..., "
                        "\"schema\": {...}}}");
      }
      constrain::Spec c{.kind = constrain::Kind::kJsonSchema};
      if (auto e = SchemaText(*schema, "response_format.json_schema.schema", &c.text)) return e;
      bool strict = false;
      if (auto e = ReadBool(*spec, "strict", &strict)) {
        e->param = "response_format.json_schema.strict";
        return e;
      }
      c.strict = strict;
      if (auto e = set("response_format", std::move(c))) return e;
    } else if (t != "text") {
      return BadParam(
          "response_format",
          StrCat("response_format type must be 'text', 'json_object' or 'json_schema', got ",
                 QuoteForError(t)));
    }
  }
  if (const json* so = Field(j, "structured_outputs")) {
    if (!so->is_object()) return BadParam("structured_outputs", "must be an object");
    for (const auto& [key, value] : so->items()) {
      const std::string param = StrCat("structured_outputs.", key);
      constrain::Spec c;
      if (key == "json") {
        c.kind = constrain::Kind::kJsonSchema;
        if (auto e = SchemaText(value, param, &c.text)) return e;
      } else if (key == "json_object") {
        if (!value.is_boolean()) return BadParam(param, "must be a boolean");
        if (!value.get<bool>()) continue;
        c.kind = constrain::Kind::kJsonObject;
      } else if (key == "regex" || key == "grammar") {
        if (!value.is_string()) return BadParam(param, "must be a string");
        c.kind = key == "regex" ? constrain::Kind::kRegex : constrain::Kind::kGrammar;
        c.text = value.get<std::string>();
      } else if (key == "choice") {
        if (!value.is_array() || value.empty()) {
          return BadParam(param, "must be a non-empty array of strings");
        }
        c.kind = constrain::Kind::kChoice;
        for (const json& one : value) {
          if (!one.is_string()) return BadParam(param, "must be a non-empty array of strings");
          c.choices.push_back(one.get<std::string>());
        }
      } else {
        return BadParam(param, StrCat("structured_outputs takes json, json_object, regex, "
                                      "grammar or choice, not ",
                                      QuoteForError(key)));
      }
      if (auto e = set(param, std::move(c))) return e;
    }
  }
  if (const json* schema = Field(j, "json_schema")) {  // llama.cpp's server
    constrain::Spec c{.kind = constrain::Kind::kJsonSchema};
    if (auto e = SchemaText(*schema, "json_schema", &c.text)) return e;
    if (auto e = set("json_schema", std::move(c))) return e;
  }
  if (const json* grammar = Field(j, "grammar")) {
    if (!grammar->is_string()) return BadParam("grammar", "grammar must be a string (GBNF)");
    if (!grammar->get_ref<const std::string&>().empty()) {
      constrain::Spec c{.kind = constrain::Kind::kGrammar, .text = grammar->get<std::string>()};
      if (auto e = set("grammar", std::move(c))) return e;
    }
  }
  return std::nullopt;
}

// A body ParseJsonBody refused for its nesting (the only refusal that is
// not "not valid JSON"): the top-level field the nesting is in, as the
// error's param, so that a schema of 10,000 levels is a 400 naming
// response_format. One pass over the bytes: strings skipped, brackets
// counted (the top-level object is level 1, as kMaxJsonDepth counts).
void NameTheFieldNestedTooDeep(std::string_view body, ApiError* e) {
  if (!e->param.empty() || e->message.find("not valid JSON") != std::string::npos) return;
  int depth = 0;
  std::string_view last_string, field;
  for (size_t i = 0; i < body.size(); ++i) {
    switch (body[i]) {
      case '"': {
        const size_t start = i + 1;
        for (++i; i < body.size() && body[i] != '"'; ++i) {
          if (body[i] == '\\') ++i;
        }
        last_string = body.substr(start, std::min(i, body.size()) - start);
        break;
      }
      case ':':
        if (depth == 1) field = last_string;
        break;
      case '{':
      case '[':
        if (++depth > kMaxJsonDepth) {
          if (!field.empty()) {
            e->param = std::string(field);
            e->message += StrCat(" (in ", e->param, ")");
          }
          return;
        }
        break;
      case '}':
      case ']':
        --depth;
        break;
      default:
        break;
    }
  }
}

// A JSON schema's properties are generated in the schema's order, which
// nlohmann::json loses (it sorts an object's keys): a schema given as an
// object is written out again from the body parsed with its keys in order.
// Cost: a second parse of the body, for a schema request only.
std::optional<ApiError> KeepSchemaKeyOrder(std::string_view body, GenerationRequest* r) {
  if (!r->constraint.has_value() || r->constraint->kind != constrain::Kind::kJsonSchema) {
    return std::nullopt;
  }
  // Where ReadConstraint found the schema.
  const char* pointer =
      r->constraint_param == "response_format"           ? "/response_format/json_schema/schema"
      : r->constraint_param == "structured_outputs.json" ? "/structured_outputs/json"
                                                         : "/json_schema";
  nlohmann::ordered_json ordered;
  if (auto e = ParseJsonBody(body, &ordered)) return e;  // parsed once already: no error
  const nlohmann::ordered_json::json_pointer at(pointer);
  if (!ordered.contains(at)) return std::nullopt;
  if (const nlohmann::ordered_json& schema = ordered.at(at); schema.is_object()) {
    r->constraint->text = Dump(schema);
  }
  return std::nullopt;
}

// The fields chat and completions share: the model, sampling, stopping and
// the answer's shape. max_tokens may be 0 when `zero_max_tokens`.
std::optional<ApiError> ReadGeneration(const json& j, const RequestLimits& limits,
                                       bool zero_max_tokens, GenerationRequest* r) {
  const json* model = Field(j, "model");
  if (model == nullptr) return BadParam("model", "model is required");
  if (!model->is_string()) return BadParam("model", "model must be a string");
  r->model = model->get<std::string>();

  // Sampling. OpenAI's defaults: temperature 1, top_p 1; top_k and min_p
  // (extensions, as in vLLM and llama.cpp's server) default to off.
  sampler::SamplingParams& s = r->params.sampling;
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  if (auto e = ReadNumber(j, "temperature", 0, 2, &s.temperature)) return e;
  if (auto e = ReadNumber(j, "top_p", 0, 1, &s.top_p, /*above_lo=*/true)) return e;
  if (auto e = ReadNumber(j, "min_p", 0, 1, &s.min_p)) return e;
  int64_t top_k = 0;
  if (auto e = ReadInt(j, "top_k", -1, std::numeric_limits<int32_t>::max(), &top_k)) return e;
  s.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);  // -1: off (vLLM)
  if (auto e = ReadNumber(j, "presence_penalty", -2, 2, &s.presence_penalty)) return e;
  if (auto e = ReadNumber(j, "frequency_penalty", -2, 2, &s.frequency_penalty)) return e;
  int64_t seed = 0;
  if (auto e = ReadInt(j, "seed", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), &seed, &r->has_seed)) {
    return e;
  }
  s.seed = static_cast<uint64_t>(seed);

  if (const json* bias = Field(j, "logit_bias")) {
    if (!bias->is_object()) {
      return BadParam("logit_bias", "logit_bias must be an object of token id -> bias");
    }
    if (bias->size() > static_cast<size_t>(limits.max_logit_bias)) {
      return BadParam("logit_bias", StrCat("at most ", limits.max_logit_bias, " entries"));
    }
    for (const auto& [key, value] : bias->items()) {
      const std::optional<int32_t> id = TokenIdKey(key);
      if (!id.has_value()) {
        return BadParam("logit_bias",
                        StrCat(QuoteForError(key), " is not a token id (decimal digits only)"));
      }
      if (!value.is_number() || !std::isfinite(value.get<double>()) ||
          std::abs(value.get<double>()) > 100) {
        return BadParam("logit_bias", StrCat("the bias of token ", *id, " must be in [-100, 100]"));
      }
      s.logit_bias.push_back({*id, value.get<float>()});
    }
  }

  // Stopping.
  const int64_t min_tokens = zero_max_tokens ? 0 : 1;
  int64_t max_tokens = 0;
  if (auto e = ReadInt(j, "max_completion_tokens", min_tokens, std::numeric_limits<int32_t>::max(),
                       &max_tokens, &r->has_max_tokens)) {
    return e;
  }
  if (!r->has_max_tokens) {
    if (auto e = ReadInt(j, "max_tokens", min_tokens, std::numeric_limits<int32_t>::max(),
                         &max_tokens, &r->has_max_tokens)) {
      return e;
    }
  }
  r->params.max_tokens = static_cast<int32_t>(max_tokens);
  if (const json* stop = Field(j, "stop")) {
    std::vector<std::string> stops;
    if (stop->is_string()) {
      stops.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const json& one : *stop) {
        if (!one.is_string()) return BadParam("stop", "stop must be a string or strings");
        stops.push_back(one.get<std::string>());
      }
    } else {
      return BadParam("stop", "stop must be a string or an array of strings");
    }
    if (stops.size() > static_cast<size_t>(limits.max_stop)) {
      return BadParam("stop", StrCat("stop takes at most ", limits.max_stop,
                                     " strings (OpenAI's limit), got ", stops.size()));
    }
    for (const std::string& one : stops) {
      if (one.empty()) return BadParam("stop", "stop strings must not be empty");
    }
    r->params.stop = std::move(stops);
  }

  // The answer's shape.
  int64_t n = 1;
  if (auto e = ReadInt(j, "n", 1, limits.max_n, &n)) return e;
  r->n = static_cast<int>(n);
  if (auto e = ReadBool(j, "stream", &r->stream)) return e;
  if (const json* options = Field(j, "stream_options")) {
    if (!options->is_object()) return BadParam("stream_options", "must be an object");
    if (!r->stream) return BadParam("stream_options", "stream_options needs stream: true");
    if (auto e = ReadBool(*options, "include_usage", &r->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  if (auto e = ReadBool(j, "ignore_eos", &r->params.ignore_eos)) return e;  // vLLM's extension
  int64_t speculate = 0;  // extension: speculative decoding (GenerateParams::speculate)
  if (auto e =
          ReadInt(j, "speculate", 0, client::kMaxProposedTokens, &speculate, &r->has_speculate)) {
    return e;
  }
  r->params.speculate = static_cast<int32_t>(speculate);
  for (const char* unsupported : {"functions", "function_call"}) {
    if (Field(j, unsupported) != nullptr) {
      return BadParam(unsupported, StrCat(unsupported,
                                          " (OpenAI's deprecated function calling) is not "
                                          "supported by this gateway: use tools and tool_choice"));
    }
  }
  return ReadConstraint(j, r);
}

// `messages`: a non-empty array of {role, content} (roles system,
// developer = system, user, assistant, tool), with their tool fields
// (openai_tools.h); an assistant message with tool_calls may have no
// content.
std::optional<ApiError> ReadMessages(const json& j, const RequestLimits& limits,
                                     std::vector<client::ChatMessage>* out) {
  const json* messages = nullptr;
  if (auto e = ReadMessageArray(j, limits.max_messages, &messages)) return e;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string p = StrCat("messages[", i, "]");
    if (!m.is_object()) return BadParam(p, "each message must be an object");
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) {
      return BadParam(StrCat(p, ".role"), "role must be a string");
    }
    std::string r_role = role->get<std::string>();
    if (r_role == "developer") r_role = "system";  // OpenAI's newer name
    if (r_role != "system" && r_role != "user" && r_role != "assistant" && r_role != "tool") {
      return BadParam(StrCat(p, ".role"),
                      StrCat("role must be system, developer, user, assistant or tool, got ",
                             QuoteForError(role->get_ref<const std::string&>())));
    }
    client::ChatMessage message;
    message.role = std::move(r_role);
    if (auto e = ReadMessageToolFields(m, p, &message)) return e;
    const json* content = Field(m, "content");
    if (content == nullptr) {
      if (message.tool_calls.empty()) {
        return BadParam(StrCat(p, ".content"), "content is required");
      }
    } else if (auto e = ReadContent(*content, StrCat(p, ".content"), &message.content)) {
      return e;
    }
    out->push_back(std::move(message));
  }
  return std::nullopt;
}

// Token ids: every element of `array` an integer id >= 0 (the vocabulary's
// bound is the caller's check).
std::optional<ApiError> ReadIdList(const json& array, const std::string& param,
                                   std::vector<int32_t>* out) {
  for (const json& t : array) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return BadParam(param, StrCat("token ids must be integers >= 0, got ", DescribeForError(t)));
    }
    out->push_back(t.get<int32_t>());
  }
  return std::nullopt;
}

// A prompt of token ids (not empty).
std::optional<ApiError> ReadIds(const json& array, const std::string& param,
                                CompletionPrompt* out) {
  out->is_ids = true;
  if (auto e = ReadIdList(array, param, &out->ids)) return e;
  if (out->ids.empty()) return BadParam(param, "a prompt must not be empty");
  return std::nullopt;
}

// Parses `body` as a JSON object (ParseObject) and reads it into a new
// Request with `read`; *out is set only on success.
template <class Request, class Read>
std::optional<ApiError> ParseInto(std::string_view body, Request* out, Read read) {
  json j;
  if (auto e = ParseObject(body, &j)) {
    NameTheFieldNestedTooDeep(body, &*e);
    return e;
  }
  Request r;
  if (auto e = read(j, &r)) return e;
  if constexpr (std::is_base_of_v<GenerationRequest, Request>) {
    if (auto e = KeepSchemaKeyOrder(body, &r)) return e;
  }
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> ReadChatRequest(const json& j, std::string_view body,
                                        const RequestLimits& limits, ChatRequest* r) {
  if (auto e = ReadGeneration(j, limits, /*zero_max_tokens=*/false, r)) return e;
  if (auto e = ReadMessages(j, limits, &r->messages)) return e;
  if (auto e = ReadTools(j, body, &r->tools, &r->tool_choice)) return e;
  if (auto e = ReadBool(j, "logprobs", &r->logprobs)) return e;
  int64_t top_logprobs = 0;
  if (auto e = ReadInt(j, "top_logprobs", 0, client::kMaxTopLogprobs, &top_logprobs)) return e;
  if (top_logprobs > 0 && !r->logprobs) {
    return BadParam("top_logprobs", "top_logprobs needs logprobs: true");
  }
  r->top_logprobs = static_cast<int>(top_logprobs);
  r->params.top_logprobs = r->top_logprobs;
  return std::nullopt;
}

std::optional<ApiError> ReadCompletionRequest(const json& j, const RequestLimits& limits,
                                              CompletionRequest* r) {
  if (auto e = ReadGeneration(j, limits, /*zero_max_tokens=*/true, r)) return e;
  if (auto e = ReadBool(j, "echo", &r->echo)) return e;
  if (r->has_max_tokens && r->params.max_tokens == 0 && !r->echo) {
    return BadParam("max_tokens", "max_tokens 0 needs echo: true (the prompt scored only)");
  }
  int64_t logprobs = -1;
  if (const json* v = Field(j, "logprobs"); v != nullptr && v->is_boolean()) {
    return BadParam("logprobs", "logprobs of a completion is a count, 0..20");
  }
  if (auto e = ReadInt(j, "logprobs", 0, client::kMaxTopLogprobs, &logprobs)) return e;
  r->logprobs = static_cast<int>(logprobs);
  r->params.top_logprobs = std::max(r->logprobs, 0);
  if (r->echo && r->logprobs >= 0) r->params.prompt_logprobs = r->logprobs;
  if (const json* suffix = Field(j, "suffix");
      suffix != nullptr && !(suffix->is_string() && suffix->get<std::string>().empty())) {
    return BadParam("suffix", "suffix is not supported by this gateway");
  }
  int64_t best_of = r->n;
  if (auto e = ReadInt(j, "best_of", 1, limits.max_n, &best_of)) return e;
  if (best_of != r->n) return BadParam("best_of", "best_of must equal n (no server-side ranking)");

  const json* prompt = Field(j, "prompt");
  if (prompt == nullptr) return BadParam("prompt", "prompt is required");
  if (prompt->is_string()) {
    r->prompts.push_back({prompt->get<std::string>(), {}, false});
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    CompletionPrompt one;
    if (auto e = ReadIds(*prompt, "prompt", &one)) return e;
    r->prompts.push_back(std::move(one));
  } else if (prompt->is_array() && !prompt->empty()) {
    if (prompt->size() > static_cast<size_t>(limits.max_prompts)) {
      return BadParam("prompt", StrCat("at most ", limits.max_prompts, " prompts a request"));
    }
    for (size_t i = 0; i < prompt->size(); ++i) {
      const json& p = (*prompt)[i];
      const std::string param = StrCat("prompt[", i, "]");
      CompletionPrompt one;
      if (p.is_string()) {
        one.text = p.get<std::string>();
      } else if (p.is_array()) {
        if (auto e = ReadIds(p, param, &one)) return e;
      } else {
        return BadParam(param, "each prompt must be a string or an array of token ids");
      }
      r->prompts.push_back(std::move(one));
    }
  } else {
    return BadParam("prompt",
                    "prompt must be a string, an array of strings, an array of token ids or an "
                    "array of such arrays");
  }
  if (r->prompts.size() * static_cast<size_t>(r->n) > static_cast<size_t>(limits.max_prompts)) {
    return BadParam("n", StrCat("prompts x n must be at most ", limits.max_prompts));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadTokenizeRequest(const json& j, const RequestLimits& limits,
                                            TokenizeRequest* r) {
  if (auto e = ReadOptionalString(j, "model", &r->model)) return e;
  const json* prompt = Field(j, "prompt");
  if (Field(j, "messages") != nullptr) {
    if (prompt != nullptr) return BadParam("messages", "give prompt or messages, not both");
    if (auto e = ReadMessages(j, limits, &r->messages)) return e;
    r->add_special_tokens = false;  // vLLM's default for a chat: the template has them
    if (auto e = ReadBool(j, "add_generation_prompt", &r->add_generation_prompt)) return e;
  } else {
    if (prompt == nullptr || !prompt->is_string()) {
      return BadParam("prompt", "prompt must be a string (or give messages)");
    }
    r->prompt = prompt->get<std::string>();
  }
  if (auto e = ReadBool(j, "add_special_tokens", &r->add_special_tokens)) return e;
  return std::nullopt;
}

std::optional<ApiError> ReadDetokenizeRequest(const json& j, DetokenizeRequest* r) {
  if (auto e = ReadOptionalString(j, "model", &r->model)) return e;
  const json* tokens = Field(j, "tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    return BadParam("tokens", "tokens must be an array of token ids");
  }
  if (auto e = ReadIdList(*tokens, "tokens", &r->tokens)) return e;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseChatRequest(std::string_view body, const RequestLimits& limits,
                                         ChatRequest* out) {
  return ParseInto(body, out, [&](const json& j, ChatRequest* r) {
    return ReadChatRequest(j, body, limits, r);
  });
}

std::optional<ApiError> ParseCompletionRequest(std::string_view body, const RequestLimits& limits,
                                               CompletionRequest* out) {
  return ParseInto(body, out, [&](const json& j, CompletionRequest* r) {
    return ReadCompletionRequest(j, limits, r);
  });
}

std::optional<ApiError> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits,
                                             TokenizeRequest* out) {
  return ParseInto(body, out, [&](const json& j, TokenizeRequest* r) {
    return ReadTokenizeRequest(j, limits, r);
  });
}

std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, DetokenizeRequest* out) {
  return ParseInto(
      body, out, [&](const json& j, DetokenizeRequest* r) { return ReadDetokenizeRequest(j, r); });
}

}  // namespace llm::gateway
