#include "client/generate/jinja_json.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm::client {
namespace {

// nlohmann's SAX events into jinja values: each open container is built in
// a frame and becomes a Value when it closes.
class Builder {
 public:
  explicit Builder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return Add(jinja::Value::None()); }
  bool boolean(bool v) { return Add(jinja::Value(v)); }
  bool number_integer(nlohmann::json::number_integer_t v) {
    return Add(jinja::Value(static_cast<int64_t>(v)));
  }
  bool number_unsigned(nlohmann::json::number_unsigned_t v) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Add(jinja::Value(static_cast<double>(v)));
    }
    return Add(jinja::Value(static_cast<int64_t>(v)));
  }
  bool number_float(nlohmann::json::number_float_t v, const std::string&) {
    return Add(jinja::Value(static_cast<double>(v)));
  }
  bool string(std::string& v) { return Add(jinja::Value(std::move(v))); }
  bool binary(nlohmann::json::binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t) { return Open(/*object=*/true); }
  bool key(std::string& k) {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(/*object=*/false); }
  bool end_array() { return Close(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception&) {
    error_ = StrCat("not valid JSON at byte ", position > 0 ? position - 1 : 0);
    return false;
  }

  const std::string& error() const { return error_; }
  jinja::Value Take() { return std::move(root_); }

 private:
  struct Frame {
    bool object = false;
    jinja::List list;
    jinja::Dict dict;
    std::unordered_map<std::string, size_t> index;  // object: key -> place in dict
    std::string key;
  };

  bool Add(jinja::Value v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = frames_.back();
    if (!f.object) {
      f.list.push_back(std::move(v));
      return true;
    }
    auto [it, inserted] = f.index.emplace(f.key, f.dict.size());
    if (inserted) {
      f.dict.emplace_back(std::move(f.key), std::move(v));
    } else {
      f.dict[it->second].second = std::move(v);
    }
    return true;
  }
  bool Open(bool object) {
    if (static_cast<int>(frames_.size()) >= max_depth_) {
      error_ = StrCat("JSON nested deeper than ", max_depth_, " levels");
      return false;
    }
    frames_.emplace_back();
    frames_.back().object = object;
    return true;
  }
  bool Close() {
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    return Add(f.object ? jinja::Value(std::move(f.dict)) : jinja::Value(std::move(f.list)));
  }

  const int max_depth_;
  std::vector<Frame> frames_;
  jinja::Value root_;
  std::string error_;
};

}  // namespace

absl::StatusOr<jinja::Value> JinjaFromJson(std::string_view text, int max_depth) {
  // nlohmann's lexer takes a NUL outside a string for the end of the input.
  if (text.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("not valid JSON: a NUL byte");
  }
  Builder builder(max_depth);
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder,
                                            nlohmann::json::input_format_t::json,
                                            /*strict=*/true);
  if (!ok) {
    return absl::InvalidArgumentError(builder.error().empty() ? "not valid JSON" : builder.error());
  }
  return builder.Take();
}

}  // namespace llm::client
