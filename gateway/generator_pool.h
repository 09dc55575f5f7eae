// Connected Generators (client/generator.h) for the gateway's requests. A
// Generator runs one generation at a time (its clients are not thread-safe),
// so each request leases one for its whole duration; idle ones are kept and
// reused (a Generator's Connect reads both services' Info and fetches the
// vocabulary's bytes, ~10 ms, which a request should not pay each time).
//
// At most `max_active` leases are out at once: the one past that is refused
// at once (ResourceExhausted: the gateway answers 429) instead of queueing.
//
// Threads: every method may be called from any thread.
#ifndef LLM_GATEWAY_GENERATOR_POOL_H_
#define LLM_GATEWAY_GENERATOR_POOL_H_

#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "client/generator.h"
#include "client/transport/client_options.h"

namespace llm::gateway {

class GeneratorPool {
 public:
  class Lease {
   public:
    Lease(Lease&& other) noexcept : pool_(other.pool_), generator_(std::move(other.generator_)) {
      other.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    ~Lease();

    client::Generator& operator*() const { return *generator_; }
    client::Generator* operator->() const { return generator_.get(); }
    // The generator is not given back to the pool (after an error that may
    // have left it unusable); the next lease connects a new one.
    void Discard() { discard_ = true; }

   private:
    friend class GeneratorPool;
    Lease(GeneratorPool* pool, std::unique_ptr<client::Generator> g)
        : pool_(pool), generator_(std::move(g)) {}
    GeneratorPool* pool_;
    std::unique_ptr<client::Generator> generator_;
    bool discard_ = false;
  };

  GeneratorPool(client::ClientOptions options, int max_active)
      : options_(std::move(options)), max_active_(max_active) {}

  // Adds an already connected generator to the idle ones (the one the
  // gateway connected at startup).
  void AddIdle(std::unique_ptr<client::Generator> g);

  // An idle generator, or a newly connected one. ResourceExhausted when
  // max_active are leased; Connect's error when a new one cannot connect.
  absl::StatusOr<Lease> Acquire();

  int active() const;
  const client::ClientOptions& options() const { return options_; }

 private:
  void GiveBack(std::unique_ptr<client::Generator> g, bool discard);

  const client::ClientOptions options_;
  const int max_active_;
  mutable std::mutex mu_;
  int active_ = 0;
  std::vector<std::unique_ptr<client::Generator>> idle_;
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_GENERATOR_POOL_H_
