// The sampler (see sampler.h and docs/sampler.md).
//
// Two paths:
//  - the list path (SampleList): an explicit list of candidates sorted by
//    (logit desc, id asc). Used for top-N input and for full logits with
//    top-k (the k best found by a bounded heap over one vectorized scan).
//  - the vocabulary path (SampleFull without top-k): probabilities for the
//    whole vocabulary in probs_, filters expressed as a cut "p > tau, plus the
//    lowest `quota` ids with p == tau", and a vectorized draw in id order.
//    Top-p finds its cut without sorting (TopPCut).
// Both draw in increasing id order.
#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/status_macros.h"
#include "common/strings.h"
#include "sampler/kernels.h"

namespace llm::sampler {
namespace {

using internal::Candidate;
using internal::Kernels;
using internal::Patch;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFloatMax = std::numeric_limits<float>::max();
constexpr float kLog2e = 1.44269504088896340736f;
constexpr int64_t kAllTies = std::numeric_limits<int64_t>::max();
// TopPCut: passes of kMaxThresholds thresholds each narrow the band of
// probabilities that holds the boundary, until it has at most kTopPBand
// tokens (or kTopPRounds passes ran); the band is then sorted.
constexpr int kTopPRounds = 5;
constexpr int kFirstThresholds = 4;
constexpr double kTopPBand = 512.0;

template <typename... Args>
absl::Status InvalidArgument(const Args&... args) {
  return absl::InvalidArgumentError(StrCat(args...));
}

// The candidate order: larger logit first, then lower id.
bool Better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

bool PenaltiesOn(const SamplingParams& p) {
  return p.penalty_last_n != 0 && (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
                                   p.frequency_penalty != 0.0f);
}

// The logit of a token after its bias and penalties. A finite logit stays
// finite (clamped to the float range); only a -inf bias gives -inf. The
// result is non-decreasing in x, which the top-N bounds rely on.
float ApplyPatch(float x, const Patch& patch, const SamplingParams& p) {
  double y = static_cast<double>(x) + patch.bias;
  if (patch.count > 0) {
    const double r = p.repetition_penalty;
    y = y > 0.0 ? y / r : y * r;
    y -= static_cast<double>(patch.count) * p.frequency_penalty + p.presence_penalty;
  }
  if (std::isinf(y) && y < 0) return -kInf;
  return static_cast<float>(std::clamp<double>(y, -kFloatMax, kFloatMax));
}

// log2(e) / temperature, clamped to the float range (temperature > 0).
float ExpScale(float temperature) {
  const double s = static_cast<double>(kLog2e) / temperature;
  return s > kFloatMax ? kFloatMax : static_cast<float>(s);
}

absl::Status NonFiniteLogit(std::span<const float> logits, std::string_view what) {
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      return InvalidArgument(what, " ", i, " is ", logits[i], "; logits must be finite");
    }
  }
  return InvalidArgument("logits must be finite");
}

// The largest logit of full logits that may hold -inf: the tokens a token
// mask (llm.v1.TokenMask) disallowed. NaN and +inf are refused, as is a row
// that allows nothing. A scalar pass, run only when the vectorized scan saw
// a non-finite logit.
absl::StatusOr<float> MaxOfMaskedLogits(std::span<const float> logits) {
  float max = -kInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v) || v == kInf) {
      return InvalidArgument("logit ", i, " is ", v,
                             "; logits must be finite, or -inf for a masked token");
    }
    max = std::max(max, v);
  }
  if (max == -kInf) return InvalidArgument("every logit is -inf: the token mask allows nothing");
  return max;
}

}  // namespace

