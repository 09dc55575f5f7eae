#include "sampler/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sampler/kernels.h"
#include "sampler/rng.h"

// Counts heap allocations, to check that a warmed-up Sampler allocates nothing.
namespace {
std::atomic<int64_t> g_allocations{0};
// Out of line, so that the compiler does not pair operator new with free().
__attribute__((noinline)) void Release(void* p) { std::free(p); }
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p) noexcept { Release(p); }
void operator delete(void* p, std::size_t) noexcept { Release(p); }
void operator delete[](void* p) noexcept { Release(p); }
void operator delete[](void* p, std::size_t) noexcept { Release(p); }

namespace llm::sampler {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------
// Helpers.

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

Sample MustSample(Sampler& sampler, const LogitsInput& input, const SamplingParams& p,
                  std::span<const int32_t> history, Rng& rng) {
  absl::StatusOr<Sample> s = sampler.SampleToken(input, p, history, rng);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Sample{-1, 0.0f, 0, false};
}

Sample MustSample(const std::vector<float>& logits, const SamplingParams& p,
                  const std::vector<int32_t>& history = {}, uint64_t seed = 1) {
  Sampler sampler;
  Rng rng(seed);
  return MustSample(sampler, LogitsInput::Full(logits), p, history, rng);
}

absl::Status SampleError(const std::vector<float>& logits, const SamplingParams& p,
                         const std::vector<int32_t>& history = {}) {
  Rng rng(1);
  return SampleToken(LogitsInput::Full(logits), p, history, rng).status();
}

std::vector<float> RandomLogits(int64_t n, double sigma, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(dist(gen));
  return x;
}

// Logits whose softmax is `probs` (for readable cases).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> x;
  for (double q : probs) x.push_back(static_cast<float>(std::log(q)));
  return x;
}

double LogSumExp(std::span<const float> x) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double s = 0.0;
  for (float v : x) s += std::exp(v - m);
  return m + std::log(s);
}

// The N largest logits (ties: lower id first), as the model service sends them.
struct TopN {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  float lse;
  int64_t vocab;
  LogitsInput input() const { return LogitsInput::TopN(ids, logits, lse, vocab); }
};
TopN MakeTopN(const std::vector<float>& x, int64_t n) {
  std::vector<int32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  TopN t;
  for (int64_t i = 0; i < n; ++i) {
    t.ids.push_back(order[i]);
    t.logits.push_back(x[order[i]]);
  }
  t.lse = static_cast<float>(LogSumExp(x));
  t.vocab = static_cast<int64_t>(x.size());
  return t;
}

// The documented semantics in plain double precision: the probability of each
// token after bias, penalties, temperature, top-k, top-p and min-p. Like the
// sampler (whose probabilities are floats), it treats a probability below
// 2^-125 of the best token's as 0.
std::vector<double> Reference(const std::vector<float>& logits, const SamplingParams& p,
                              const std::vector<int32_t>& history = {}) {
  const int64_t n = static_cast<int64_t>(logits.size());
  std::vector<double> y(logits.begin(), logits.end());
  for (const LogitBias& b : p.logit_bias) y[b.id] += b.bias;
  const bool penalties =
      p.penalty_last_n != 0 &&
      (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f);
  if (penalties) {
    const size_t w = p.penalty_last_n < 0
                         ? history.size()
                         : std::min(history.size(), static_cast<size_t>(p.penalty_last_n));
    std::map<int32_t, int> counts;
    for (size_t i = history.size() - w; i < history.size(); ++i) ++counts[history[i]];
    for (const auto& [id, c] : counts) {
      double v = y[id];
      v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
      y[id] = v - c * static_cast<double>(p.frequency_penalty) - p.presence_penalty;
    }
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return y[a] > y[b]; });
  std::vector<double> prob(n, 0.0);
  if (p.temperature == 0.0f) {
    prob[order[0]] = 1.0;
    return prob;
  }
  std::vector<double> q(n);
  for (int64_t j = 0; j < n; ++j) {
    q[j] = std::exp((y[order[j]] - y[order[0]]) / p.temperature);
    if (q[j] < std::ldexp(1.0, -125)) q[j] = 0.0;
  }
  int64_t keep = p.top_k > 0 && p.top_k < n ? p.top_k : n;
  double z = 0.0;
  for (int64_t j = 0; j < keep; ++j) z += q[j];
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    for (int64_t j = 0; j < keep; ++j) {
      cum += q[j];
      if (cum >= p.top_p * z) {
        keep = j + 1;
        break;
      }
    }
  }
  double total = 0.0;
  for (int64_t j = 0; j < keep; ++j) {
    if (q[j] >= p.min_p * q[0] && q[j] > 0.0) {
      prob[order[j]] = q[j];
      total += q[j];
    }
  }
  for (double& v : prob) v /= total;
  return prob;
}

int64_t Support(const std::vector<double>& prob) {
  return std::count_if(prob.begin(), prob.end(), [](double v) { return v > 0.0; });
}

// Chi-square critical value at significance 0.001 (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.090232306;  // the standard normal's 0.999 quantile
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Draws `draws` tokens and checks their counts against `expected` with a
// chi-square test at p = 0.001 (bins expecting fewer than 5 draws are merged).
// Tokens with expected probability 0 must never be drawn.
void ExpectDistribution(const LogitsInput& input, const SamplingParams& p,
                        const std::vector<int32_t>& history, const std::vector<double>& expected,
                        int64_t draws, uint64_t seed) {
  Sampler sampler;
  Rng rng(seed);
  std::vector<int64_t> counts(expected.size(), 0);
  int64_t support = Support(expected);
  for (int64_t i = 0; i < draws; ++i) {
    absl::StatusOr<Sample> s = sampler.SampleToken(input, p, history, rng);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_GE(s->id, 0);
    ASSERT_LT(s->id, static_cast<int32_t>(expected.size()));
    ASSERT_GT(expected[s->id], 0.0) << "drew token " << s->id << " that the filters remove";
    ASSERT_EQ(s->num_candidates, support);
    ++counts[s->id];
  }
  double chi2 = 0.0;
  int bins = 0;
  double merged_expected = 0.0;
  double merged_observed = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0) continue;
    const double e = expected[i] * draws;
    if (e < 5.0) {
      merged_expected += e;
      merged_observed += counts[i];
      continue;
    }
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  if (merged_expected > 0.0) {
    chi2 +=
        (merged_observed - merged_expected) * (merged_observed - merged_expected) / merged_expected;
    ++bins;
  }
  ASSERT_GE(bins, 2);
  EXPECT_LT(chi2, ChiSquareCritical(bins - 1)) << "bins " << bins;
}

// ---------------------------------------------------------------------------
// Validation.

TEST(ValidateTest, DefaultsAreValid) { EXPECT_TRUE(Validate(SamplingParams()).ok()); }

