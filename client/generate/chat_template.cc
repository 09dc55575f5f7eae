#include "client/generate/chat_template.h"

#include <utility>

#include "client/generate/jinja_json.h"
#include "common/strings.h"

namespace llm::client {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kBeginOfText = "<|begin_of_text|>";
constexpr std::string_view kStartHeader = "<|start_header_id|>";
constexpr std::string_view kEndHeader = "<|end_header_id|>";
constexpr std::string_view kEotId = "<|eot_id|>";

std::string_view Trim(std::string_view s) {
  const std::string_view ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// A tool call's arguments as a template sees them: the JSON object as a
// dict, anything else as the text itself.
jinja::Value ArgumentsValue(const std::string& arguments) {
  absl::StatusOr<jinja::Value> v = JinjaFromJson(arguments);
  if (v.ok() && v->is_dict()) return *std::move(v);
  return jinja::Value(arguments);
}

jinja::Value MessageValue(const ChatMessage& m) {
  jinja::Dict d = {{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}};
  if (!m.tool_calls.empty()) {
    jinja::List calls;
    for (const ToolCall& c : m.tool_calls) {
      calls.emplace_back(jinja::Dict{
          {"id", jinja::Value(c.id)},
          {"type", jinja::Value("function")},
          {"function", jinja::Value(jinja::Dict{{"name", jinja::Value(c.name)},
                                                {"arguments", ArgumentsValue(c.arguments)}})},
      });
    }
    d.emplace_back("tool_calls", jinja::Value(std::move(calls)));
  }
  if (!m.tool_call_id.empty()) d.emplace_back("tool_call_id", jinja::Value(m.tool_call_id));
  if (!m.name.empty()) d.emplace_back("name", jinja::Value(m.name));
  if (!m.tools.empty()) d.emplace_back("tools", jinja::Value(m.tools));
  return jinja::Value(std::move(d));
}

void AppendChatMl(std::string& out, std::string_view role, std::string_view content) {
  StrAppend(&out, kImStart, role, "\n", content, kImEnd, "\n");
}

void AppendLlama3(std::string& out, std::string_view role, std::string_view content) {
  StrAppend(&out, kStartHeader, role, kEndHeader, "\n\n", Trim(content), kEotId);
}

}  // namespace

std::string ExtractChatMlDefaultSystem(std::string_view t) {
  const std::string_view head = "<|im_start|>system";
  for (size_t pos = t.find(head); pos != std::string_view::npos; pos = t.find(head, pos + 1)) {
    size_t start = pos + head.size();
    if (t.substr(start, 1) == "\n") {
      start += 1;
    } else if (t.substr(start, 2) == "\\n") {
      start += 2;
    } else {
      continue;
    }
    const size_t end = t.find(kImEnd, start);
    if (end == std::string_view::npos) break;
    const std::string_view body = t.substr(start, end - start);
    // A literal: no Jinja expression, no string concatenation or quote.
    if (body.empty() || body.find_first_of("{}'\"+") != std::string_view::npos) continue;
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '\\' && i + 1 < body.size() && body[i + 1] == 'n') {
        out.push_back('\n');
        ++i;
      } else {
        out.push_back(body[i]);
      }
    }
    return out;
  }
  return "";
}

ChatTemplate ChatTemplate::Detect(std::string_view template_text) {
  if (template_text.find(kImStart) != std::string_view::npos) {
    return ChatMl(ExtractChatMlDefaultSystem(template_text));
  }
  if (template_text.find(kStartHeader) != std::string_view::npos) return Llama3();
  return Raw();
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromJinja(std::string_view source, std::string name,
                                                     std::string bos_token, std::string eos_token) {
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(source);
  if (!t.ok()) return t.status();
  ChatTemplate out(Kind::kJinja, "");
  out.jinja_ = std::make_shared<const jinja::Template>(*std::move(t));
  out.name_ = std::move(name);
  out.bos_token_ = std::move(bos_token);
  out.eos_token_ = std::move(eos_token);
  out.source_ = std::string(source);
  return out;
}

absl::StatusOr<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                 bool add_generation_prompt,
                                                 std::string_view tools_json) const {
  return RenderAt(messages, add_generation_prompt, tools_json, absl::InfiniteFuture());
}

absl::StatusOr<std::string> ChatTemplate::RenderAt(std::span<const ChatMessage> messages,
                                                   bool add_generation_prompt,
                                                   std::string_view tools_json,
                                                   absl::Time now) const {
  if (kind_ != Kind::kJinja) {
    return absl::FailedPreconditionError("Render needs a Jinja chat template");
  }
  jinja::Value tools = jinja::Value::None();
  if (!tools_json.empty()) {
    absl::StatusOr<jinja::Value> parsed = JinjaFromJson(tools_json);
    if (!parsed.ok()) return parsed.status();
    if (!parsed->is_list()) return absl::InvalidArgumentError("tools must be a JSON array");
    tools = *std::move(parsed);
  }
  jinja::List list;
  for (const ChatMessage& m : messages) list.push_back(MessageValue(m));
  const jinja::Dict vars = {
      {"messages", jinja::Value(std::move(list))},
      {"add_generation_prompt", jinja::Value(add_generation_prompt)},
      {"bos_token", jinja::Value(bos_token_)},
      {"eos_token", jinja::Value(eos_token_)},
      {"tools", std::move(tools)},
      {"documents", jinja::Value::None()},
  };
  jinja::RenderOptions options;
  if (now != absl::InfiniteFuture()) {
    options.now = now;
    options.zone = absl::UTCTimeZone();
  }
  return jinja_->Render(vars, options);
}

std::string_view ChatTemplate::name() const {
  switch (kind_) {
    case Kind::kJinja:
      return name_;
    case Kind::kChatMl:
      return "chatml";
    case Kind::kLlama3:
      return "llama3";
    case Kind::kRaw:
      break;
  }
  return "raw";
}

std::string ChatTemplate::FormatTurn(std::span<const ChatMessage> messages, bool first) const {
  std::string out;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  switch (kind_) {
    case Kind::kChatMl:
      if (first && !has_system && !default_system_.empty()) {
        AppendChatMl(out, "system", default_system_);
      }
      for (const ChatMessage& m : messages) AppendChatMl(out, m.role, m.content);
      StrAppend(&out, kImStart, "assistant\n");
      break;
    case Kind::kLlama3:
      if (first) out += kBeginOfText;
      for (const ChatMessage& m : messages) AppendLlama3(out, m.role, m.content);
      StrAppend(&out, kStartHeader, "assistant", kEndHeader, "\n\n");
      break;
    case Kind::kRaw:
    case Kind::kJinja:  // rendered whole instead (Render)
      for (const ChatMessage& m : messages) StrAppend(&out, m.content, "\n");
      break;
  }
  return out;
}

std::string ChatTemplate::EndOfAssistantTurn() const {
  switch (kind_) {
    case Kind::kChatMl:
      return StrCat(kImEnd, "\n");
    case Kind::kLlama3:
      return std::string(kEotId);
    case Kind::kRaw:
    case Kind::kJinja:
      break;
  }
  return "\n";
}

}  // namespace llm::client