absl::Status Validate(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) {
    return InvalidArgument("temperature must be finite and >= 0 (0 = greedy), got ", p.temperature);
  }
  if (p.top_k < 0) return InvalidArgument("top_k must be >= 0 (0 = off), got ", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return InvalidArgument("top_p must be in (0, 1] (1 = off), got ", p.top_p);
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return InvalidArgument("min_p must be in [0, 1] (0 = off), got ", p.min_p);
  }
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f) {
    return InvalidArgument("repetition_penalty must be finite and > 0 (1 = off), got ",
                           p.repetition_penalty);
  }
  if (!std::isfinite(p.presence_penalty)) {
    return InvalidArgument("presence_penalty must be finite, got ", p.presence_penalty);
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return InvalidArgument("frequency_penalty must be finite, got ", p.frequency_penalty);
  }
  if (p.penalty_last_n < -1) {
    return InvalidArgument("penalty_last_n must be >= -1 (-1 = whole history, 0 = off), got ",
                           p.penalty_last_n);
  }
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const LogitBias& b = p.logit_bias[i];
    if (b.id < 0) return InvalidArgument("logit_bias[", i, "].id must be >= 0, got ", b.id);
    if (std::isnan(b.bias) || b.bias == kInf) {
      return InvalidArgument("logit_bias[", i, "].bias must be finite or -inf, got ", b.bias);
    }
  }
  return absl::OkStatus();
}

int64_t RecommendedTopN(const SamplingParams& p) {
  int64_t n = 0;
  if (p.temperature == 0.0f) {
    n = 1;
  } else if (p.top_k > 0) {
    n = p.top_k;
  } else {
    return 0;
  }
  if (PenaltiesOn(p)) {
    // Only lowering penalties keep the tail below: each penalized token can
    // drop out of the N, so N needs one spare candidate per window slot.
    if (p.repetition_penalty < 1.0f || p.presence_penalty < 0.0f || p.frequency_penalty < 0.0f ||
        p.penalty_last_n < 0) {
      return 0;
    }
    n += p.penalty_last_n;
  }
  for (const LogitBias& b : p.logit_bias) {
    if (b.bias > 0.0f) return 0;
    if (b.bias < 0.0f) ++n;
  }
  return n;
}

bool PicksArgmax(const SamplingParams& params) {
  return params.temperature == 0.0f && !PenaltiesOn(params) && params.logit_bias.empty();
}

bool IsExactForTopN(const SamplingParams& params, int64_t n) {
  const int64_t needed = RecommendedTopN(params);
  return needed > 0 && n >= needed;
}

Sampler::Sampler() : Sampler(internal::BestKernels()) {}

Sampler::Sampler(const internal::Kernels& kernels) : kernels_(&kernels) {}

absl::StatusOr<Sample> Sampler::SampleToken(const LogitsInput& input, const SamplingParams& params,
                                            std::span<const int32_t> history, Rng& rng) {
  LLM_RETURN_IF_ERROR(Validate(params));
  if (input.is_top_n()) return SampleTopN(input, params, history, rng);
  return SampleFull(input.logits(), params, history, rng);
}