TEST(ValidateTest, RejectsEachBadField) {
  struct Case {
    void (*set)(SamplingParams&);
    std::string message;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature must be finite and >= 0"},
      {[](SamplingParams& p) { p.temperature = kNaN; }, "temperature"},
      {[](SamplingParams& p) { p.temperature = kInf; }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k must be >= 0 (0 = off), got -1"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1]"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1] (1 = off), got 1.5"},
      {[](SamplingParams& p) { p.top_p = kNaN; }, "top_p"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1]"},
      {[](SamplingParams& p) { p.min_p = 1.1f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty must be"},
      {[](SamplingParams& p) { p.repetition_penalty = -1.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.repetition_penalty = kInf; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = kNaN; }, "presence_penalty must be finite"},
      {[](SamplingParams& p) { p.frequency_penalty = -kInf; }, "frequency_penalty must be finite"},
      {[](SamplingParams& p) { p.penalty_last_n = -2; }, "penalty_last_n must be >= -1"},
      {[](SamplingParams& p) {
         p.logit_bias = {{-3, 1.0f}};
       },
       "logit_bias[0].id must be >= 0"},
      {[](SamplingParams& p) {
         p.logit_bias = {{1, 0.0f}, {2, kInf}};
       },
       "logit_bias[1].bias must be finite or -inf, got inf"},
      {[](SamplingParams& p) {
         p.logit_bias = {{1, kNaN}};
       },
       "logit_bias[0].bias"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const absl::Status status = Validate(p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
    // SampleToken validates too.
    EXPECT_EQ(SampleError({1.0f, 2.0f}, p).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ValidateTest, AcceptsEdgeValues) {
  SamplingParams p;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.temperature = 0.0f;
  p.penalty_last_n = -1;
  p.presence_penalty = -2.0f;
  p.logit_bias = {{0, -kInf}, {5, 100.0f}};
  EXPECT_TRUE(Validate(p).ok());
}

// ---------------------------------------------------------------------------
// Input errors.

TEST(InputTest, RejectsNonFiniteLogits) {
  for (float bad : {kNaN, kInf}) {
    std::vector<float> x(100, 0.5f);
    x[37] = bad;
    const absl::Status status = SampleError(x, SamplingParams());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("logit 37 is"));
    EXPECT_EQ(SampleError(x, Greedy()).code(), absl::StatusCode::kInvalidArgument);
  }
  // Also in the vectorized part of a long row and in its tail.
  for (int64_t at : {5000, 49151}) {
    std::vector<float> x = RandomLogits(49152, 1.0, 3);
    x[at] = kNaN;
    EXPECT_THAT(std::string(SampleError(x, SamplingParams()).message()),
                HasSubstr("logit " + std::to_string(at) + " is nan"));
  }
}

// Masked full logits (a token mask: -inf where a token is disallowed) are
// sampled from the allowed tokens only, with logprobs over them: the
// model's distribution restricted to the mask. NaN and +inf stay errors, and
// a row with nothing allowed is one.
TEST(InputTest, MaskedLogitsSampleOnlyAllowedTokens) {
  for (int64_t n : {7, 49152}) {
    std::vector<float> x = RandomLogits(n, 2.0, 5);
    std::vector<float> allowed_only;
    std::vector<bool> allowed(n, false);
    for (int64_t i = 0; i < n; ++i) {
      allowed[i] = i % 3 == 1;
      if (!allowed[i]) x[i] = -kInf;
    }
    double lse = -kInf;
    for (int64_t i = 0; i < n; ++i) {
      if (allowed[i]) lse = std::max(lse, static_cast<double>(x[i]));
    }
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (allowed[i]) sum += std::exp(x[i] - lse);
    }
    lse += std::log(sum);
    for (int config = 0; config < 5; ++config) {
      SamplingParams p;
      if (config == 0) p = Greedy();
      if (config == 1) p.top_k = 3;
      if (config == 2) p.top_p = 0.5f;
      if (config == 3) p.min_p = 0.05f;
      if (config == 4) {
        p.temperature = 1.3f;
        p.repetition_penalty = 1.2f;
      }
      for (uint64_t seed = 0; seed < 20; ++seed) {
        const Sample s = MustSample(x, p, {1, 2}, seed);
        ASSERT_TRUE(allowed[s.id]) << "n=" << n << " config=" << config << " drew " << s.id;
        EXPECT_NEAR(s.logprob, x[s.id] - lse, 2e-5 * std::max(1.0, std::fabs(x[s.id] - lse)));
      }
    }
  }
  std::vector<float> none(9, -kInf);
  EXPECT_THAT(std::string(SampleError(none, SamplingParams()).message()),
              HasSubstr("every logit is -inf"));
  std::vector<float> nan = {-kInf, 1.0f, kNaN};
  EXPECT_THAT(std::string(SampleError(nan, SamplingParams()).message()),
              HasSubstr("logit 2 is nan"));
}

TEST(InputTest, RejectsEmptyAndOutOfRangeIds) {
  EXPECT_EQ(SampleError({}, SamplingParams()).code(), absl::StatusCode::kInvalidArgument);
  SamplingParams p;
  p.logit_bias = {{3, 1.0f}};
  EXPECT_THAT(std::string(SampleError({1, 2, 3}, p).message()),
              HasSubstr("logit_bias[0].id 3 is outside the vocabulary [0, 3)"));
  p = SamplingParams();
  p.repetition_penalty = 1.2f;
  EXPECT_THAT(std::string(SampleError({1, 2, 3}, p, {0, 7, 1}).message()),
              HasSubstr("history token 7 at position 1 is outside the vocabulary"));
  EXPECT_EQ(SampleError({1, 2, 3}, p, {0, -1}).code(), absl::StatusCode::kInvalidArgument);
  // Outside the penalty window, or with penalties off, history is not read.
  p.penalty_last_n = 1;
  EXPECT_TRUE(SampleError({1, 2, 3}, p, {7, 1}).ok());
  EXPECT_TRUE(SampleError({1, 2, 3}, SamplingParams(), {7, 1}).ok());
}

TEST(InputTest, RejectsBadTopN) {
  const std::vector<int32_t> ids = {4, 1, 2};
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f};
  Rng rng(1);
  auto error = [&](const LogitsInput& in) {
    return SampleToken(in, SamplingParams(), {}, rng).status();
  };
  EXPECT_TRUE(error(LogitsInput::TopN(ids, logits, 3.5f, 10)).ok());
  EXPECT_THAT(
      std::string(error(LogitsInput::TopN(ids, std::span(logits).first(2), 3.5f, 10)).message()),
      HasSubstr("3 ids but 2 logits"));
  EXPECT_THAT(std::string(error(LogitsInput::TopN({}, {}, 3.5f, 10)).message()),
              HasSubstr("no candidates"));
  EXPECT_THAT(std::string(error(LogitsInput::TopN(ids, logits, 3.5f, 2)).message()),
              HasSubstr("3 candidates for a vocabulary of 2"));
  const std::vector<int32_t> repeated = {4, 1, 4};
  EXPECT_THAT(std::string(error(LogitsInput::TopN(repeated, logits, 3.5f, 10)).message()),
              HasSubstr("top-N id 4 repeats"));
  const std::vector<int32_t> outside = {4, 1, 10};
  EXPECT_THAT(std::string(error(LogitsInput::TopN(outside, logits, 3.5f, 10)).message()),
              HasSubstr("top-N id 10 is outside the vocabulary [0, 10)"));
  EXPECT_THAT(std::string(error(LogitsInput::TopN(ids, logits, 2.0f, 10)).message()),
              HasSubstr("below the largest logit"));
  EXPECT_THAT(std::string(error(LogitsInput::TopN(ids, logits, kNaN, 10)).message()),
              HasSubstr("log_sum_exp nan is not finite"));
  const std::vector<float> bad = {3.0f, kInf, 1.0f};
  EXPECT_THAT(std::string(error(LogitsInput::TopN(ids, bad, 3.5f, 10)).message()),
              HasSubstr("top-N logit 1 is inf"));
}

// ---------------------------------------------------------------------------
// Exact cases.

TEST(GreedyTest, PicksTheLargestLogitLowestIdOnTies) {
  EXPECT_EQ(MustSample({0.1f, 2.5f, -1.0f, 2.4f}, Greedy()).id, 1);
  EXPECT_EQ(MustSample({1.0f, 3.0f, 3.0f, 3.0f}, Greedy()).id, 1);
  EXPECT_EQ(MustSample({7.0f}, Greedy()).id, 0);
  // Ties in a long row, beyond the first vectorized step.
  std::vector<float> x(1000, -1.0f);
  x[700] = 5.0f;
  x[333] = 5.0f;
  x[999] = 5.0f;
  const Sample s = MustSample(x, Greedy());
  EXPECT_EQ(s.id, 333);
  EXPECT_EQ(s.num_candidates, 1);
  EXPECT_TRUE(s.exact);
}

TEST(GreedyTest, IgnoresFiltersAndLeavesTheRngAlone) {
  SamplingParams p = Greedy();
  p.top_k = 3;
  p.top_p = 0.01f;
  p.min_p = 0.9f;
  Sampler sampler;
  Rng rng(99);
  const Rng before = rng;
  const std::vector<float> x = {0.0f, 1.0f, 4.0f, 2.0f};
  EXPECT_EQ(MustSample(sampler, LogitsInput::Full(x), p, {}, rng).id, 2);
  EXPECT_EQ(rng, before);
}

TEST(SamplingTest, UsesExactlyOneUniformPerToken) {
  Sampler sampler;
  Rng rng(5);
  Rng copy = rng;
  const std::vector<float> x = RandomLogits(300, 1.0, 1);
  MustSample(sampler, LogitsInput::Full(x), SamplingParams(), {}, rng);
  copy.Uniform();
  EXPECT_EQ(rng, copy);
  SamplingParams p;
  p.top_k = 5;
  MustSample(sampler, LogitsInput::Full(x), p, {}, rng);
  copy.Uniform();
  EXPECT_EQ(rng, copy);
}

TEST(SamplingTest, TopKOneIsGreedy) {
  const std::vector<float> x = RandomLogits(5000, 2.0, 7);
  const int32_t best = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
  SamplingParams p;
  p.top_k = 1;
  p.temperature = 5.0f;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const Sample s = MustSample(x, p, {}, seed);
    EXPECT_EQ(s.id, best);
    EXPECT_EQ(s.num_candidates, 1);
  }
}

TEST(SamplingTest, TinyTopPKeepsOnlyTheMax) {
  for (int64_t n : {4, 100, 49152}) {
    const std::vector<float> x = RandomLogits(n, 1.0, 11);
    const int32_t best = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
    SamplingParams p;
    p.top_p = 1e-6f;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const Sample s = MustSample(x, p, {}, seed);
      EXPECT_EQ(s.id, best) << n;
      EXPECT_EQ(s.num_candidates, 1) << n;
    }
  }
}

TEST(SamplingTest, MinP) {
  const std::vector<float> x = LogitsOf({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.min_p = 0.35f;  // keeps p >= 0.175
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const Sample s = MustSample(x, p, {}, seed);
    EXPECT_LE(s.id, 1);
    EXPECT_EQ(s.num_candidates, 2);
  }
  p.min_p = 0.25f;  // keeps p >= 0.125
  EXPECT_EQ(MustSample(x, p).num_candidates, 3);
  p.min_p = 1.0f;  // only the max
  EXPECT_EQ(MustSample(x, p).num_candidates, 1);
}

TEST(SamplingTest, NoFilterCountsEveryToken) {
  const std::vector<float> x = RandomLogits(1000, 1.0, 2);
  EXPECT_EQ(MustSample(x, SamplingParams()).num_candidates, 1000);
  SamplingParams p;
  p.logit_bias = {{3, -kInf}, {500, -kInf}, {999, -kInf}};
  EXPECT_EQ(MustSample(x, p).num_candidates, 997);
  p.top_k = 50;
  EXPECT_EQ(MustSample(x, p).num_candidates, 50);
}

TEST(SamplingTest, LowTemperatureUnderflowsToTheMax) {
  std::vector<float> x = {1.0f, 3.0f, 2.0f, 2.999f};
  SamplingParams p;
  p.temperature = 1e-6f;
  const Sample s = MustSample(x, p);
  EXPECT_EQ(s.id, 1);
  EXPECT_EQ(s.num_candidates, 1);  // the others' probabilities underflow to 0
  p.temperature = 1e-38f;          // the scale is clamped to the float range
  EXPECT_EQ(MustSample(x, p).id, 1);
}

TEST(SamplingTest, ExtremeLogits) {
  std::vector<float> x = {-3e38f, 3e38f, 0.0f, 2.9e38f};
  const Sample s = MustSample(x, SamplingParams());
  EXPECT_EQ(s.id, 1);
  EXPECT_EQ(s.logprob, 0.0f);
  EXPECT_EQ(MustSample(x, Greedy()).id, 1);
}

// ---------------------------------------------------------------------------
// Bias and penalties (greedy shows the modified order).

TEST(PenaltyTest, RepetitionDividesPositiveAndMultipliesNegative) {
  SamplingParams p = Greedy();
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(MustSample({2.0f, 1.5f, 0.0f}, p, {0}).id, 1);  // 2 / 2 = 1 < 1.5
  EXPECT_EQ(MustSample({2.0f, 0.9f, 0.0f}, p, {0}).id, 0);  // 1 > 0.9
  EXPECT_EQ(MustSample({-1.0f, -1.5f}, p, {0}).id, 1);      // -1 * 2 = -2 < -1.5
  EXPECT_EQ(MustSample({-1.0f, -2.5f}, p, {0}).id, 0);      // -2 > -2.5
  // Repeats count once for the repetition penalty.
  EXPECT_EQ(MustSample({2.0f, 0.9f, 0.0f}, p, {0, 0, 0}).id, 0);
  // A penalty below 1 encourages repeats.
  p.repetition_penalty = 0.5f;
  EXPECT_EQ(MustSample({2.0f, 3.0f}, p, {0}).id, 0);  // 4 > 3
}

TEST(PenaltyTest, PresenceAndFrequencySubtract) {
  SamplingParams p = Greedy();
  p.presence_penalty = 0.5f;
  EXPECT_EQ(MustSample({1.0f, 0.8f}, p, {0}).id, 1);        // 0.5 < 0.8
  EXPECT_EQ(MustSample({1.0f, 0.8f}, p, {0, 0, 0}).id, 1);  // presence: once
  EXPECT_EQ(MustSample({1.0f, 0.4f}, p, {0, 0, 0}).id, 0);
  p = Greedy();
  p.frequency_penalty = 0.1f;
  EXPECT_EQ(MustSample({1.0f, 0.8f}, p, {0}).id, 0);        // 0.9 > 0.8
  EXPECT_EQ(MustSample({1.0f, 0.8f}, p, {0, 0, 0}).id, 1);  // 0.7 < 0.8
  p.presence_penalty = -1.0f;                               // negative: encourages
  EXPECT_EQ(MustSample({1.0f, 1.5f}, p, {0}).id, 0);        // 1 - 0.1 + 1 = 1.9
}

TEST(PenaltyTest, Window) {
  SamplingParams p = Greedy();
  p.presence_penalty = 1.0f;
  const std::vector<float> x = {1.0f, 0.5f, 0.0f};
  p.penalty_last_n = 2;
  EXPECT_EQ(MustSample(x, p, {0, 2, 2}).id, 0);  // token 0 is outside the window
  EXPECT_EQ(MustSample(x, p, {2, 0, 2}).id, 1);
  p.penalty_last_n = 0;  // off
  EXPECT_EQ(MustSample(x, p, {0, 0}).id, 0);
  p.penalty_last_n = -1;  // the whole history
  std::vector<int32_t> long_history(1000, 2);
  long_history[0] = 0;
  EXPECT_EQ(MustSample(x, p, long_history).id, 1);
  p.penalty_last_n = 10;
  EXPECT_EQ(MustSample(x, p, long_history).id, 0);
  // A window longer than the history.
  p.penalty_last_n = 64;
  EXPECT_EQ(MustSample(x, p, {0}).id, 1);
}

TEST(PenaltyTest, LogitBias) {
  const std::vector<float> x = {1.0f, 0.5f, 0.0f};
  SamplingParams p = Greedy();
  p.logit_bias = {{2, 1.5f}};
  EXPECT_EQ(MustSample(x, p).id, 2);
  p.logit_bias = {{2, 0.6f}, {2, 0.6f}};  // entries add up
  EXPECT_EQ(MustSample(x, p).id, 2);
  p.logit_bias = {{0, -kInf}};
  EXPECT_EQ(MustSample(x, p).id, 1);
  // Bias first, then the penalty: (1 - 3) * 2 = -4 < -3 (the other order
  // would give 1 / 2 - 3 = -2.5 > -3).
  p.logit_bias = {{0, -3.0f}};
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(MustSample({1.0f, -3.0f, -10.0f}, p, {0}).id, 1);
  // A banned token is never drawn.
  SamplingParams q;
  q.logit_bias = {{0, -kInf}, {1, -kInf}};
  q.temperature = 100.0f;
  for (uint64_t seed = 0; seed < 50; ++seed) EXPECT_EQ(MustSample(x, q, {}, seed).id, 2);
  q.logit_bias.push_back({2, -kInf});
  EXPECT_THAT(std::string(SampleError(x, q).message()), HasSubstr("every token is banned"));
}

// ---------------------------------------------------------------------------
// Log-probabilities.

TEST(LogprobTest, IsTheRawLogSoftmax) {
  for (int64_t n : {3, 777, 49152}) {
    const std::vector<float> x = RandomLogits(n, 2.0, 21);
    const double lse = LogSumExp(x);
    for (int config = 0; config < 4; ++config) {
      SamplingParams p;
      if (config == 0) p = Greedy();
      if (config == 1) p.top_k = 2;
      if (config == 2) p.temperature = 0.5f;
      if (config == 3) {  // bias, penalties and temperature do not change it
        p.temperature = 1.7f;
        p.repetition_penalty = 1.5f;
        p.logit_bias = {{1, 2.0f}};
        p.top_p = 0.9f;
      }
      for (uint64_t seed = 0; seed < 5; ++seed) {
        const Sample s = MustSample(x, p, {0, 1, 2}, seed);
        EXPECT_NEAR(s.logprob, x[s.id] - lse, 2e-5 * std::max(1.0, std::fabs(x[s.id] - lse)))
            << "n=" << n << " config=" << config;
      }
    }
  }
}

TEST(LogprobTest, TopNIsLogitMinusLogSumExp) {
  const std::vector<float> x = RandomLogits(1000, 2.0, 4);
  const TopN t = MakeTopN(x, 30);
  Sampler sampler;
  Rng rng(3);
  SamplingParams p;
  p.top_k = 10;
  for (int i = 0; i < 20; ++i) {
    const Sample s = MustSample(sampler, t.input(), p, {}, rng);
    EXPECT_FLOAT_EQ(s.logprob, x[s.id] - t.lse);
  }
}

// ---------------------------------------------------------------------------
// Filters against the reference, on many shapes of logits.

TEST(FilterTest, KeptSetMatchesTheReference) {
  struct Shape {
    int64_t n;
    double sigma;
  };
  const Shape shapes[] = {{5, 1.0},     {33, 0.3},    {1000, 2.0}, {49152, 2.0},
                          {49152, 0.3}, {49152, 8.0}, {4097, 0.05}};
  std::vector<SamplingParams> configs;
  for (float t : {0.3f, 0.8f, 1.0f, 1.5f}) {
    for (float top_p : {0.05f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f}) {
      for (float min_p : {0.0f, 0.02f}) {
        for (int32_t top_k : {0, 40}) {
          SamplingParams p;
          p.temperature = t;
          p.top_p = top_p;
          p.min_p = min_p;
          p.top_k = top_k;
          configs.push_back(p);
        }
      }
    }
  }
  Sampler sampler;
  Rng rng(17);
  int checked = 0;
  int off_by_one = 0;
  for (const Shape& shape : shapes) {
    const std::vector<float> x = RandomLogits(shape.n, shape.sigma, 100 + shape.n);
    for (const SamplingParams& p : configs) {
      const std::vector<double> expected = Reference(x, p);
      const Sample s = MustSample(sampler, LogitsInput::Full(x), p, {}, rng);
      // The kept set's size equals the reference's, up to float rounding at the
      // top-p boundary (the sampler's probabilities have ~2e-7 relative error).
      const int64_t support = Support(expected);
      if (s.num_candidates != support) {
        const double slack = std::abs(s.num_candidates - support);
        EXPECT_LE(slack, 1) << "n=" << shape.n << " sigma=" << shape.sigma << " T=" << p.temperature
                            << " top_p=" << p.top_p;
        ++off_by_one;
      } else {
        EXPECT_GT(expected[s.id], 0.0);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 600);
  EXPECT_LE(off_by_one, 3);
}

TEST(FilterTest, TopPTiesSplitByLowestIds) {
  // 100 equal logits: top-p 0.5 keeps exactly ids 0..49.
  std::vector<float> x(100, 0.25f);
  SamplingParams p;
  p.top_p = 0.5f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Sample s = MustSample(x, p, {}, seed);
    EXPECT_LT(s.id, 50);
    EXPECT_EQ(s.num_candidates, 50);
  }
  // Ties at the boundary with distinct values above it: 2 tokens of 0.4, then
  // 10 of 0.02. Target 0.89 needs 0.8 + 5 * 0.02: ids 2..6 of the tied ones.
  std::vector<double> probs = {0.4, 0.4};
  for (int i = 0; i < 10; ++i) probs.push_back(0.02);
  std::vector<float> y = LogitsOf(probs);
  for (size_t i = 2; i < y.size(); ++i) y[i] = y[2];  // exactly equal floats
  p.top_p = 0.89f;
  std::vector<int> seen(y.size(), 0);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const Sample s = MustSample(y, p, {}, seed);
    EXPECT_EQ(s.num_candidates, 7);
    ++seen[s.id];
  }
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(seen[i] > 0, i < 7) << i;
}

TEST(FilterTest, QuantizedLogitsWithManyTies) {
  // Logits rounded to a coarse grid (as after float16): many exact ties.
  std::vector<float> x = RandomLogits(49152, 2.0, 8);
  for (float& v : x) v = std::round(v * 8.0f) / 8.0f;
  for (float top_p : {0.3f, 0.9f, 0.95f}) {
    SamplingParams p;
    p.top_p = top_p;
    p.temperature = 0.9f;
    const std::vector<double> expected = Reference(x, p);
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const Sample s = MustSample(x, p, {}, seed);
      EXPECT_NEAR(s.num_candidates, Support(expected), 1) << top_p;
      EXPECT_GT(expected[s.id], 0.0) << top_p;
    }
  }
}

// ---------------------------------------------------------------------------
// Top-N input.

TEST(TopNTest, EqualsFullLogitsWhenTheFiltersStayInside) {
  const std::vector<float> x = RandomLogits(5000, 3.0, 31);
  const TopN t = MakeTopN(x, 64);
  std::vector<SamplingParams> configs(5);
  configs[0] = Greedy();
  configs[1].top_k = 20;
  configs[1].temperature = 0.7f;
  configs[2].top_k = 64;
  configs[2].top_p = 0.8f;
  configs[2].min_p = 0.01f;
  configs[3].top_p = 0.3f;  // temperature 1: exact when the candidates reach it
  configs[4].min_p = 0.3f;
  configs[4].temperature = 0.6f;
  for (size_t c = 0; c < configs.size(); ++c) {
    Sampler full_sampler;
    Sampler top_sampler;
    Rng full_rng(7);
    Rng top_rng(7);
    for (int i = 0; i < 300; ++i) {
      const Sample a = MustSample(full_sampler, LogitsInput::Full(x), configs[c], {}, full_rng);
      const Sample b = MustSample(top_sampler, t.input(), configs[c], {}, top_rng);
      ASSERT_TRUE(b.exact) << c;
      ASSERT_EQ(a.id, b.id) << c << " draw " << i;
      ASSERT_EQ(a.num_candidates, b.num_candidates) << c;
      ASSERT_NEAR(a.logprob, b.logprob, 1e-4) << c;
    }
  }
}

TEST(TopNTest, ReportsInexactCases) {
  const std::vector<float> x = RandomLogits(5000, 1.0, 32);
  const TopN t = MakeTopN(x, 8);
  Sampler sampler;
  Rng rng(1);
  SamplingParams p;
  EXPECT_FALSE(MustSample(sampler, t.input(), p, {}, rng).exact);  // no filter
  p.top_k = 9;
  EXPECT_FALSE(MustSample(sampler, t.input(), p, {}, rng).exact);  // k > N
  p.top_k = 8;
  EXPECT_TRUE(MustSample(sampler, t.input(), p, {}, rng).exact);
  p = SamplingParams();
  p.top_p = 0.9f;  // a flat distribution: 8 candidates do not reach 0.9
  const Sample s = MustSample(sampler, t.input(), p, {}, rng);
  EXPECT_FALSE(s.exact);
  EXPECT_EQ(s.num_candidates, 8);  // the tail is absent: all 8 kept
  p.temperature = 0.5f;            // tail mass unknown at T != 1
  p.top_p = 0.01f;
  EXPECT_FALSE(MustSample(sampler, t.input(), p, {}, rng).exact);
  // The whole vocabulary as top-N is always exact.
  const TopN all = MakeTopN(x, 5000);
  EXPECT_TRUE(MustSample(sampler, all.input(), SamplingParams(), {}, rng).exact);
  EXPECT_TRUE(MustSample(sampler, all.input(), p, {}, rng).exact);
}

TEST(TopNTest, PenaltiesThatPushACandidateBelowTheTail) {
  // Raw: token 10 best (5.0), token 11 next (4.0, outside a top-1).
  std::vector<float> x(100, 0.0f);
  x[10] = 5.0f;
  x[11] = 4.0f;
  SamplingParams p = Greedy();
  p.repetition_penalty = 2.0f;  // 5 -> 2.5 < 4
  const std::vector<int32_t> history = {10};
  Sampler sampler;
  Rng rng(1);
  const Sample wrong = MustSample(sampler, MakeTopN(x, 1).input(), p, history, rng);
  EXPECT_EQ(wrong.id, 10);
  EXPECT_FALSE(wrong.exact);
  ASSERT_EQ(RecommendedTopN(p), 65);
  const Sample right = MustSample(sampler, MakeTopN(x, 65).input(), p, history, rng);
  EXPECT_EQ(right.id, 11);
  EXPECT_TRUE(right.exact);
  // A positive bias can lift a tail token: never exact with a tail.
  p = Greedy();
  p.logit_bias = {{50, 10.0f}};
  const Sample lifted = MustSample(sampler, MakeTopN(x, 5).input(), p, {}, rng);
  EXPECT_FALSE(lifted.exact);
  EXPECT_EQ(MustSample(x, p).id, 50);
}

TEST(SamplerTest, PicksArgmaxOnlyForPlainGreedy) {
  SamplingParams p = Greedy();
  EXPECT_TRUE(PicksArgmax(p));
  p.penalty_last_n = 0;
  p.repetition_penalty = 1.3f;  // no window: off
  EXPECT_TRUE(PicksArgmax(p));
  p.penalty_last_n = 64;  // the penalty can move the pick off the argmax
  EXPECT_FALSE(PicksArgmax(p));
  p = Greedy();
  p.logit_bias = {{3, -1.0f}};
  EXPECT_FALSE(PicksArgmax(p));
  p = Greedy();
  p.temperature = 0.5f;
  EXPECT_FALSE(PicksArgmax(p));
  // What it promises: the pick is the first largest logit.
  const std::vector<float> x = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(MustSample(x, Greedy()).id, 1);
}

TEST(TopNTest, RecommendedTopNIsExactOnRandomCases) {
  std::mt19937_64 gen(5);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t vocab = 200 + static_cast<int64_t>(gen() % 800);
    const std::vector<float> x = RandomLogits(vocab, 1.0 + (trial % 3), 1000 + trial);
    SamplingParams p;
    if (trial % 2 == 0) {
      p.temperature = 0.0f;
    } else {
      p.temperature = 0.5f + static_cast<float>(trial % 5) * 0.3f;
      p.top_k = 1 + static_cast<int32_t>(gen() % 30);
      p.top_p = trial % 7 == 0 ? 0.7f : 1.0f;
    }
    if (trial % 3 != 0) {  // lowering penalties and negative biases
      p.repetition_penalty = 1.0f + static_cast<float>(gen() % 10) * 0.3f;
      p.presence_penalty = static_cast<float>(gen() % 3);
      p.frequency_penalty = static_cast<float>(gen() % 3) * 0.5f;
      p.penalty_last_n = 1 + static_cast<int32_t>(gen() % 40);
      p.logit_bias = {{static_cast<int32_t>(gen() % vocab), -3.0f}};
    }
    std::vector<int32_t> history;
    // Penalize the best tokens, the hard case.
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
    for (int i = 0; i < 50; ++i) history.push_back(order[gen() % 20]);
    const int64_t n = RecommendedTopN(p);
    ASSERT_GT(n, 0);
    if (n >= vocab) continue;
    ASSERT_TRUE(IsExactForTopN(p, n));
    const TopN t = MakeTopN(x, n);
    Sampler a;
    Sampler b;
    Rng ra(trial);
    Rng rb(trial);
    for (int i = 0; i < 5; ++i) {
      const Sample full = MustSample(a, LogitsInput::Full(x), p, history, ra);
      const Sample top = MustSample(b, t.input(), p, history, rb);
      ASSERT_TRUE(top.exact) << trial;
      ASSERT_EQ(full.id, top.id) << trial;
      ASSERT_EQ(full.num_candidates, top.num_candidates) << trial;
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(TopNTest, StaticRules) {
  SamplingParams p = Greedy();
  EXPECT_EQ(RecommendedTopN(p), 1);
  EXPECT_TRUE(IsExactForTopN(p, 1));
  EXPECT_FALSE(IsExactForTopN(p, 0));
  p = SamplingParams();
  EXPECT_EQ(RecommendedTopN(p), 0);  // plain sampling needs the whole vocabulary
  EXPECT_FALSE(IsExactForTopN(p, 1000));
  p.top_k = 40;
  p.top_p = 0.9f;
  p.temperature = 0.8f;
  EXPECT_EQ(RecommendedTopN(p), 40);
  EXPECT_TRUE(IsExactForTopN(p, 40));
  EXPECT_FALSE(IsExactForTopN(p, 39));
  p.repetition_penalty = 1.1f;  // lowering: one spare per window slot
  EXPECT_EQ(RecommendedTopN(p), 40 + 64);
  p.penalty_last_n = 0;  // penalties off
  EXPECT_EQ(RecommendedTopN(p), 40);
  p.penalty_last_n = -1;  // unbounded window
  EXPECT_EQ(RecommendedTopN(p), 0);
  p.penalty_last_n = 64;
  p.repetition_penalty = 0.9f;  // lifting
  EXPECT_EQ(RecommendedTopN(p), 0);
  p.repetition_penalty = 1.0f;
  p.presence_penalty = -0.5f;
  EXPECT_EQ(RecommendedTopN(p), 0);
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.5f;
  EXPECT_EQ(RecommendedTopN(p), 40 + 64);
  p.frequency_penalty = 0.0f;
  p.logit_bias = {{3, -1.0f}, {4, -kInf}, {5, 0.0f}};
  EXPECT_EQ(RecommendedTopN(p), 42);
  p.logit_bias.push_back({6, 0.5f});
  EXPECT_EQ(RecommendedTopN(p), 0);
}

// ---------------------------------------------------------------------------
// Reproducibility and the Rng.

TEST(RngTest, SameSeedSameStreamAndCopiesFork) {
  Rng a(123);
  Rng b(123);
  Rng c(124);
  std::vector<uint64_t> va;
  std::vector<uint64_t> vc;
  for (int i = 0; i < 100; ++i) {
    va.push_back(a.Next());
    EXPECT_EQ(va.back(), b.Next());
    vc.push_back(c.Next());
  }
  EXPECT_NE(va, vc);
  Rng fork = a;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), fork.Next());
  EXPECT_EQ(a, fork);
}

TEST(RngTest, UniformIsInTheUnitIntervalAndUniform) {
  Rng rng(0);
  std::vector<int> buckets(10, 0);
  double sum = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++buckets[static_cast<int>(u * 10)];
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  for (int b : buckets) EXPECT_NEAR(b, 10000, 500);
}

TEST(ReproducibilityTest, SameSeedSameTokens) {
  const std::vector<float> x = RandomLogits(49152, 2.0, 9);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.1f;
  auto run = [&](uint64_t seed) {
    Sampler sampler;
    Rng rng(seed);
    std::vector<int32_t> history;
    for (int i = 0; i < 100; ++i) {
      history.push_back(MustSample(sampler, LogitsInput::Full(x), p, history, rng).id);
    }
    return history;
  };
  const std::vector<int32_t> first = run(42);
  EXPECT_EQ(first, run(42));
  EXPECT_NE(first, run(43));
  // The free function gives the same tokens as a Sampler.
  Rng r1(8);
  Rng r2(8);
  Sampler sampler;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Sample> a = SampleToken(LogitsInput::Full(x), p, {}, r1);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->id, MustSample(sampler, LogitsInput::Full(x), p, {}, r2).id);
  }
}

