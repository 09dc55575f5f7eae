// A model file's fingerprint, which a session snapshot carries
// (snapshot/snapshot.h) so that its KV loads only into the same model: a
// 64-bit hash of the GGUF's metadata (every key, type and value), its tensor
// table (names, shapes, types, offsets) and the first 256 bytes of every
// tensor's data (so that two fine-tunes with one table differ).
//
// Threads: a pure function. Cost: linear in the metadata (the vocabulary's
// strings included) and the tensor count; a few milliseconds at load.
#ifndef LLM_MODEL_SVC_ENGINE_FINGERPRINT_H_
#define LLM_MODEL_SVC_ENGINE_FINGERPRINT_H_

#include <cstdint>

#include "common/gguf/gguf.h"

namespace llm::engine {

uint64_t ModelFingerprint(const gguf::File& file);

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_FINGERPRINT_H_