absl::Status Sampler::BuildPatches(const SamplingParams& p, std::span<const int32_t> history,
                                   int64_t vocab_size) {
  patches_.clear();
  if (PenaltiesOn(p)) {
    const size_t n = history.size();
    const size_t w = p.penalty_last_n < 0 ? n : std::min(n, static_cast<size_t>(p.penalty_last_n));
    window_.assign(history.end() - static_cast<std::ptrdiff_t>(w), history.end());
    for (size_t i = 0; i < w; ++i) {
      if (window_[i] < 0 || window_[i] >= vocab_size) {
        return InvalidArgument("history token ", window_[i], " at position ", n - w + i,
                               " is outside the vocabulary [0, ", vocab_size, ")");
      }
    }
    std::sort(window_.begin(), window_.end());
    for (size_t i = 0; i < w;) {
      size_t j = i;
      while (j < w && window_[j] == window_[i]) ++j;
      patches_.push_back({window_[i], static_cast<int32_t>(j - i), 0.0});
      i = j;
    }
  }
  const size_t num_penalized = patches_.size();
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const LogitBias& b = p.logit_bias[i];
    if (b.id >= vocab_size) {
      return InvalidArgument("logit_bias[", i, "].id ", b.id, " is outside the vocabulary [0, ",
                             vocab_size, ")");
    }
    if (b.bias != 0.0f) patches_.push_back({b.id, 0, b.bias});
  }
  if (patches_.size() > num_penalized) {
    // Merge the entries of each id; sorting by bias too fixes the order in
    // which several biases of one id are summed.
    std::sort(patches_.begin(), patches_.end(), [](const Patch& a, const Patch& b) {
      return a.id < b.id || (a.id == b.id && a.bias < b.bias);
    });
    size_t out = 0;
    for (size_t i = 0; i < patches_.size(); ++i) {
      if (out > 0 && patches_[out - 1].id == patches_[i].id) {
        patches_[out - 1].count += patches_[i].count;
        patches_[out - 1].bias += patches_[i].bias;
      } else {
        patches_[out++] = patches_[i];
      }
    }
    patches_.resize(out);
  }
  return absl::OkStatus();
}

void Sampler::HeapTopK(std::span<const float> logits, std::span<const float> raw, int64_t k) {
  const int64_t n = static_cast<int64_t>(logits.size());
  candidates_.clear();
  for (int64_t i = 0; i < k; ++i) {
    candidates_.push_back({logits[i], raw[i], static_cast<int32_t>(i), false});
  }
  // With Better as "less", the heap's front is the worst of the k.
  std::make_heap(candidates_.begin(), candidates_.end(), Better);
  int64_t i = k;
  while (i < n) {
    // Later ids lose ties, so only a strictly larger logit gets in.
    const float above = std::nextafter(candidates_.front().logit, kInf);
    if (above == kInf) break;
    i = kernels_->find_first_ge(logits.data(), i, n, above);
    if (i >= n) break;
    std::pop_heap(candidates_.begin(), candidates_.end(), Better);
    candidates_.back() = {logits[i], raw[i], static_cast<int32_t>(i), false};
    std::push_heap(candidates_.begin(), candidates_.end(), Better);
    ++i;
  }
}

