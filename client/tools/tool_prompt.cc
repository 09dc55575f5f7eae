#include "client/tools/tool_prompt.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "client/generate/jinja_json.h"
#include "common/strings.h"

namespace llm::client {
namespace {

// JSON text as Python's json.dumps writes it (", " and ": "), as templates'
// tojson does; text that does not parse stays as it is.
std::string PythonJson(std::string_view json_text, int indent = -1) {
  absl::StatusOr<jinja::Value> v = JinjaFromJson(json_text);
  if (!v.ok()) return std::string(json_text);
  absl::StatusOr<std::string> out = jinja::ToJson(*v, indent, /*sort_keys=*/false);
  return out.ok() ? *std::move(out) : std::string(json_text);
}

std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A tool's function object ({"name", "description", "parameters"}), JSON text.
std::string FunctionJson(const ToolSpec& spec) {
  std::string out = StrCat("{\"name\": ", JsonString(spec.name));
  if (!spec.description.empty()) {
    StrAppend(&out, ", \"description\": ", JsonString(spec.description));
  }
  if (!spec.parameters.empty()) StrAppend(&out, ", \"parameters\": ", spec.parameters);
  return out + "}";
}

std::string FunctionsJson(std::span<const ToolSpec> tools) {
  std::string out = "[";
  for (size_t i = 0; i < tools.size(); ++i) {
    StrAppend(&out, i > 0 ? ", " : "", FunctionJson(tools[i]));
  }
  return out + "]";
}

// A JSON value as a Python literal ('text', True, None, [1, 2], {'k': 1}).
std::string PythonLiteral(const jinja::Value& v) { return v.Repr(); }

std::string PythonicCall(const ToolCall& call) {
  std::string out = call.name + "(";
  absl::StatusOr<jinja::Value> args = JinjaFromJson(call.arguments);
  if (args.ok() && args->is_dict()) {
    bool first = true;
    for (const auto& [key, value] : args->as_dict()) {
      StrAppend(&out, first ? "" : ", ", key, "=", PythonLiteral(value));
      first = false;
    }
  }
  return out + ")";
}

// Rewrites the history for a template that shows neither tool_calls nor
// tool messages: calls join the assistant's text (`write`), runs of tool
// messages become one user message (each result through `wrap`, joined
// with newlines).
template <class Wrap>
std::vector<ChatMessage> RewriteHistory(std::span<const ChatMessage> messages, ToolSyntax syntax,
                                        bool keep_tool_role, Wrap wrap) {
  std::vector<ChatMessage> out;
  bool in_results = false;  // out.back() is a run of tool results
  for (const ChatMessage& m : messages) {
    if (m.role == "tool" && !keep_tool_role) {
      if (in_results) {
        StrAppend(&out.back().content, "\n", wrap(m));
      } else {
        out.push_back(ChatMessage{"user", wrap(m)});
        in_results = true;
      }
      continue;
    }
    in_results = false;
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      const std::string calls = WriteToolCalls(syntax, m.tool_calls);
      out.push_back(
          ChatMessage{m.role, m.content.empty() ? calls : StrCat(m.content, "\n", calls)});
    } else {
      out.push_back(m);
    }
  }
  return out;
}

// Mistral's template refuses ids that are not 9 letters and digits (its
// own form); others (OpenAI's "call_...") become 9 characters derived from
// them (FNV-1a), the same every time, so that a call and its result still
// match and a conversation's prompt renders alike turn after turn.
std::string MistralId(const std::string& id) {
  bool ok = id.size() == 9;
  for (char c : id) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
  }
  if (ok) return id;
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  std::string out;
  for (int i = 0; i < 9; ++i, h /= 62) out.push_back(kChars[h % 62]);
  return out;
}

}  // namespace

std::string HermesToolBlock(std::span<const ToolSpec> tools) {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const ToolSpec& t : tools) StrAppend(&out, "\n", PythonJson(ToolObjectJson(t)));
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and "
      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  return out;
}

std::string GemmaToolBlock(std::span<const ToolSpec> tools) {
  return StrCat(
      "You have access to functions. If you decide to invoke any of the function(s),\n"
      " you MUST put it in the format of\n"
      "[func_name1(params_name1=params_value1, params_name2=params_value2...), "
      "func_name2(params)]\n\n"
      "You SHOULD NOT include any other text in the response if you call a function\n",
      PythonJson(FunctionsJson(tools), 2));
}

