#include "gateway/api_error.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace llm::gateway {
namespace {

using nlohmann::json;

// nlohmann's SAX events into a json value, as its own DOM parser builds it
// (a repeated key: the last wins), refusing to open a container past
// `max_depth`. Containers are built in place: stack_ points at the open
// ones, each the last element of its parent, which grows no further until
// the child closes (so the pointers stay valid). An ordered_json object
// (a vector of members, whose operator[] searches them one by one) finds a
// repeated key through a hash table per open object, so that an object of
// many keys still parses in linear time; the key keeps its first place.
template <class Json>
class DepthBoundedBuilder {
 public:
  using json = Json;
  static constexpr bool kOrdered = std::is_same_v<Json, nlohmann::ordered_json>;

  DepthBoundedBuilder(json* root, int max_depth) : root_(root), max_depth_(max_depth) {}

  bool null() { return Add(nullptr) != nullptr; }
  bool boolean(bool v) { return Add(v) != nullptr; }
  bool number_integer(typename json::number_integer_t v) { return Add(v) != nullptr; }
  bool number_unsigned(typename json::number_unsigned_t v) { return Add(v) != nullptr; }
  bool number_float(typename json::number_float_t v, const std::string&) {
    return Add(v) != nullptr;
  }
  bool string(std::string& v) { return Add(std::move(v)) != nullptr; }
  bool binary(typename json::binary_t& v) { return Add(json::binary(std::move(v))) != nullptr; }
  bool start_object(std::size_t) { return Open(json::object()); }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(json::array()); }
  bool end_array() { return Close(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception& ex) {
    error_position_ = position;
    error_what_ = ex.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  // nlohmann's position of a syntax error (1-based: the byte it stopped
  // at), 0 when none; its message.
  std::size_t error_position() const { return error_position_; }
  const std::string& error_what() const { return error_what_; }

 private:
  json* Add(json v) {
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    if constexpr (kOrdered) {
      // The members as the vector they are (ordered_map's own operator[]
      // and emplace search by key).
      auto& members = static_cast<typename json::object_t::Container&>(
          parent.template get_ref<typename json::object_t&>());
      auto [it, inserted] = keys_[stack_.size() - 1].emplace(key_, members.size());
      if (!inserted) {
        json& slot = members[it->second].second;
        slot = std::move(v);
        return &slot;
      }
      members.emplace_back(key_, std::move(v));
      return &members.back().second;
    } else {
      json& slot = parent[key_];
      slot = std::move(v);
      return &slot;
    }
  }
  bool Open(json container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    stack_.push_back(Add(std::move(container)));
    if constexpr (kOrdered) keys_.resize(stack_.size());
    return true;
  }
  bool Close() {
    stack_.pop_back();
    if constexpr (kOrdered) keys_.pop_back();
    return true;
  }

  json* const root_;
  const int max_depth_;
  std::vector<json*> stack_;
  // kOrdered: per open container, its object keys' places.
  std::vector<std::unordered_map<std::string, size_t>> keys_;
  std::string key_;
  bool too_deep_ = false;
  std::size_t error_position_ = 0;
  std::string error_what_;
};

// " at byte offset O (line L, column C)" for a 0-based byte offset.
std::string Where(std::string_view body, std::size_t offset) {
  offset = std::min(offset, body.size());
  const std::string_view before = body.substr(0, offset);
  const std::size_t line =
      1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  const std::size_t line_start = before.rfind('\n');
  const std::size_t column =
      line_start == std::string_view::npos ? offset + 1 : offset - line_start;
  return StrCat(" at byte offset ", offset, " (line ", line, ", column ", column, ")");
}

// nlohmann's reason ("syntax error while parsing object - unexpected end of
// input; expected string literal") without its position and without the
// "last read: '...'" part, which quotes the body.
std::string Reason(const std::string& what) {
  std::string reason = "syntax error";
  if (const std::size_t at = what.find("syntax error"); at != std::string::npos) {
    reason = what.substr(at);
  }
  if (const std::size_t last = reason.find("; last read: '"); last != std::string::npos) {
    reason.resize(last);
  }
  if (reason.size() > 200) reason.resize(200);  // nlohmann's own words only; bounded anyway
  return reason;
}

ApiError NotJson(std::string_view body, std::string_view reason, std::size_t offset) {
  ApiError e;
  e.message = StrCat("the request body is not valid JSON: ", reason, Where(body, offset));
  return e;
}

}  // namespace

ApiError BadParam(std::string_view param, std::string_view message) {
  ApiError e;
  e.http_status = 400;
  e.message = std::string(message);
  e.param = std::string(param);
  return e;
}

nlohmann::json ErrorJson(const ApiError& error) {
  json e;
  e["message"] = error.message;
  e["type"] = error.type;
  e["param"] = error.param.empty() ? json() : json(error.param);
  e["code"] = error.code.empty() ? json() : json(error.code);
  return json{{"error", e}};
}

template <class Json>
std::optional<ApiError> ParseBody(std::string_view body, Json* out, int max_depth) {
  // nlohmann's lexer reads a NUL byte outside a string as the end of the
  // input, so "{}\0garbage" would parse: JSON text never holds one (in a
  // string it must be escaped), so the text ends before the first NUL and
  // the NUL is the error unless something before it is.
  const std::size_t nul = body.find('\0');
  const std::string_view text = body.substr(0, nul);
  Json value;
  DepthBoundedBuilder<Json> builder(&value, max_depth);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json,
                                  /*strict=*/true);
  if (builder.too_deep()) {
    ApiError e;
    e.message =
        StrCat("the request body nests arrays and objects deeper than ", max_depth, " levels");
    return e;
  }
  // nlohmann's position is 1-based; text.size() + 1 is where it met the end.
  const std::size_t error_at = ok ? text.size() + 1 : builder.error_position();
  if (nul != std::string_view::npos && error_at > text.size()) {
    return NotJson(body, "a NUL byte", nul);
  }
  if (!ok) {
    return NotJson(body, Reason(builder.error_what()), error_at > 0 ? error_at - 1 : 0);
  }
  *out = std::move(value);
  return std::nullopt;
}

std::optional<ApiError> ParseJsonBody(std::string_view body, nlohmann::json* out, int max_depth) {
  return ParseBody(body, out, max_depth);
}

std::optional<ApiError> ParseJsonBody(std::string_view body, nlohmann::ordered_json* out,
                                      int max_depth) {
  return ParseBody(body, out, max_depth);
}

std::string QuoteForError(std::string_view s) {
  constexpr std::size_t kMax = 100;
  if (s.size() <= kMax) return StrCat("'", s, "'");
  std::size_t cut = kMax;  // back to a character's first byte
  while (cut > 0 && (static_cast<uint8_t>(s[cut]) & 0xC0) == 0x80) --cut;
  return StrCat("'", s.substr(0, cut), "...' (", s.size(), " bytes)");
}

std::string DescribeForError(const nlohmann::json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return QuoteForError(value.get_ref<const std::string&>());
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::binary:
      return "binary data";
    default:
      return value.dump();  // a scalar: not recursive, at most a number's length
  }
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace llm::gateway