std::pair<float, int64_t> Sampler::TopPCut(double total, double top_p) {
  const Kernels& k = *kernels_;
  const int64_t n = static_cast<int64_t>(probs_.size());
  const double target = top_p * total;
  // Tokens with p < (1 - top_p) * total / n weigh less than (1 - top_p) * total
  // together, so the tokens above that bound already reach the target: the
  // cut is at or above it (halved against rounding).
  float lo = static_cast<float>(0.5 * (1.0 - top_p) * total / static_cast<double>(n));
  // Invariant: mass(p >= lo) >= target > mass(p >= hi), as measured.
  float hi = kInf;
  double mass_lo = total;
  double mass_hi = 0.0;
  // The tokens that may hold the cut: at first the whole vocabulary, later
  // the band [lo, hi) of an earlier round, compacted (values, ids). `base` is
  // the mass of the tokens above the set (mass_hi when it was compacted), so
  // mass(p >= t) = base + (the set's mass of p >= t) for t in [lo, hi).
  for (auto& v : band_val_) v.resize(n);
  for (auto& v : band_idx_) v.resize(n);
  const float* set_val = probs_.data();
  const int32_t* set_idx = nullptr;  // null: the identity
  int64_t m = n;
  double base = 0.0;
  int buffer = 0;
  auto compact = [&] {
    int32_t* idx = band_idx_[buffer].data();
    const int64_t count = k.collect_band(set_val, m, lo, hi, idx, band_val_[buffer].data());
    if (set_idx != nullptr) {
      for (int64_t i = 0; i < count; ++i) idx[i] = set_idx[idx[i]];
    }
    base = mass_hi;
    set_val = band_val_[buffer].data();
    set_idx = idx;
    m = count;
    buffer ^= 1;
  };
  for (int round = 0; round < kTopPRounds; ++round) {
    const double band = (mass_lo - mass_hi) / lo;  // at least the tokens in [lo, hi)
    if (band <= kTopPBand) break;
    if (hi == kInf && lo >= 1.0f) break;  // many tokens tie at the maximum
    // After the first pass, work on the band alone (a compaction costs about
    // as much as a pass with few thresholds).
    if (round > 0 && (m == n || band <= 0.5 * static_cast<double>(m))) compact();
    // The first pass, over the whole vocabulary, has fewer thresholds (each
    // costs a compare, a mask and an add per token); later ones run on the
    // compacted band and can afford more.
    const int count = m == n ? kFirstThresholds : internal::kMaxThresholds;
    float th[internal::kMaxThresholds];
    if (hi == kInf) {
      // Geometric from the largest probability (exactly 1) down towards lo.
      for (int j = 0; j < count; ++j) {
        th[j] =
            static_cast<float>(std::pow(static_cast<double>(lo), static_cast<double>(j) / count));
      }
    } else {
      if (static_cast<double>(hi) <= static_cast<double>(lo) * (1.0 + 1e-6)) break;  // ties
      const double ratio = static_cast<double>(lo) / hi;
      for (int j = 0; j < count; ++j) {
        th[j] = static_cast<float>(hi * std::pow(ratio, static_cast<double>(j + 1) / (count + 1)));
      }
    }
    double mass[internal::kMaxThresholds];
    k.mass_at_or_above(set_val, m, th, count, mass);
    // Thresholds decrease, masses increase.
    for (int j = 0; j < count; ++j) {
      if (!(th[j] > lo && th[j] < hi)) continue;
      if (base + mass[j] >= target) {
        lo = th[j];
        mass_lo = base + mass[j];
        break;
      }
      hi = th[j];
      mass_hi = base + mass[j];
    }
  }
  compact();  // the final band
  pairs_.clear();
  bool all_equal = true;
  for (int64_t i = 0; i < m; ++i) {
    pairs_.emplace_back(set_val[i], set_idx[i]);
    all_equal = all_equal && set_val[i] == set_val[0];
  }
  if (!all_equal) {  // (ids are in increasing order already)
    std::sort(pairs_.begin(), pairs_.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
  }
  double cum = base;
  for (size_t i = 0; i < pairs_.size(); ++i) {
    cum += pairs_[i].first;
    if (cum < target) continue;
    const float tau = pairs_[i].first;
    size_t first = i;
    while (first > 0 && pairs_[first - 1].first == tau) --first;
    const bool last_tie = i + 1 == pairs_.size() || pairs_[i + 1].first != tau;
    return {tau, last_tie ? kAllTies : static_cast<int64_t>(i - first + 1)};
  }
  // Rounding kept the sum just below the target: keep the whole band (with an
  // empty band, everything >= hi, which is everything >= lo).
  if (pairs_.empty()) return {lo, kAllTies};
  return {pairs_.back().first, kAllTies};
}

Sampler::ListResult Sampler::SampleList(const SamplingParams& p, double tail_mass, Rng& rng) {
  const int64_t n = static_cast<int64_t>(candidates_.size());
  int64_t keep = n;
  if (p.top_k > 0 && p.top_k < n) {
    keep = p.top_k;
    std::nth_element(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), Better);
  }
  std::sort(candidates_.begin(), candidates_.begin() + keep, Better);
  list_logits_.resize(keep);
  list_probs_.resize(keep);
  for (int64_t j = 0; j < keep; ++j) list_logits_[j] = candidates_[j].logit;
  // list_probs_[0] == 1 exactly (the exponent is 0 there).
  const double total = kernels_->exp_sum(list_logits_.data(), keep, list_logits_[0],
                                         ExpScale(p.temperature), list_probs_.data());
  ListResult r;
  r.kept_by_top_p = keep;
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * (total + tail_mass);
    double cum = 0.0;
    for (int64_t j = 0; j < keep; ++j) {
      cum += list_probs_[j];
      if (cum >= target) {
        r.kept_by_top_p = j + 1;
        r.top_p_closed = true;
        break;
      }
    }
  }
  r.kept_by_min_p = keep;
  if (p.min_p > 0.0f) {
    r.kept_by_min_p = 0;
    while (r.kept_by_min_p < keep && list_probs_[r.kept_by_min_p] >= p.min_p) ++r.kept_by_min_p;
  }
  int64_t kept = std::min(r.kept_by_top_p, r.kept_by_min_p);
  while (kept > 1 && !(list_probs_[kept - 1] > 0.0f)) --kept;  // zeros sort last
  r.num_candidates = static_cast<int32_t>(kept);

  // Draw in increasing id order.
  pairs_.clear();
  for (int64_t j = 0; j < kept; ++j) pairs_.emplace_back(list_probs_[j], static_cast<int32_t>(j));
  std::sort(pairs_.begin(), pairs_.end(), [this](const auto& a, const auto& b) {
    return candidates_[a.second].id < candidates_[b.second].id;
  });
  double weight = 0.0;
  for (const auto& [q, j] : pairs_) weight += q;
  const double target = rng.Uniform() * weight;
  double cum = 0.0;
  int32_t chosen = pairs_.back().second;
  for (const auto& [q, j] : pairs_) {
    cum += q;
    if (cum > target) {
      chosen = j;
      break;
    }
  }
  r.id = candidates_[chosen].id;
  r.raw = candidates_[chosen].raw;
  return r;
}

