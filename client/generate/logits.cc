#include "client/generate/logits.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "common/strings.h"

namespace llm::client {

absl::StatusOr<LogitsMode> ParseLogitsMode(std::string_view text) {
  LogitsMode mode;
  if (text == "auto" || text.empty()) return mode;
  if (text == "full" || text == "fp32" || text == "float32") {
    mode.kind = LogitsMode::Kind::kFloat32;
    return mode;
  }
  if (text == "fp16" || text == "float16") {
    mode.kind = LogitsMode::Kind::kFloat16;
    return mode;
  }
  constexpr std::string_view kTopN = "top-n:";
  if (text.substr(0, kTopN.size()) == kTopN) {
    const std::string_view number = text.substr(kTopN.size());
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec == std::errc() && end == number.data() + number.size() && n >= 1) {
      mode.kind = LogitsMode::Kind::kTopN;
      mode.top_n = n;
      return mode;
    }
  }
  return absl::InvalidArgumentError(
      StrCat("bad logits encoding '", text, "': expected auto, full, fp16 or top-n:N (N >= 1)"));
}

std::string LogitsModeName(const LogitsMode& mode) {
  switch (mode.kind) {
    case LogitsMode::Kind::kFloat32:
      return "full";
    case LogitsMode::Kind::kFloat16:
      return "fp16";
    case LogitsMode::Kind::kTopN:
      return StrCat("top-n:", mode.top_n);
    case LogitsMode::Kind::kAuto:
      break;
  }
  return "auto";
}

v1::LogitsOptions ChooseLogitsOptions(const LogitsMode& mode, const sampler::SamplingParams& params,
                                      int64_t vocab_size) {
  v1::LogitsOptions options;
  switch (mode.kind) {
    case LogitsMode::Kind::kFloat32:
      options.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
      return options;
    case LogitsMode::Kind::kFloat16:
      options.set_encoding(v1::LogitsOptions::LOGITS_FLOAT16);
      return options;
    case LogitsMode::Kind::kTopN:
      options.set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
      options.set_top_n(static_cast<uint32_t>(std::clamp<int64_t>(mode.top_n, 1, vocab_size)));
      return options;
    case LogitsMode::Kind::kAuto:
      break;
  }
  const int64_t n = sampler::RecommendedTopN(params);
  if (n > 0 && 2 * n < vocab_size) {
    options.set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
    options.set_top_n(static_cast<uint32_t>(n));
  } else {
    options.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  }
  return options;
}

void TopLogprobs(const sampler::LogitsInput& input, int32_t k, std::vector<TopLogprob>* out) {
  out->clear();
  const std::span<const float> logits = input.logits();
  const std::span<const int32_t> ids = input.ids();
  const size_t take = std::min<size_t>(std::max(k, 0), logits.size());
  if (take == 0) return;
  auto id_of = [&](size_t i) { return input.is_top_n() ? ids[i] : static_cast<int32_t>(i); };
  // Indexes into `logits`, the best `take` first (a buffer kept per thread:
  // no allocation per token).
  thread_local std::vector<uint32_t> order;
  order.resize(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(take), order.end(),
                    [&](uint32_t a, uint32_t b) {
                      return logits[a] > logits[b] ||
                             (logits[a] == logits[b] && id_of(a) < id_of(b));
                    });
  double lse = input.log_sum_exp();
  if (!input.is_top_n()) {
    const double max = logits[order[0]];
    double sum = 0.0;
    for (const float x : logits) sum += std::exp(static_cast<double>(x) - max);
    lse = max + std::log(sum);
  }
  for (size_t j = 0; j < take; ++j) {
    const uint32_t i = order[j];
    // -inf: a token the mask disallowed (sorted last), not a likely one.
    if (std::isinf(logits[i]) && logits[i] < 0) break;
    out->push_back(
        {id_of(i), static_cast<float>(std::min(0.0, static_cast<double>(logits[i]) - lse))});
  }
}

absl::Status DecodedLogits::Decode(const v1::Logits& logits, int64_t vocab_size) {
  const size_t n = static_cast<size_t>(vocab_size);
  switch (logits.encoding()) {
    case v1::LogitsOptions::LOGITS_FLOAT32: {
      if (logits.float32().size() != 4 * n) {
        return absl::InvalidArgumentError(
            StrCat("float32 logits hold ", logits.float32().size(), " bytes, expected ", 4 * n));
      }
      values_.resize(n);
      std::memcpy(values_.data(), logits.float32().data(), 4 * n);  // little-endian host
      input_ = sampler::LogitsInput::Full(values_);
      return absl::OkStatus();
    }
    case v1::LogitsOptions::LOGITS_FLOAT16: {
      if (logits.float16().size() != 2 * n) {
        return absl::InvalidArgumentError(
            StrCat("float16 logits hold ", logits.float16().size(), " bytes, expected ", 2 * n));
      }
      values_.resize(n);
      const char* p = logits.float16().data();
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        values_[i] = HalfToFloat(h);
      }
      input_ = sampler::LogitsInput::Full(values_);
      return absl::OkStatus();
    }
    case v1::LogitsOptions::LOGITS_TOP_N: {
      if (logits.top_ids_size() != logits.top_logits_size() || logits.top_ids_size() == 0) {
        return absl::InvalidArgumentError(StrCat("top-N logits with ", logits.top_ids_size(),
                                                 " ids and ", logits.top_logits_size(), " logits"));
      }
      ids_.assign(logits.top_ids().begin(), logits.top_ids().end());
      values_.assign(logits.top_logits().begin(), logits.top_logits().end());
      input_ = sampler::LogitsInput::TopN(ids_, values_, logits.log_sum_exp(), vocab_size);
      return absl::OkStatus();
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(
      StrCat("unknown logits encoding ", static_cast<int>(logits.encoding())));
}

}  // namespace llm::client