TEST(ReproducibilityTest, ForkedRngRepeatsTheDraws) {
  const std::vector<float> x = RandomLogits(1000, 1.0, 10);
  Sampler sampler;
  Rng rng(77);
  MustSample(sampler, LogitsInput::Full(x), SamplingParams(), {}, rng);
  Rng fork = rng;
  std::vector<int32_t> a;
  std::vector<int32_t> b;
  for (int i = 0; i < 50; ++i)
    a.push_back(MustSample(sampler, LogitsInput::Full(x), {}, {}, rng).id);
  for (int i = 0; i < 50; ++i)
    b.push_back(MustSample(sampler, LogitsInput::Full(x), {}, {}, fork).id);
  EXPECT_EQ(a, b);
}

TEST(ReproducibilityTest, SamplerReuseAcrossVocabularySizes) {
  Sampler sampler;
  SamplingParams p;
  p.top_p = 0.9f;
  for (int64_t n : {49152, 10, 3000, 49152, 1}) {
    const std::vector<float> x = RandomLogits(n, 1.0, n);
    Rng a(1);
    Rng b(1);
    Sampler fresh;
    EXPECT_EQ(MustSample(sampler, LogitsInput::Full(x), p, {}, a).id,
              MustSample(fresh, LogitsInput::Full(x), p, {}, b).id);
  }
}

