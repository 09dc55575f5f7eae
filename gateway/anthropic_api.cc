#include "gateway/anthropic_api.h"

#include <limits>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "gateway/json_fields.h"
#include "gateway/openai_tools.h"

namespace llm::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const ordered_json* Member(const ordered_json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// Text blocks ([{"type": "text", "text"}], or a string) joined by "\n".
std::optional<ApiError> ReadText(const json& content, const std::string& param, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return BadParam(param, "must be a string or an array of text blocks");
  out->clear();
  for (size_t i = 0; i < content.size(); ++i) {
    const json& b = content[i];
    if (!b.is_object() || b.value("type", json()) != "text" || !b.contains("text") ||
        !b["text"].is_string()) {
      return BadParam(StrCat(param, "[", i, "]"), "only text blocks are supported here");
    }
    if (i > 0) *out += "\n";
    *out += b["text"].get<std::string>();
  }
  return std::nullopt;
}

// One message's blocks into chat messages (a user message's tool results
// first, as Anthropic requires them, then its text).
std::optional<ApiError> ReadBlocks(const json& blocks, const ordered_json& ordered,
                                   const std::string& role, const std::string& param,
                                   std::vector<client::ChatMessage>* out) {
  client::ChatMessage text{role, ""};
  bool has_text = false;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const json& b = blocks[i];
    const std::string p = StrCat(param, "[", i, "]");
    const json* type = b.is_object() ? Field(b, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      return BadParam(p, "each content block is an object with a string type");
    }
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "text") {
      const json* s = Field(b, "text");
      if (s == nullptr || !s->is_string()) return BadParam(StrCat(p, ".text"), "must be a string");
      if (has_text) text.content += "\n";
      text.content += s->get<std::string>();
      has_text = true;
    } else if (t == "tool_use") {
      if (role != "assistant") return BadParam(p, "tool_use blocks are the assistant's");
      const json* id = Field(b, "id");
      const json* name = Field(b, "name");
      const ordered_json* input = Member(ordered[i], "input");
      if (id == nullptr || !id->is_string() || name == nullptr || !name->is_string()) {
        return BadParam(p, "a tool_use block has a string id and name");
      }
      if (input != nullptr && !input->is_object()) {
        return BadParam(StrCat(p, ".input"), "a tool_use block's input is an object");
      }
      text.tool_calls.push_back({id->get<std::string>(), name->get<std::string>(),
                                 input != nullptr ? Dump(*input) : std::string("{}")});
    } else if (t == "tool_result") {
      if (role != "user") return BadParam(p, "tool_result blocks are the user's");
      const json* id = Field(b, "tool_use_id");
      if (id == nullptr || !id->is_string()) {
        return BadParam(StrCat(p, ".tool_use_id"), "a tool_result names its tool_use_id");
      }
      client::ChatMessage result{"tool", ""};
      result.tool_call_id = id->get<std::string>();
      if (const json* c = Field(b, "content")) {
        if (auto e = ReadText(*c, StrCat(p, ".content"), &result.content)) return e;
      }
      bool is_error = false;
      if (auto e = ReadBool(b, "is_error", &is_error)) return e;
      if (is_error) result.content = StrCat("Error: ", result.content);
      out->push_back(std::move(result));
    } else if (t == "thinking" || t == "redacted_thinking") {
      continue;  // a client's copy of earlier reasoning: not shown to this model
    } else {
      return BadParam(StrCat(p, ".type"),
                      StrCat("content blocks of type ", QuoteForError(t),
                             " are not supported (text, tool_use and tool_result are)"));
    }
  }
  if (has_text || !text.tool_calls.empty()) out->push_back(std::move(text));
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const json& j, const ordered_json& o,
                                     const RequestLimits& limits, AnthropicRequest* r) {
  std::vector<client::ChatMessage>& out = r->chat.messages;
  const json* system = Field(j, "system");
  if (system != nullptr) {
    client::ChatMessage s{"system", ""};
    if (auto e = ReadText(*system, "system", &s.content)) return e;
    out.push_back(std::move(s));
  }
  const json* messages = nullptr;
  if (auto e = ReadMessageArray(j, limits.max_messages, &messages)) return e;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string p = StrCat("messages[", i, "]");
    const json* role = m.is_object() ? Field(m, "role") : nullptr;
    if (role == nullptr || (*role != "user" && *role != "assistant")) {
      return BadParam(StrCat(p, ".role"), "role must be 'user' or 'assistant'");
    }
    const std::string r_role = role->get<std::string>();
    const json* content = Field(m, "content");
    if (content == nullptr) return BadParam(StrCat(p, ".content"), "content: Field required");
    // A last assistant message of text: the answer continues it.
    const bool last = i + 1 == messages->size();
    if (content->is_string()) {
      if (last && r_role == "assistant") {
        r->prefill = content->get<std::string>();
      } else {
        out.push_back({r_role, content->get<std::string>()});
      }
      continue;
    }
    if (!content->is_array()) {
      return BadParam(StrCat(p, ".content"), "content must be a string or an array of blocks");
    }
    const size_t before = out.size();
    if (auto e = ReadBlocks(*content, o["messages"][i]["content"], r_role, StrCat(p, ".content"),
                            &out)) {
      return e;
    }
    if (last && r_role == "assistant" && out.size() == before + 1 &&
        out.back().tool_calls.empty()) {
      r->prefill = std::move(out.back().content);
      out.pop_back();
    }
  }
  if (!r->prefill.empty()) {
    const char c = r->prefill.back();
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      return BadParam("messages", "final assistant content cannot end with trailing whitespace");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadAnthropicTools(const json& j, const ordered_json& o,
                                           AnthropicRequest* r) {
  ChatRequest& chat = r->chat;
  const json* tools = Field(j, "tools");
  if (tools != nullptr) {
    if (!tools->is_array()) return BadParam("tools", "tools must be an array");
    if (tools->size() > static_cast<size_t>(kMaxTools)) {
      return BadParam("tools", StrCat("at most ", kMaxTools, " tools"));
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      const ordered_json& t = o["tools"][i];
      const std::string p = StrCat("tools[", i, "]");
      if (!t.is_object()) return BadParam(p, "each tool is an object");
      if (const ordered_json* type = Member(t, "type"); type != nullptr && *type != "custom") {
        return BadParam(StrCat(p, ".type"),
                        "server tools (a tool with a type) are not supported; give name, "
                        "description and input_schema");
      }
      const ordered_json* name = Member(t, "name");
      const ordered_json* schema = Member(t, "input_schema");
      if (name == nullptr) return BadParam(StrCat(p, ".name"), "name: Field required");
      if (schema == nullptr) {
        return BadParam(StrCat(p, ".input_schema"), "input_schema: Field required");
      }
      client::ToolSpec spec;
      if (auto e = ReadToolSpec(*name, Member(t, "description"), schema, StrCat(p, ".input_schema"),
                                &spec)) {
        if (e->param == StrCat(p, ".input_schema.name")) e->param = StrCat(p, ".name");
        return e;
      }
      for (const client::ToolSpec& other : chat.tools) {
        if (other.name == spec.name) {
          return BadParam(StrCat(p, ".name"),
                          StrCat("two tools are named ", QuoteForError(spec.name)));
        }
      }
      chat.tools.push_back(std::move(spec));
    }
  }
  client::ToolChoice& choice = chat.tool_choice;
  choice.mode = chat.tools.empty() ? client::ToolChoiceMode::kNone : client::ToolChoiceMode::kAuto;
  const json* tc = Field(j, "tool_choice");
  if (tc == nullptr) return std::nullopt;
  const json* type = tc->is_object() ? Field(*tc, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return BadParam("tool_choice",
                    "tool_choice is {\"type\": \"auto\" | \"any\" | \"tool\" | "
                    "\"none\"}");
  }
  const std::string& t = type->get_ref<const std::string&>();
  bool disable_parallel = false;
  if (auto e = ReadBool(*tc, "disable_parallel_tool_use", &disable_parallel)) {
    e->param = "tool_choice.disable_parallel_tool_use";
    return e;
  }
  choice.parallel = !disable_parallel;
  if (t == "none") {
    choice.mode = client::ToolChoiceMode::kNone;
    return std::nullopt;
  }
  if (t == "auto") {
    choice.mode = client::ToolChoiceMode::kAuto;
  } else if (t == "any") {
    choice.mode = client::ToolChoiceMode::kRequired;
  } else if (t == "tool") {
    const json* name = Field(*tc, "name");
    if (name == nullptr || !name->is_string()) {
      return BadParam("tool_choice.name", "tool_choice of type tool names the tool");
    }
    choice.mode = client::ToolChoiceMode::kFunction;
    choice.function = name->get<std::string>();
  } else {
    return BadParam("tool_choice.type", StrCat("tool_choice type must be auto, any, tool or none, "
                                               "got ",
                                               QuoteForError(t)));
  }
  if (chat.tools.empty()) return BadParam("tool_choice", "tool_choice needs tools");
  if (choice.mode == client::ToolChoiceMode::kFunction) {
    bool found = false;
    for (const client::ToolSpec& s : chat.tools) found = found || s.name == choice.function;
    if (!found) {
      return BadParam("tool_choice.name",
                      StrCat("tool_choice names the tool ", QuoteForError(choice.function),
                             ", which is not in tools"));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadRequest(const json& j, const ordered_json& o,
                                    const RequestLimits& limits, bool count_tokens,
                                    AnthropicRequest* r) {
  ChatRequest& chat = r->chat;
  const json* model = Field(j, "model");
  if (model == nullptr) return BadParam("model", "model: Field required");
  if (!model->is_string()) return BadParam("model", "model must be a string");
  chat.model = model->get<std::string>();
  if (auto e = ReadMessages(j, o, limits, r)) return e;
  if (auto e = ReadAnthropicTools(j, o, r)) return e;
  if (count_tokens) return std::nullopt;

  int64_t max_tokens = 0;
  if (auto e = ReadInt(j, "max_tokens", 1, std::numeric_limits<int32_t>::max(), &max_tokens,
                       &chat.has_max_tokens)) {
    return e;
  }
  if (!chat.has_max_tokens) return BadParam("max_tokens", "max_tokens: Field required");
  chat.params.max_tokens = static_cast<int32_t>(max_tokens);
  sampler::SamplingParams& s = chat.params.sampling;
  s.temperature = 1.0f;  // Anthropic's defaults
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  if (auto e = ReadNumber(j, "temperature", 0, 1, &s.temperature)) return e;
  if (auto e = ReadNumber(j, "top_p", 0, 1, &s.top_p, /*above_lo=*/true)) return e;
  int64_t top_k = 0;
  if (auto e = ReadInt(j, "top_k", 0, std::numeric_limits<int32_t>::max(), &top_k)) return e;
  s.top_k = static_cast<int32_t>(top_k);
  if (const json* stop = Field(j, "stop_sequences")) {
    if (!stop->is_array()) return BadParam("stop_sequences", "must be an array of strings");
    if (stop->size() > static_cast<size_t>(kMaxStopSequences)) {
      return BadParam("stop_sequences", StrCat("at most ", kMaxStopSequences, " stop sequences"));
    }
    for (const json& one : *stop) {
      if (!one.is_string() || one.get_ref<const std::string&>().empty()) {
        return BadParam("stop_sequences", "stop sequences are non-empty strings");
      }
      chat.params.stop.push_back(one.get<std::string>());
    }
  }
  if (auto e = ReadBool(j, "stream", &chat.stream)) return e;
  return std::nullopt;
}

std::string_view ErrorType(int status) {
  switch (status) {
    case 400:
    case 405:
    case 408:
    case 409:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return "api_error";
  }
}

class AnthropicWriter final : public ChoiceWriter {
 public:
  AnthropicWriter(ResponseInfo info, ToolParserFactory tools)
      : info_(std::move(info)), tools_(std::move(tools)) {}

  void Begin(int, const ChoicePrompt& prompt, Events* events) override {
    if (tools_) parser_ = tools_();
    if (!info_.stream) return;
    events->push_back({{"type", "message_start"},
                       {"message",
                        {{"id", info_.id},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", info_.model},
                         {"content", json::array()},
                         {"stop_reason", nullptr},
                         {"stop_sequence", nullptr},
                         {"usage", {{"input_tokens", prompt.ids.size()}, {"output_tokens", 0}}}}}});
  }

  void Token(int, const client::TokenEvent& e, Events* events) override {
    if (parser_ == nullptr) {
      Text(std::string(e.text), events);
      return;
    }
    std::vector<client::ToolCallEvent> released;
    parser_->Feed(e.text, &released);
    Release(released, events);
  }

  void End(int, const client::GenerateResult& r, Events* events) override {
    if (parser_ != nullptr) {
      std::vector<client::ToolCallEvent> released;
      parser_->Finish(&released);
      Release(released, events);
    }
    const bool called = parser_ != nullptr && !parser_->calls().empty();
    stop_reason_ = AnthropicStopReason(r.stop_reason, called);
    stop_sequence_ =
        r.stop_reason == client::StopReason::kStopString && !called ? json(r.stop_string) : json();
    if (!info_.stream) {
      FlushText();
      return;
    }
    CloseBlock(events);
    Ping(events);
    events->push_back(
        {{"type", "message_delta"},
         {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
         {"usage", {{"output_tokens", r.tokens.size()}}}});
    events->push_back({{"type", "message_stop"}});
  }

  json Response(int64_t prompt_tokens, int64_t completion_tokens) override {
    return {{"id", info_.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", info_.model},
            {"content", content_},
            {"stop_reason", stop_reason_},
            {"stop_sequence", stop_sequence_},
            {"usage", {{"input_tokens", prompt_tokens}, {"output_tokens", completion_tokens}}}};
  }
  json UsageChunk(int64_t, int64_t) override { return json(); }

 private:
  void Release(const std::vector<client::ToolCallEvent>& released, Events* events) {
    for (const client::ToolCallEvent& t : released) {
      if (t.index < 0) {
        Text(t.content, events);
        continue;
      }
      if (!info_.stream) {
        FlushText();
        json input = json::parse(t.call.arguments, nullptr, /*allow_exceptions=*/false);
        content_.push_back({{"type", "tool_use"},
                            {"id", t.call.id},
                            {"name", t.call.name},
                            {"input", input.is_discarded() ? json::object() : std::move(input)}});
        continue;
      }
      CloseBlock(events);
      const int index = blocks_++;
      events->push_back({{"type", "content_block_start"},
                         {"index", index},
                         {"content_block",
                          {{"type", "tool_use"},
                           {"id", t.call.id},
                           {"name", t.call.name},
                           {"input", json::object()}}}});
      Ping(events);
      events->push_back(
          {{"type", "content_block_delta"},
           {"index", index},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", t.call.arguments}}}});
      events->push_back({{"type", "content_block_stop"}, {"index", index}});
    }
  }

  void Text(const std::string& text, Events* events) {
    if (text.empty()) return;
    if (!info_.stream) {
      text_ += text;
      return;
    }
    if (!open_) {
      events->push_back({{"type", "content_block_start"},
                         {"index", blocks_},
                         {"content_block", {{"type", "text"}, {"text", ""}}}});
      open_ = true;
      Ping(events);
    }
    events->push_back({{"type", "content_block_delta"},
                       {"index", blocks_},
                       {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }

  // Non-streamed: the text so far as a block.
  void FlushText() {
    if (!text_.empty()) content_.push_back({{"type", "text"}, {"text", std::move(text_)}});
    text_.clear();
  }

  void CloseBlock(Events* events) {
    if (!open_) return;
    events->push_back({{"type", "content_block_stop"}, {"index", blocks_}});
    ++blocks_;
    open_ = false;
  }

  // One ping, after the first block starts (or before the end).
  void Ping(Events* events) {
    if (pinged_) return;
    events->push_back({{"type", "ping"}});
    pinged_ = true;
  }

  const ResponseInfo info_;
  const ToolParserFactory tools_;
  std::unique_ptr<client::ToolCallParser> parser_;
  json content_ = json::array();  // non-streamed: the blocks
  std::string text_;              // non-streamed: the text block being written
  bool open_ = false;             // streamed: a text block is open (its index: blocks_)
  int blocks_ = 0;
  bool pinged_ = false;
  std::string stop_reason_ = "end_turn";
  json stop_sequence_;
};

}  // namespace

std::optional<ApiError> ParseAnthropicRequest(std::string_view body, const RequestLimits& limits,
                                              bool count_tokens, AnthropicRequest* out) {
  json j;
  if (auto e = ParseJsonBody(body, &j)) return e;
  if (!j.is_object()) return BadParam("", "the request body must be a JSON object");
  ordered_json o;  // the same, keeping key order (tool schemas, tool_use inputs)
  if (auto e = ParseJsonBody(body, &o)) return e;
  AnthropicRequest r;
  if (auto e = ReadRequest(j, o, limits, count_tokens, &r)) return e;
  *out = std::move(r);
  return std::nullopt;
}

json AnthropicErrorJson(const ApiError& error) {
  return {{"type", "error"},
          {"error", {{"type", ErrorType(error.http_status)}, {"message", error.message}}}};
}

std::unique_ptr<ChoiceWriter> NewAnthropicWriter(ResponseInfo info, ToolParserFactory tools) {
  return std::make_unique<AnthropicWriter>(std::move(info), std::move(tools));
}

std::string_view AnthropicStopReason(client::StopReason reason, bool called_tools) {
  switch (reason) {
    case client::StopReason::kEos:
      return called_tools ? "tool_use" : "end_turn";
    case client::StopReason::kStopString:
      return called_tools ? "tool_use" : "stop_sequence";
    case client::StopReason::kMaxTokens:
    case client::StopReason::kContext:
    case client::StopReason::kCancelled:
      break;
  }
  return "max_tokens";
}

}  // namespace llm::gateway
