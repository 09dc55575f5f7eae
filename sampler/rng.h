// The sampler's random number generator: xoshiro256** (Blackman and Vigna,
// 2018) with its 256-bit state filled from a 64-bit seed by splitmix64, as its
// authors recommend.
//
// The whole state is this value: copying an Rng forks the stream (the copy
// and the original then produce the same numbers), and a run is reproducible
// from its seed alone. The output for a given seed is fixed by this file and
// never depends on the platform or the C++ library.
//
// Threads: an Rng is a plain value; use one per generation, or guard it.
// Cost: a few integer operations per number; no allocation.
#ifndef LLM_SAMPLER_RNG_H_
#define LLM_SAMPLER_RNG_H_

#include <array>
#include <cstdint>

namespace llm::sampler {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) {
    for (uint64_t& word : state_) word = SplitMix64(seed);
  }

  // The next 64 random bits.
  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1), a multiple of 2^-53 (uses one Next()).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  friend bool operator==(const Rng&, const Rng&) = default;

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  // Advances *x and returns the next splitmix64 output.
  static uint64_t SplitMix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::array<uint64_t, 4> state_;
};

}  // namespace llm::sampler

#endif  // LLM_SAMPLER_RNG_H_