TEST(AllocationTest, SteadyStateAllocatesNothing) {
  const std::vector<float> x = RandomLogits(49152, 2.0, 12);
  const TopN t = MakeTopN(x, 100);
  std::vector<SamplingParams> configs(6);
  configs[0] = Greedy();
  configs[1].top_k = 40;
  configs[1].top_p = 0.95f;
  configs[2].top_p = 0.95f;
  configs[2].temperature = 0.8f;
  configs[3].min_p = 0.05f;
  configs[4].repetition_penalty = 1.2f;
  configs[4].frequency_penalty = 0.1f;
  configs[4].logit_bias = {{5, -1.0f}, {7, 2.0f}};
  configs[4].top_p = 0.5f;
  configs[5].top_k = 20;
  std::vector<int32_t> history;
  for (int i = 0; i < 200; ++i) history.push_back(i * 31 % 49152);
  Sampler sampler;
  Rng rng(1);
  for (int pass = 0; pass < 2; ++pass) {
    const int64_t before = g_allocations.load();
    for (const SamplingParams& p : configs) {
      for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(sampler.SampleToken(LogitsInput::Full(x), p, history, rng).ok());
        ASSERT_TRUE(sampler.SampleToken(t.input(), p, history, rng).ok());
      }
    }
    if (pass == 1) {
      EXPECT_EQ(g_allocations.load(), before);
    }
  }
}

