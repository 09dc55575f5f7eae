#include "gateway/openai_tools.h"

#include <set>
#include <utility>

#include "common/strings.h"
#include "gateway/json_fields.h"

namespace llm::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

std::optional<ApiError> ReadChoice(const json& j, const std::vector<client::ToolSpec>& tools,
                                   client::ToolChoice* choice) {
  choice->mode = tools.empty() ? client::ToolChoiceMode::kNone : client::ToolChoiceMode::kAuto;
  const json* v = Field(j, "tool_choice");
  if (v == nullptr) return std::nullopt;
  constexpr const char* kParam = "tool_choice";
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "none") {
      choice->mode = client::ToolChoiceMode::kNone;
      return std::nullopt;
    }
    if (s == "auto") {
      choice->mode = client::ToolChoiceMode::kAuto;
    } else if (s == "required") {
      choice->mode = client::ToolChoiceMode::kRequired;
    } else {
      return BadParam(kParam,
                      StrCat("tool_choice must be 'none', 'auto', 'required' or "
                             "{\"type\": \"function\", \"function\": {\"name\": ...}}, got ",
                             QuoteForError(s)));
    }
  } else if (v->is_object()) {
    const json* type = Field(*v, "type");
    const json* function = Field(*v, "function");
    const json* name =
        function != nullptr && function->is_object() ? Field(*function, "name") : nullptr;
    if (type == nullptr || *type != "function" || name == nullptr || !name->is_string()) {
      return BadParam(kParam,
                      "a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": "
                      "...}}");
    }
    choice->mode = client::ToolChoiceMode::kFunction;
    choice->function = name->get<std::string>();
  } else {
    return BadParam(kParam, "tool_choice must be a string or an object");
  }
  if (tools.empty()) {
    return BadParam(kParam, "tool_choice other than 'none' needs tools");
  }
  if (choice->mode == client::ToolChoiceMode::kFunction) {
    bool found = false;
    for (const client::ToolSpec& t : tools) found = found || t.name == choice->function;
    if (!found) {
      return BadParam(kParam, StrCat("tool_choice names the function ",
                                     QuoteForError(choice->function), ", which is not in tools"));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ReadToolSpec(const ordered_json& name, const ordered_json* description,
                                     const ordered_json* parameters, const std::string& param,
                                     client::ToolSpec* out) {
  if (!name.is_string()) return BadParam(StrCat(param, ".name"), "a tool's name must be a string");
  const std::string& n = name.get_ref<const std::string&>();
  if (n.empty() || n.size() > kMaxToolName) {
    return BadParam(StrCat(param, ".name"),
                    StrCat("a tool's name must be 1 to ", kMaxToolName, " bytes long"));
  }
  for (char c : n) {
    if (!IsNameChar(c)) {
      return BadParam(StrCat(param, ".name"),
                      StrCat("a tool's name may hold letters, digits, '_', '-' and '.' only, got ",
                             QuoteForError(n)));
    }
  }
  out->name = n;
  if (description != nullptr && !description->is_null()) {
    if (!description->is_string()) {
      return BadParam(StrCat(param, ".description"), "a tool's description must be a string");
    }
    out->description = description->get<std::string>();
  }
  if (parameters != nullptr && !parameters->is_null()) {
    const auto type = parameters->is_object() ? parameters->find("type") : parameters->end();
    if (!parameters->is_object() || (type != parameters->end() && *type != "object")) {
      return BadParam(
          param.find("input_schema") != std::string::npos ? param : StrCat(param, ".parameters"),
          "a tool's parameters must be a JSON Schema object of type \"object\" (its "
          "arguments are an object)");
    }
    out->parameters = Dump(*parameters);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadTools(const json& j, std::string_view body,
                                  std::vector<client::ToolSpec>* tools,
                                  client::ToolChoice* choice) {
  tools->clear();
  const json* v = Field(j, "tools");
  if (v != nullptr) {
    if (!v->is_array()) return BadParam("tools", "tools must be an array of tool objects");
    if (v->size() > static_cast<size_t>(kMaxTools)) {
      return BadParam("tools", StrCat("at most ", kMaxTools, " tools"));
    }
  }
  if (v != nullptr && !v->empty()) {
    // Again, in order: the schemas reach the template and the constraint as
    // the client wrote them.
    ordered_json ordered;
    if (auto e = ParseJsonBody(body, &ordered)) return e;
    const ordered_json& list = ordered["tools"];
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const ordered_json& tool = list[i];
      const std::string param = StrCat("tools[", i, "]");
      const auto type = tool.is_object() ? tool.find("type") : tool.end();
      if (!tool.is_object() || (type != tool.end() && *type != "function")) {
        return BadParam(param, "each tool must be {\"type\": \"function\", \"function\": {...}}");
      }
      const auto function = tool.find("function");
      if (function == tool.end() || !function->is_object() || !function->contains("name")) {
        return BadParam(StrCat(param, ".function"), "a tool needs a function with a name");
      }
      const auto field = [&](const char* key) -> const ordered_json* {
        const auto it = function->find(key);
        return it == function->end() ? nullptr : &*it;
      };
      client::ToolSpec spec;
      if (auto e = ReadToolSpec((*function)["name"], field("description"), field("parameters"),
                                StrCat(param, ".function"), &spec)) {
        return e;
      }
      if (!names.insert(spec.name).second) {
        return BadParam(StrCat(param, ".function.name"),
                        StrCat("two tools are named ", QuoteForError(spec.name)));
      }
      spec.json = Dump(tool);
      tools->push_back(std::move(spec));
    }
  }
  if (auto e = ReadChoice(j, *tools, choice)) return e;
  if (auto e = ReadBool(j, "parallel_tool_calls", &choice->parallel)) return e;
  return std::nullopt;
}

std::optional<ApiError> ReadMessageToolFields(const json& m, const std::string& param,
                                              client::ChatMessage* out) {
  if (out->role == "tool") {
    const json* id = Field(m, "tool_call_id");
    if (id == nullptr || !id->is_string()) {
      return BadParam(StrCat(param, ".tool_call_id"),
                      "a tool message needs tool_call_id, the id of the call it answers");
    }
    out->tool_call_id = id->get<std::string>();
    if (const json* name = Field(m, "name")) {
      if (!name->is_string()) return BadParam(StrCat(param, ".name"), "name must be a string");
      out->name = name->get<std::string>();
    }
    return std::nullopt;
  }
  const json* calls = Field(m, "tool_calls");
  if (calls == nullptr) return std::nullopt;
  const std::string p = StrCat(param, ".tool_calls");
  if (out->role != "assistant") return BadParam(p, "only assistant messages have tool_calls");
  if (!calls->is_array()) return BadParam(p, "tool_calls must be an array");
  if (calls->size() > static_cast<size_t>(kMaxToolCalls)) {
    return BadParam(p, StrCat("at most ", kMaxToolCalls, " tool calls a message"));
  }
  for (size_t i = 0; i < calls->size(); ++i) {
    const json& c = (*calls)[i];
    const std::string cp = StrCat(p, "[", i, "]");
    const json* function = c.is_object() ? Field(c, "function") : nullptr;
    const json* name =
        function != nullptr && function->is_object() ? Field(*function, "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return BadParam(cp,
                      "a tool call is {\"id\", \"type\": \"function\", \"function\": "
                      "{\"name\", \"arguments\"}}");
    }
    client::ToolCall call;
    call.name = name->get<std::string>();
    if (const json* id = Field(c, "id")) {
      if (!id->is_string()) return BadParam(StrCat(cp, ".id"), "id must be a string");
      call.id = id->get<std::string>();
    }
    if (const json* args = Field(*function, "arguments")) {
      if (args->is_string()) {
        call.arguments = args->get<std::string>();
      } else if (args->is_object()) {
        call.arguments = Dump(*args);
      } else {
        return BadParam(StrCat(cp, ".function.arguments"),
                        "arguments must be a string of JSON (or an object)");
      }
    }
    out->tool_calls.push_back(std::move(call));
  }
  return std::nullopt;
}

}  // namespace llm::gateway
