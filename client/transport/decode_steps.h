// DecodeSteps (client/generate/ports.h) over the model service's
// DecodeStream: one bidi stream on the session's replica, one request per
// token. Internal to ModelClient.
//
// The stream is opened at the first Send, on the replica ModelPool::
// ForSession names, or ForNamedSession for a named session (NOT_FOUND
// "lost" at Await when none does). A step that
// fails with UNAVAILABLE or CANCELLED marks that replica down.
//
// Threads: one thread uses a stream. Ownership: borrows the pool, which must
// outlive the stream. Cost: one write and one read per step, each waited
// for at most step_timeout.
#ifndef LLM_CLIENT_TRANSPORT_DECODE_STEPS_H_
#define LLM_CLIENT_TRANSPORT_DECODE_STEPS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "client/generate/ports.h"
#include "client/transport/model_pool.h"

namespace llm::client::internal {

// A stream of steps on `session_id`; each step within step_timeout, the whole
// stream before `deadline`.
std::unique_ptr<DecodeSteps> NewDecodeSteps(ModelPool& pool, std::string session_id, bool named,
                                            absl::Duration step_timeout, absl::Time deadline);

}  // namespace llm::client::internal

#endif  // LLM_CLIENT_TRANSPORT_DECODE_STEPS_H_