// ---------------------------------------------------------------------------
// Statistical tests: 200,000 draws with a fixed seed, chi-square at p = 0.001
// against the analytically filtered distribution.

constexpr int64_t kDraws = 200000;

std::vector<float> SmallVocabulary() {
  return LogitsOf({0.22, 0.18, 0.15, 0.12, 0.1, 0.08, 0.06, 0.04, 0.03, 0.02});
}

TEST(StatisticalTest, Temperature) {
  const std::vector<float> x = SmallVocabulary();
  for (float t : {0.5f, 1.0f, 2.5f}) {
    SamplingParams p;
    p.temperature = t;
    ExpectDistribution(LogitsInput::Full(x), p, {}, Reference(x, p), kDraws, 1001);
  }
}

TEST(StatisticalTest, TopK) {
  const std::vector<float> x = SmallVocabulary();
  SamplingParams p;
  p.top_k = 4;
  p.temperature = 1.3f;
  const std::vector<double> expected = Reference(x, p);
  ASSERT_EQ(Support(expected), 4);
  ExpectDistribution(LogitsInput::Full(x), p, {}, expected, kDraws, 1002);
}

TEST(StatisticalTest, TopP) {
  const std::vector<float> x = SmallVocabulary();
  SamplingParams p;
  p.top_p = 0.7f;  // 0.22 + 0.18 + 0.15 + 0.12 = 0.67 < 0.7: five tokens
  const std::vector<double> expected = Reference(x, p);
  ASSERT_EQ(Support(expected), 5);
  ExpectDistribution(LogitsInput::Full(x), p, {}, expected, kDraws, 1003);
}