absl::StatusOr<Sample> Sampler::SampleFull(std::span<const float> x, const SamplingParams& p,
                                           std::span<const int32_t> history, Rng& rng) {
  const Kernels& k = *kernels_;
  const int64_t n = static_cast<int64_t>(x.size());
  if (n == 0) return InvalidArgument("no logits (the vocabulary is empty)");
  if (n > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("vocabulary of ", n, " tokens is too large for int32 ids");
  }
  internal::MaxScan scan = k.scan_max(x.data(), n);
  if (!scan.all_finite) {  // masked tokens are -inf; anything else is an error
    LLM_ASSIGN_OR_RETURN(scan.max, MaxOfMaskedLogits(x));
  }
  LLM_RETURN_IF_ERROR(BuildPatches(p, history, n));

  std::span<const float> y = x;
  float y_max = scan.max;
  if (!patches_.empty()) {
    work_.resize(n);
    std::memcpy(work_.data(), x.data(), sizeof(float) * n);
    // The new max: the largest patched logit or the old max, unless a patched
    // token held the old max (then scan again).
    bool rescan = false;
    for (const Patch& patch : patches_) {
      const float v = ApplyPatch(x[patch.id], patch, p);
      work_[patch.id] = v;
      y_max = std::max(y_max, v);
      rescan = rescan || x[patch.id] == scan.max;
    }
    y = work_;
    if (rescan) y_max = k.scan_max(work_.data(), n).max;
    if (y_max == -kInf) return InvalidArgument("every token is banned by a -inf logit_bias");
  }

  const bool greedy = p.temperature == 0.0f;
  const bool top_k = p.top_k > 0 && p.top_k < n;
  // Without bias, penalties or temperature the sampling pass is the raw one.
  const bool shared = !greedy && !top_k && patches_.empty() && p.temperature == 1.0f;
  double raw_sum = shared ? 0.0 : k.exp_sum(x.data(), n, scan.max, kLog2e, nullptr);
  auto logprob = [&](int64_t id) {
    const double lp = (static_cast<double>(x[id]) - scan.max) - std::log(raw_sum);
    return static_cast<float>(std::min(0.0, lp));
  };

  if (greedy) {
    const int64_t id = k.find_first_ge(y.data(), 0, n, y_max);
    return Sample{static_cast<int32_t>(id), logprob(id), 1, true};
  }
  if (top_k) {
    HeapTopK(y, x, p.top_k);
    const ListResult r = SampleList(p, 0.0, rng);
    return Sample{r.id, logprob(r.id), r.num_candidates, true};
  }

  probs_.resize(n);
  const double total = k.exp_sum(y.data(), n, y_max, ExpScale(p.temperature), probs_.data());
  if (shared) raw_sum = total;
  // The kept set: p > tau, plus the `quota` lowest ids with p == tau. With no
  // filter, (0, 0): every token with a nonzero probability.
  std::pair<float, int64_t> cut = {0.0f, 0};
  if (p.top_p < 1.0f) cut = TopPCut(total, p.top_p);
  // min-p after top-p: p_max is exactly 1, so its cut is p >= min_p.
  if (p.min_p > cut.first) cut = {p.min_p, kAllTies};
  const auto [tau, quota] = cut;

  const double u = rng.Uniform();
  int64_t id = -1;
  int64_t count = 0;
  if (quota == kAllTies || quota == 0) {
    const bool inclusive = quota == kAllTies;
    const internal::MassCount selected = k.selected_mass(probs_.data(), n, tau, inclusive);
    count = selected.count;
    id = k.draw(probs_.data(), n, tau, inclusive, u * selected.mass);
    if (id < 0) {  // u * mass rounded up to mass: the last kept token
      for (id = n - 1; id > 0; --id) {
        const float q = probs_[id];
        if ((inclusive ? q >= tau : q > tau) && q > 0.0f) break;
      }
    }
  } else {
    // Ties at the top-p boundary split by id (rare): a scalar walk.
    const internal::MassCount above = k.selected_mass(probs_.data(), n, tau, false);
    count = above.count + quota;
    const double target = u * (above.mass + static_cast<double>(quota) * tau);
    double cum = 0.0;
    int64_t ties = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float q = probs_[i];
      if (q > tau || (q == tau && ties++ < quota)) {
        id = i;
        cum += q;
        if (cum > target) break;
      }
    }
  }
  return Sample{static_cast<int32_t>(id), logprob(id), static_cast<int32_t>(count), true};
}

