// Helpers of the engine's tests: a small random-weight model, a gate that
// holds the step loop, and request builders. Test-only (GoogleTest).
#ifndef LLM_MODEL_SVC_ENGINE_ENGINE_TESTING_H_
#define LLM_MODEL_SVC_ENGINE_ENGINE_TESTING_H_

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "model_svc/engine/engine.h"
#include "model_svc/testing/random_model.h"

namespace llm::engine {

// The engine's test seam: an engine whose step loop calls a hook before each
// step.
class EngineTestPeer {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> CreateWithStepHook(
      std::unique_ptr<model::LlamaModel> model, const EngineOptions& options,
      std::function<void()> before_step) {
    return Engine::CreateWithStepHook(std::move(model), options, std::move(before_step));
  }
};

}  // namespace llm::engine

namespace llm::engine::testing {

inline model::testing::RandomModelSpec Spec() {
  model::testing::RandomModelSpec s;
  s.vocab = 300;
  s.d_model = 64;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.ff = 128;
  s.context = 256;
  s.matrix_type = gguf::TensorType::kQ4_1;
  s.seed = 7;
  return s;
}

// Holds the step loop before each step while closed (through
// EngineTestPeer's hook), so that a test can race a call against a
// request in flight deterministically.
class StepGate {
 public:
  void Close() { Allow(0); }
  void Open() { Allow(-1); }
  // Lets n more steps pass, then holds the loop again (-1: all of them).
  void Allow(int n) {
    absl::MutexLock lock(&mu_);
    allowed_ = n;
    if (n == 0) arrivals_ = 0;
  }
  // On the step loop: waits while closed.
  void Pass() {
    absl::MutexLock lock(&mu_);
    ++arrivals_;
    auto open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return allowed_ != 0; };
    mu_.Await(absl::Condition(&open));
    if (allowed_ > 0) --allowed_;
  }
  // Waits until the loop has reached the gate n times since it was closed.
  void AwaitArrival(int n = 1) {
    absl::MutexLock lock(&mu_);
    auto arrived = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return arrivals_ >= n; };
    mu_.Await(absl::Condition(&arrived));
  }

 private:
  absl::Mutex mu_;
  int allowed_ ABSL_GUARDED_BY(mu_) = -1;
  int arrivals_ ABSL_GUARDED_BY(mu_) = 0;
};

struct EngineSetup {
  StepGate* gate = nullptr;
  int64_t max_batch_tokens = 64;
  int64_t prefill_step_tokens = -1;  // EngineOptions': the backend's (CPU: 32)
  int32_t kv_blocks = 64;
  int32_t block_size = 4;
  int64_t max_sessions = 16;
  absl::Duration ttl = absl::Minutes(5);
  int threads = 2;
  bool prefix_cache = true;
  std::shared_ptr<SpillStore> spill;
  model::KvType kv_type = model::KvType::kF32;          // keys and values
  std::optional<model::KvType> kv_type_v;               // the values', when not kv_type
  std::optional<model::testing::RandomModelSpec> spec;  // Spec() when unset
};

inline std::unique_ptr<Engine> MakeEngine(const EngineSetup& setup = {}) {
  model::ModelOptions mo;
  mo.max_step_tokens = setup.max_batch_tokens;
  mo.max_logit_rows = setup.max_batch_tokens;
  mo.kv_blocks = setup.kv_blocks;
  mo.kv_block_size = setup.block_size;
  mo.kv_type = setup.kv_type;
  mo.kv_type_v = setup.kv_type_v;
  auto m = model::testing::LoadRandomModel(setup.spec.value_or(Spec()), mo, setup.threads);
  EXPECT_TRUE(m.ok()) << m.status();
  EngineOptions eo;
  eo.max_batch_tokens = setup.max_batch_tokens;
  eo.prefill_step_tokens = setup.prefill_step_tokens;
  eo.max_sessions = setup.max_sessions;
  eo.session_ttl = setup.ttl;
  eo.prefix_cache = setup.prefix_cache;
  eo.spill = setup.spill;
  std::function<void()> before_step;
  if (setup.gate != nullptr) before_step = [gate = setup.gate] { gate->Pass(); };
  auto e = EngineTestPeer::CreateWithStepHook(*std::move(m), eo, std::move(before_step));
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

// An engine whose step loop passes `gate` before each step.
inline std::unique_ptr<Engine> MakeGatedEngine(StepGate& gate, EngineSetup setup = {}) {
  setup.gate = &gate;
  return MakeEngine(setup);
}

inline std::vector<int32_t> Tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& id : t) id = static_cast<int32_t>(rng() % 300);
  return t;
}

inline AppendRequest Request(const std::string& session, std::vector<int32_t> tokens,
                             bool all_logits = false) {
  AppendRequest r;
  r.session_id = session;
  r.tokens = std::move(tokens);
  r.all_logits = all_logits;
  return r;
}

inline void ExpectClose(const model::Logits& a, const model::Logits& b) {
  ASSERT_EQ(a.values.size(), b.values.size());
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(b.values[i]));
    max_diff = std::max(max_diff, std::abs(a.values[i] - b.values[i]));
  }
  EXPECT_LE(max_diff, 1e-5f * std::max(max_abs, 1.0f));
  auto argmax = [](const model::Logits& l) {
    return std::max_element(l.values.begin(), l.values.end()) - l.values.begin();
  };
  EXPECT_EQ(argmax(a), argmax(b));
}

}  // namespace llm::engine::testing

#endif  // LLM_MODEL_SVC_ENGINE_ENGINE_TESTING_H_