TEST(StatisticalTest, MinP) {
  const std::vector<float> x = SmallVocabulary();
  SamplingParams p;
  p.min_p = 0.3f;  // p >= 0.066: six tokens
  p.temperature = 1.0f;
  const std::vector<double> expected = Reference(x, p);
  ASSERT_EQ(Support(expected), 6);
  ExpectDistribution(LogitsInput::Full(x), p, {}, expected, kDraws, 1004);
}

TEST(StatisticalTest, AllFiltersWithPenaltiesAndBias) {
  const std::vector<float> x = SmallVocabulary();
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 8;
  p.top_p = 0.9f;
  p.min_p = 0.1f;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.2f;
  p.frequency_penalty = 0.1f;
  p.logit_bias = {{9, 1.5f}, {2, -kInf}};
  const std::vector<int32_t> history = {0, 0, 3, 7};
  const std::vector<double> expected = Reference(x, p, history);
  ASSERT_GE(Support(expected), 4);
  ExpectDistribution(LogitsInput::Full(x), p, history, expected, kDraws, 1005);
}

TEST(StatisticalTest, TopNInput) {
  const std::vector<float> x = RandomLogits(2000, 2.0, 55);
  const TopN t = MakeTopN(x, 16);
  SamplingParams p;
  p.top_k = 12;
  p.temperature = 1.2f;
  ExpectDistribution(t.input(), p, {}, Reference(x, p), kDraws, 1006);
}

