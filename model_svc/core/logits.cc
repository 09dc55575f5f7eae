#include "model_svc/core/logits.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/half.h"
#include "model_svc/kernels/vec.h"

namespace llm::model {

float LogSumExp(std::span<const float> row) {
  const float max = kernels::MaxF32(row.data(), static_cast<int64_t>(row.size()));
  if (!std::isfinite(max)) return max;
  const double sum = kernels::SumExpF32(row.data(), static_cast<int64_t>(row.size()), max);
  return static_cast<float>(max + std::log(sum));
}

int32_t Argmax(const Logits& logits) {
  auto first_max = [](size_t n, auto value) {
    int32_t best = -1;
    float best_value = 0.0f;
    for (size_t i = 0; i < n; ++i) {
      const float v = value(i);
      if (best < 0 ? !std::isnan(v) : v > best_value) {
        best = static_cast<int32_t>(i);
        best_value = v;
      }
    }
    return best;
  };
  switch (logits.encoding) {
    case LogitsEncoding::kFloat32:
      return first_max(logits.values.size(), [&](size_t i) { return logits.values[i]; });
    case LogitsEncoding::kFloat16:
      return first_max(logits.halves.size(),
                       [&](size_t i) { return HalfToFloat(logits.halves[i]); });
    case LogitsEncoding::kTopN:
      return logits.top_ids.empty() ? -1 : logits.top_ids.front();
  }
  return -1;
}

namespace {

// EncodeLogits without the mask.
void EncodeUnmasked(std::span<const float> row, const LogitsSpec& spec, Logits* out) {
  out->encoding = spec.encoding;
  out->values.clear();
  out->halves.clear();
  out->top_ids.clear();
  out->top_logits.clear();
  out->log_sum_exp = LogSumExp(row);
  out->target_logit =
      spec.target >= 0 && static_cast<size_t>(spec.target) < row.size() ? row[spec.target] : 0.0f;
  switch (spec.encoding) {
    case LogitsEncoding::kFloat32:
      out->values.assign(row.begin(), row.end());
      break;
    case LogitsEncoding::kFloat16:
      out->halves.resize(row.size());
      for (size_t i = 0; i < row.size(); ++i) out->halves[i] = FloatToHalf(row[i]);
      break;
    case LogitsEncoding::kTopN: {
      const size_t n = std::min<size_t>(std::max(spec.top_n, 0), row.size());
      if (n == 0) break;
      auto greater = [&](int32_t a, int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      };
      // A min-heap of the best n so far (its front is the worst of them).
      // Once it is full, an id beats the front only with a strictly larger
      // logit (on a tie the front's lower id wins), so the scan jumps to the
      // next such logit (FirstAbove, 16 at a time), instead of comparing
      // every element (bench/README.md, "Measurements behind the code").
      std::vector<int32_t>& heap = out->top_ids;
      heap.reserve(n);
      const int64_t size = static_cast<int64_t>(row.size());
      int64_t i = 0;
      for (; i < size && heap.size() < n; ++i) {
        heap.push_back(static_cast<int32_t>(i));
        std::push_heap(heap.begin(), heap.end(), greater);
      }
      while (i < size &&
             (i += kernels::FirstAbove(row.data() + i, size - i, row[heap.front()])) < size) {
        std::pop_heap(heap.begin(), heap.end(), greater);
        heap.back() = static_cast<int32_t>(i);
        std::push_heap(heap.begin(), heap.end(), greater);
        ++i;
      }
      std::sort_heap(heap.begin(), heap.end(), greater);
      out->top_logits.reserve(n);
      for (int32_t id : out->top_ids) out->top_logits.push_back(row[id]);
      break;
    }
  }
}

// A masked row's top-N holds masked ids (-inf, last) only when fewer than
// top_n are allowed: they go.
void DropMaskedTop(const TokenMask& mask, Logits* out) {
  while (!out->top_ids.empty() && !mask.allowed(out->top_ids.back())) {
    out->top_ids.pop_back();
    out->top_logits.pop_back();
  }
}

// EncodeUnmasked of a row already masked by spec.mask.
void EncodeMasked(std::span<const float> masked, const LogitsSpec& spec, Logits* out) {
  LogitsSpec unmasked = spec;
  unmasked.mask = nullptr;
  EncodeUnmasked(masked, unmasked, out);
  DropMaskedTop(*spec.mask, out);
}

}  // namespace

void ApplyTokenMask(const TokenMask& mask, std::span<const float> row, std::span<float> out) {
  const size_t n = std::min(row.size(), out.size());
  const size_t covered = std::min(n, static_cast<size_t>(mask.vocab_size()));
  kernels::MaskF32(row.data(), mask.words().data(), out.data(), static_cast<int64_t>(covered));
  // Ids past the mask's vocabulary are not allowed.
  std::fill(out.begin() + covered, out.begin() + n, -std::numeric_limits<float>::infinity());
}

void EncodeLogits(std::span<const float> row, const LogitsSpec& spec, Logits* out) {
  if (spec.mask == nullptr) {
    EncodeUnmasked(row, spec, out);
    return;
  }
  thread_local std::vector<float> scratch;
  scratch.resize(row.size());
  ApplyTokenMask(*spec.mask, row, scratch);
  EncodeMasked(scratch, spec, out);
}

void EncodeLogitsInPlace(std::span<float> row, const LogitsSpec& spec, Logits* out) {
  if (spec.mask == nullptr) {
    EncodeUnmasked(row, spec, out);
    return;
  }
  ApplyTokenMask(*spec.mask, row, row);
  EncodeMasked(row, spec, out);
}

}  // namespace llm::model