absl::StatusOr<Sample> Sampler::SampleTopN(const LogitsInput& input, const SamplingParams& p,
                                           std::span<const int32_t> history, Rng& rng) {
  const Kernels& k = *kernels_;
  const std::span<const int32_t> ids = input.ids();
  const std::span<const float> logits = input.logits();
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t vocab = input.vocab_size();
  if (n == 0) return InvalidArgument("top-N logits with no candidates");
  if (logits.size() != ids.size()) {
    return InvalidArgument("top-N logits: ", ids.size(), " ids but ", logits.size(), " logits");
  }
  if (vocab < n || vocab > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("top-N logits: ", n, " candidates for a vocabulary of ", vocab);
  }
  const internal::MaxScan scan = k.scan_max(logits.data(), n);
  if (!scan.all_finite) return NonFiniteLogit(logits, "top-N logit");
  const float lse = input.log_sum_exp();
  if (!std::isfinite(lse) || lse < scan.max - 1e-4f * std::max(1.0f, std::fabs(scan.max))) {
    return InvalidArgument("top-N log_sum_exp ", lse, " is not finite or below the largest logit ",
                           scan.max);
  }
  index_.clear();
  for (int64_t i = 0; i < n; ++i) index_.emplace_back(ids[i], static_cast<int32_t>(i));
  std::sort(index_.begin(), index_.end());
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = index_[i].first;
    if (id < 0 || id >= vocab) {
      return InvalidArgument("top-N id ", id, " is outside the vocabulary [0, ", vocab, ")");
    }
    if (i > 0 && index_[i - 1].first == id) return InvalidArgument("top-N id ", id, " repeats");
  }
  LLM_RETURN_IF_ERROR(BuildPatches(p, history, vocab));

  candidates_.clear();
  float smallest = kInf;  // every tail logit is <= this
  for (int64_t i = 0; i < n; ++i) {
    candidates_.push_back({logits[i], logits[i], ids[i], false});
    smallest = std::min(smallest, logits[i]);
  }
  const bool has_tail = n < vocab;
  // Bias and penalties of tail tokens: the largest logit one of them can be
  // lifted to (their logits are <= smallest and ApplyPatch is monotone).
  float lifted = -kInf;
  bool tail_patched = false;
  for (const Patch& patch : patches_) {
    const auto it =
        std::lower_bound(index_.begin(), index_.end(), std::pair<int32_t, int32_t>(patch.id, -1));
    if (it != index_.end() && it->first == patch.id) {
      Candidate& c = candidates_[it->second];
      c.logit = ApplyPatch(c.raw, patch, p);
      c.modified = true;
    } else {
      tail_patched = true;
      const float bound = ApplyPatch(smallest, patch, p);
      if (bound > smallest) lifted = std::max(lifted, bound);
    }
  }
  // Candidates that outrank every tail token for sure (see sampler.h).
  int64_t outrank = 0;
  float best = -kInf;
  for (const Candidate& c : candidates_) {
    best = std::max(best, c.logit);
    if (c.logit > lifted && (c.logit > smallest || (c.logit == smallest && !c.modified))) {
      ++outrank;
    }
  }
  if (best == -kInf) return InvalidArgument("every candidate is banned by a -inf logit_bias");
  auto logprob = [&](float raw) {
    return static_cast<float>(std::min(0.0, static_cast<double>(raw) - lse));
  };

  if (p.temperature == 0.0f) {
    const Candidate* top = &candidates_[0];
    for (const Candidate& c : candidates_) {
      if (Better(c, *top)) top = &c;
    }
    return Sample{top->id, logprob(top->raw), 1, !has_tail || outrank >= 1};
  }

  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  double tail_mass = 0.0;
  if (has_tail && !top_k && p.top_p < 1.0f && p.temperature == 1.0f) {
    // At temperature 1 the tail's share is 1 - sum(exp(logit - lse)) over the
    // candidates; in units of the best candidate's probability:
    const double share = k.exp_sum(logits.data(), n, lse, kLog2e, nullptr);
    const double tail = std::max(0.0, 1.0 - share);
    if (tail > 0.0) tail_mass = tail * std::exp(static_cast<double>(lse) - best);
  }
  const ListResult r = SampleList(p, tail_mass, rng);
  bool exact = !has_tail;
  if (has_tail && top_k) {
    exact = p.top_k <= n && outrank >= p.top_k;
  } else if (has_tail) {
    const bool top_p_exact = p.top_p < 1.0f && p.temperature == 1.0f && !tail_patched &&
                             r.top_p_closed && outrank >= r.kept_by_top_p;
    bool min_p_exact = false;
    if (p.min_p > 0.0f) {
      // No tail token reaches min_p * p_max, and top-p kept all that min-p
      // keeps with a target no larger than the true one.
      const double bound = std::max(smallest, lifted);
      min_p_exact = (bound - best) / p.temperature < std::log(static_cast<double>(p.min_p)) &&
                    r.kept_by_min_p <= r.kept_by_top_p && (tail_mass == 0.0 || !tail_patched);
    }
    exact = top_p_exact || min_p_exact;
  }
  return Sample{r.id, logprob(r.raw), r.num_candidates, exact};
}

absl::StatusOr<Sample> SampleToken(const LogitsInput& input, const SamplingParams& params,
                                   std::span<const int32_t> history, Rng& rng) {
  Sampler sampler;
  return sampler.SampleToken(input, params, history, rng);
}

}  // namespace llm::sampler