TEST(StatisticalTest, LargeVocabularyTopP) {
  // 4096 tokens, so that top-p runs its threshold passes and compactions.
  const std::vector<float> x = RandomLogits(4096, 1.0, 56);
  SamplingParams p;
  p.top_p = 0.8f;
  p.temperature = 0.9f;
  const std::vector<double> expected = Reference(x, p);
  ASSERT_GT(Support(expected), 100);
  ExpectDistribution(LogitsInput::Full(x), p, {}, expected, kDraws, 1007);
}

TEST(StatisticalTest, TiesAtTheTopPBoundary) {
  std::vector<float> x(40, 0.0f);
  SamplingParams p;
  p.top_p = 0.25f;  // 10 of 40 equal tokens: ids 0..9
  ExpectDistribution(LogitsInput::Full(x), p, {}, Reference(x, p), kDraws, 1008);
}

// ---------------------------------------------------------------------------
// Kernels.

std::vector<const internal::Kernels*> KernelSets() {
  std::vector<const internal::Kernels*> sets = {&internal::BaselineKernels()};
  if (internal::Avx2Kernels() != nullptr) sets.push_back(internal::Avx2Kernels());
  return sets;
}

TEST(KernelTest, ExpSumIsAccurate) {
  for (const internal::Kernels* k : KernelSets()) {
    for (int64_t n : {1, 31, 32, 33, 1000, 49152}) {
      std::vector<float> x = RandomLogits(n, 5.0, n);
      const float m = *std::max_element(x.begin(), x.end());
      std::vector<float> out(n);
      const float scale = 1.3f;
      const double sum = k->exp_sum(x.data(), n, m, scale, out.data());
      double ref = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double z = static_cast<double>((x[i] - m) * scale);
        const double e = std::exp2(z);
        ref += e;
        if (z > -120) {
          EXPECT_NEAR(out[i] / e, 1.0, 3e-7) << k->name << " z=" << z;
        }
        if (x[i] == m) {
          EXPECT_EQ(out[i], 1.0f);
        }
      }
      EXPECT_NEAR(sum / ref, 1.0, 1e-6) << k->name;
      EXPECT_EQ(k->exp_sum(x.data(), n, m, scale, nullptr), sum) << k->name;
    }
    const std::vector<float> edge = {0.0f, -kInf, -125.0f, -126.0f, -1e30f, -0.5f, 0.5f, 10.0f};
    std::vector<float> out(edge.size());
    k->exp_sum(edge.data(), static_cast<int64_t>(edge.size()), 0.0f, 1.0f, out.data());
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_FLOAT_EQ(out[2], std::exp2(-125.0f));
    EXPECT_EQ(out[3], 0.0f);
    EXPECT_EQ(out[4], 0.0f);
    EXPECT_FLOAT_EQ(out[5], std::sqrt(0.5f));
    EXPECT_FLOAT_EQ(out[6], std::sqrt(2.0f));
    EXPECT_FLOAT_EQ(out[7], 1024.0f);
  }
}