std::string WriteToolCalls(ToolSyntax syntax, std::span<const ToolCall> calls) {
  std::string out;
  const auto object = [](const ToolCall& c, std::string_view arguments_key) {
    return StrCat("{\"name\": ", JsonString(c.name), ", \"", arguments_key,
                  "\": ", PythonJson(c.arguments.empty() ? "{}" : c.arguments), "}");
  };
  switch (syntax) {
    case ToolSyntax::kHermes:
      for (size_t i = 0; i < calls.size(); ++i) {
        StrAppend(&out, i > 0 ? "\n" : "", "<tool_call>\n", object(calls[i], "arguments"),
                  "\n</tool_call>");
      }
      break;
    case ToolSyntax::kLlama3:
      for (size_t i = 0; i < calls.size(); ++i) {
        StrAppend(&out, i > 0 ? "; " : "", object(calls[i], "parameters"));
      }
      break;
    case ToolSyntax::kMistral:
    case ToolSyntax::kToolCall:
      out = syntax == ToolSyntax::kMistral ? "[TOOL_CALLS][" : "<|tool_call|>[";
      for (size_t i = 0; i < calls.size(); ++i) {
        std::string one = object(calls[i], "arguments");
        if (syntax == ToolSyntax::kMistral && !calls[i].id.empty()) {
          one.pop_back();
          StrAppend(&one, ", \"id\": ", JsonString(calls[i].id), "}");
        }
        StrAppend(&out, i > 0 ? ", " : "", one);
      }
      out += syntax == ToolSyntax::kMistral ? "]" : "]<|/tool_call|>";
      break;
    case ToolSyntax::kPythonic:
      out = "[";
      for (size_t i = 0; i < calls.size(); ++i) {
        StrAppend(&out, i > 0 ? ", " : "", PythonicCall(calls[i]));
      }
      out += "]";
      break;
    case ToolSyntax::kNone:
      break;
  }
  return out;
}

absl::StatusOr<ToolPrompt> PrepareToolPrompt(const ToolFormat& format,
                                             std::span<const ToolSpec> tools,
                                             std::span<const ChatMessage> messages,
                                             std::string_view default_system) {
  if (format.syntax == ToolSyntax::kNone) {
    return absl::InvalidArgumentError(
        StrCat("tool calling is not supported for this model: ", format.reason));
  }
  ToolPrompt out;
  switch (format.prompt) {
    case ToolPromptStyle::kTemplate: {
      out.messages.assign(messages.begin(), messages.end());
      if (format.syntax == ToolSyntax::kMistral) {
        for (ChatMessage& m : out.messages) {
          for (ToolCall& c : m.tool_calls) c.id = MistralId(c.id);
          if (m.role == "tool") m.tool_call_id = MistralId(m.tool_call_id);
        }
      }
      if (!tools.empty()) {
        out.tools_json = "[";
        for (size_t i = 0; i < tools.size(); ++i) {
          StrAppend(&out.tools_json, i > 0 ? ", " : "", ToolObjectJson(tools[i]));
        }
        out.tools_json += "]";
      }
      return out;
    }
    case ToolPromptStyle::kSystemMessageTools: {
      out.messages = RewriteHistory(messages, format.syntax, /*keep_tool_role=*/true,
                                    [](const ChatMessage& m) { return m.content; });
      if (!tools.empty()) {
        if (out.messages.empty() || out.messages[0].role != "system") {
          out.messages.insert(
              out.messages.begin(),
              ChatMessage{"system", "You are a helpful assistant with some tools."});
        }
        out.messages[0].tools = FunctionsJson(tools);
      }
      return out;
    }
    case ToolPromptStyle::kSystemBlock: {
      out.messages = RewriteHistory(
          messages, ToolSyntax::kHermes, /*keep_tool_role=*/false, [](const ChatMessage& m) {
            return StrCat("<tool_response>\n", m.content, "\n</tool_response>");
          });
      if (!tools.empty()) {
        const std::string block = HermesToolBlock(tools);
        if (!out.messages.empty() && out.messages[0].role == "system") {
          StrAppend(&out.messages[0].content, "\n\n", block);
        } else {
          out.messages.insert(
              out.messages.begin(),
              ChatMessage{"system",
                          default_system.empty() ? block : StrCat(default_system, "\n\n", block)});
        }
      }
      return out;
    }
    case ToolPromptStyle::kUserBlock: {
      out.messages = RewriteHistory(
          messages, ToolSyntax::kPythonic, /*keep_tool_role=*/false,
          [](const ChatMessage& m) { return StrCat("```tool_output\n", m.content, "\n```"); });
      if (!tools.empty()) {
        const std::string block = GemmaToolBlock(tools);
        for (ChatMessage& m : out.messages) {
          if (m.role == "user") {
            m.content = StrCat(block, "\n", m.content);
            break;
          }
        }
      }
      return out;
    }
  }
  return out;
}

}  // namespace llm::client
