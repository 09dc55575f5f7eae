#include "client/tools/tool_constraint.h"

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace llm::client {
namespace {

using Json = nlohmann::ordered_json;

std::string JsonString(std::string_view s) {
  return Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json Const(std::string_view text) { return Json{{"type", "const_string"}, {"value", text}}; }
Json Token(int32_t id) { return Json{{"type", "token"}, {"token", id}}; }
Json Sequence(std::vector<Json> elements) {
  return Json{{"type", "sequence"}, {"elements", std::move(elements)}};
}
Json Tag(Json begin, Json content, Json end) {
  return Json{{"type", "tag"},
              {"begin", std::move(begin)},
              {"content", std::move(content)},
              {"end", std::move(end)}};
}

// A marker: its text, and its id when it is a control token.
struct Marker {
  std::string_view text;
  std::optional<int32_t> token;
};

// One call: `prefix` (the name, in the family's words), the tool's
// parameters, `suffix`.
struct CallShape {
  std::string prefix;
  Json schema;
  Json after_schema;  // formats between the schema and the suffix (null: none)
  std::string suffix;
};

Json CallContent(const CallShape& c, bool with_prefix) {
  std::vector<Json> parts;
  if (with_prefix) parts.push_back(Const(c.prefix));
  parts.push_back(Json{{"type", "json_schema"}, {"json_schema", c.schema}});
  if (!c.after_schema.is_null()) parts.push_back(c.after_schema);
  return parts.size() == 1 ? parts[0] : Sequence(std::move(parts));
}

// A tag around one call: `open` (text or a control token) then the call,
// then `close`.
Json MarkedCall(const CallShape& c, const Marker& open, const Marker& close) {
  Json begin = open.token ? Token(*open.token) : Json(StrCat(open.text, c.prefix));
  Json inner = CallContent(c, open.token.has_value());
  Json end;
  if (close.token) {
    inner = Sequence({inner, Const(c.suffix)});
    end = Token(*close.token);
  } else {
    end = StrCat(c.suffix, close.text);
  }
  return Tag(std::move(begin), std::move(inner), std::move(end));
}

// Calls in a JSON list inside one marked region: [TOOL_CALLS][...],
// <|tool_call|>[...]<|/tool_call|>.
Json MarkedList(const std::vector<CallShape>& calls, bool parallel, const Marker& open,
                const Marker& close) {
  Json items = Json::array();
  for (const CallShape& c : calls)
    items.push_back(Tag(Json(c.prefix), CallContent(c, false), Json(c.suffix)));
  Json list = Json{{"type", "tags_with_separator"},
                   {"tags", std::move(items)},
                   {"separator", ", "},
                   {"at_least_one", true},
                   {"stop_after_first", !parallel}};
  Json begin = open.token ? Token(*open.token) : Json(StrCat(open.text, "["));
  std::vector<Json> content;
  if (open.token) content.push_back(Const("["));
  content.push_back(std::move(list));
  if (close.token) {
    content.push_back(Const("]"));
    return Tag(std::move(begin), Sequence(std::move(content)), Token(*close.token));
  }
  return Tag(std::move(begin), Sequence(std::move(content)), Json(StrCat("]", close.text)));
}

// Free text until `marker`, then one of `tags`.
Json Triggered(std::vector<Json> tags, const Marker& open, bool at_least_one,
               bool stop_after_first) {
  Json out = open.token ? Json{{"type", "token_triggered_tags"},
                               {"trigger_tokens", Json::array({*open.token})}}
                        : Json{{"type", "triggered_tags"}, {"triggers", Json::array({open.text})}};
  out["tags"] = std::move(tags);
  out["at_least_one"] = at_least_one;
  out["stop_after_first"] = stop_after_first;
  return out;
}

}  // namespace

absl::StatusOr<std::optional<std::string>> ToolCallConstraint(
    ToolSyntax syntax, std::span<const ToolSpec> tools, const ToolChoice& choice,
    const ControlTokenId& control_token_id) {
  if (syntax == ToolSyntax::kNone) {
    return absl::InvalidArgumentError("the model has no known tool-call syntax");
  }
  if (choice.mode == ToolChoiceMode::kNone || tools.empty()) return std::nullopt;
  const auto marker = [&](std::string_view text) {
    return Marker{text, control_token_id ? control_token_id(text) : std::nullopt};
  };
  // The tools the choice allows.
  std::vector<const ToolSpec*> allowed;
  for (const ToolSpec& t : tools) {
    if (choice.mode != ToolChoiceMode::kFunction || t.name == choice.function) {
      allowed.push_back(&t);
    }
  }
  if (allowed.empty()) {
    return absl::InvalidArgumentError(
        StrCat("tool_choice names the function '", choice.function, "', which is not in tools"));
  }
  const bool forced = choice.mode != ToolChoiceMode::kAuto;
  const bool one = choice.mode == ToolChoiceMode::kFunction || !choice.parallel;
  if (syntax == ToolSyntax::kPythonic) {
    if (!forced) return std::nullopt;
    return absl::UnimplementedError(
        "tool_choice 'required' or a named function needs a constraint in the model's call "
        "syntax, and Gemma's calls write their arguments as Python literals, which no JSON "
        "Schema constraint writes: use tool_choice 'auto'");
  }
  if (syntax == ToolSyntax::kLlama3 && !forced) return std::nullopt;

  std::string_view arguments_key = syntax == ToolSyntax::kLlama3 ? "parameters" : "arguments";
  std::vector<CallShape> calls;
  for (const ToolSpec* t : allowed) {
    CallShape c;
    c.prefix = StrCat(syntax == ToolSyntax::kHermes ? "\n" : "", "{\"name\": ", JsonString(t->name),
                      ", \"", arguments_key, "\": ");
    c.schema = t->parameters.empty() ? Json{{"type", "object"}}
                                     : Json::parse(t->parameters, nullptr, false);
    if (c.schema.is_discarded()) {
      return absl::InvalidArgumentError(
          StrCat("the parameters of tool '", t->name, "' are not JSON"));
    }
    c.suffix = syntax == ToolSyntax::kHermes ? "}\n" : "}";
    if (syntax == ToolSyntax::kMistral) {
      // Mistral's calls may carry their 9-character id after the arguments.
      c.after_schema =
          Json{{"type", "optional"},
               {"content",
                Sequence({Const(", \"id\": \""),
                          Json{{"type", "regex"}, {"pattern", "[a-zA-Z0-9]{9}"}}, Const("\"")})}};
    }
    calls.push_back(std::move(c));
  }

  Json format;
  switch (syntax) {
    case ToolSyntax::kHermes: {
      const Marker open = marker("<tool_call>"), close = marker("</tool_call>");
      std::vector<Json> tags;
      for (const CallShape& c : calls) tags.push_back(MarkedCall(c, open, close));
      format = Triggered(std::move(tags), open, forced, one);
      break;
    }
    case ToolSyntax::kMistral:
    case ToolSyntax::kToolCall: {
      const bool mistral = syntax == ToolSyntax::kMistral;
      const Marker open = marker(mistral ? "[TOOL_CALLS]" : "<|tool_call|>");
      const Marker close = mistral ? Marker{"", std::nullopt} : marker("<|/tool_call|>");
      Json list = MarkedList(calls, !one, open, close);
      format = Triggered({std::move(list)}, open, forced, /*stop_after_first=*/true);
      break;
    }
    case ToolSyntax::kLlama3: {  // forced: the whole answer is one call
      Json tags = Json::array();
      for (const CallShape& c : calls) {
        tags.push_back(Tag(Json(c.prefix), CallContent(c, false), Json(c.suffix)));
      }
      format = tags.size() == 1 ? tags[0] : Json{{"type", "or"}, {"elements", std::move(tags)}};
      break;
    }
    case ToolSyntax::kPythonic:
    case ToolSyntax::kNone:
      break;
  }
  return Json{{"type", "structural_tag"}, {"format", std::move(format)}}.dump();
}

}  // namespace llm::client