TEST(KernelTest, PassesMatchScalarReferences) {
  for (const internal::Kernels* k : KernelSets()) {
    for (int64_t n : {1, 7, 32, 100, 4099}) {
      std::vector<float> x = RandomLogits(n, 1.0, 50 + n);
      std::vector<float> p(n);
      for (int64_t i = 0; i < n; ++i) p[i] = std::exp(std::min(0.0f, x[i]) * 3.0f);
      if (n > 5) p[3] = 0.0f;
      // scan_max
      const internal::MaxScan scan = k->scan_max(x.data(), n);
      EXPECT_TRUE(scan.all_finite);
      EXPECT_EQ(scan.max, *std::max_element(x.begin(), x.end()));
      // find_first_ge
      for (float th : {-10.0f, 0.0f, 1.0f, 10.0f}) {
        for (int64_t begin : {int64_t{0}, n / 3}) {
          int64_t want = n;
          for (int64_t i = begin; i < n; ++i) {
            if (x[i] >= th) {
              want = i;
              break;
            }
          }
          EXPECT_EQ(k->find_first_ge(x.data(), begin, n, th), want);
        }
      }
      // mass_at_or_above, collect_band, selected_mass, draw
      const float th[3] = {0.9f, 0.3f, 0.05f};
      double mass[3];
      k->mass_at_or_above(p.data(), n, th, 3, mass);
      for (int c = 0; c < 3; ++c) {
        double want = 0.0;
        for (float v : p) want += v >= th[c] ? v : 0.0f;
        EXPECT_NEAR(mass[c], want, 1e-6 * std::max(1.0, want));
      }
      std::vector<int32_t> idx(n);
      std::vector<float> val(n);
      const int64_t count = k->collect_band(p.data(), n, 0.05f, 0.3f, idx.data(), val.data());
      std::vector<int32_t> want_idx;
      for (int64_t i = 0; i < n; ++i) {
        if (p[i] >= 0.05f && p[i] < 0.3f) want_idx.push_back(static_cast<int32_t>(i));
      }
      ASSERT_EQ(count, static_cast<int64_t>(want_idx.size()));
      for (int64_t i = 0; i < count; ++i) {
        EXPECT_EQ(idx[i], want_idx[i]);
        EXPECT_EQ(val[i], p[want_idx[i]]);
      }
      for (bool inclusive : {false, true}) {
        for (float tau : {0.0f, p[0], 0.5f}) {
          const internal::MassCount mc = k->selected_mass(p.data(), n, tau, inclusive);
          double want = 0.0;
          int64_t want_count = 0;
          for (float v : p) {
            if (inclusive ? v >= tau : v > tau) {
              want += v;
              ++want_count;
            }
          }
          EXPECT_EQ(mc.count, want_count);
          EXPECT_NEAR(mc.mass, want, 1e-6 * std::max(1.0, want));
          if (want_count == 0) continue;
          // Every target lands on a selected element, in order.
          int64_t previous = -1;
          for (double f : {0.0, 0.25, 0.5, 0.999999}) {
            const int64_t at = k->draw(p.data(), n, tau, inclusive, f * mc.mass);
            ASSERT_GE(at, previous);
            ASSERT_GE(at, 0);
            EXPECT_TRUE(inclusive ? p[at] >= tau : p[at] > tau);
            EXPECT_GT(p[at], 0.0f);
            previous = at;
          }
          EXPECT_EQ(k->draw(p.data(), n, tau, inclusive, mc.mass), -1);
        }
      }
    }
    std::vector<float> bad = {1.0f, 2.0f, kNaN};
    EXPECT_FALSE(k->scan_max(bad.data(), 3).all_finite);
    bad.assign(100, 0.0f);
    bad[64] = -kInf;
    EXPECT_FALSE(k->scan_max(bad.data(), 100).all_finite);
  }
}

TEST(KernelTest, Avx2AndBaselineAreBitIdentical) {
  const internal::Kernels* avx2 = internal::Avx2Kernels();
  if (avx2 == nullptr) GTEST_SKIP() << "no AVX2 on this CPU";
  const internal::Kernels& base = internal::BaselineKernels();
  for (int64_t n : {5, 1000, 49152, 49153}) {
    const std::vector<float> x = RandomLogits(n, 2.0, n);
    const float m = avx2->scan_max(x.data(), n).max;
    EXPECT_EQ(m, base.scan_max(x.data(), n).max);
    std::vector<float> pa(n);
    std::vector<float> pb(n);
    EXPECT_EQ(avx2->exp_sum(x.data(), n, m, 1.7f, pa.data()),
              base.exp_sum(x.data(), n, m, 1.7f, pb.data()));
    EXPECT_EQ(pa, pb);
    const float th[8] = {1.0f, 0.5f, 0.2f, 0.1f, 0.05f, 0.01f, 0.001f, 1e-5f};
    double ma[8];
    double mb[8];
    avx2->mass_at_or_above(pa.data(), n, th, 8, ma);
    base.mass_at_or_above(pa.data(), n, th, 8, mb);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(ma[c], mb[c]);
    const internal::MassCount sa = avx2->selected_mass(pa.data(), n, 0.01f, true);
    const internal::MassCount sb = base.selected_mass(pa.data(), n, 0.01f, true);
    EXPECT_EQ(sa.mass, sb.mass);
    EXPECT_EQ(sa.count, sb.count);
    for (double f : {0.1, 0.5, 0.9}) {
      EXPECT_EQ(avx2->draw(pa.data(), n, 0.01f, true, f * sa.mass),
                base.draw(pa.data(), n, 0.01f, true, f * sa.mass));
    }
  }
  // Whole samples: the same tokens on both kernel sets.
  const std::vector<float> x = RandomLogits(49152, 2.0, 60);
  for (const SamplingParams& p : {Greedy(), SamplingParams(), [] {
                                    SamplingParams q;
                                    q.temperature = 0.8f;
                                    q.top_p = 0.95f;
                                    q.min_p = 0.001f;
                                    return q;
                                  }()}) {
    Sampler a(*avx2);
    Sampler b(base);
    Rng ra(3);
    Rng rb(3);
    for (int i = 0; i < 30; ++i) {
      const Sample sa = MustSample(a, LogitsInput::Full(x), p, {}, ra);
      const Sample sb = MustSample(b, LogitsInput::Full(x), p, {}, rb);
      EXPECT_EQ(sa.id, sb.id);
      EXPECT_EQ(sa.num_candidates, sb.num_candidates);
      EXPECT_EQ(sa.logprob, sb.logprob);
    }
  }
}

}  // namespace
}  // namespace llm::sampler
