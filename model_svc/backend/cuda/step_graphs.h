// Decode steps as CUDA graphs: one graph per step shape (rows, logit rows),
// captured from the backend's own op calls and replayed afterwards.
//
// A 135M-parameter model's decode step is ~300 small kernels; launching
// them one by one costs more than running them. A graph launches them all
// at once. Replay is correct because every kernel reads the step's varying
// inputs (tokens, positions, block tables) from fixed device buffers
// (kernels.h), and the model calls the same ops with the same tensors for
// every step of a shape.
//
// A shape is captured the second time it is seen (the first run is eager,
// so that cuBLAS has chosen its kernels and any lazy allocation is done).
//
// Threads: the step thread only.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_STEP_GRAPHS_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_STEP_GRAPHS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace llm::cuda {

class StepGraphs {
 public:
  enum class Mode { kEager, kCapture, kReplay };

  StepGraphs() = default;
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;
  ~StepGraphs() { Clear(); }

  // What to do with a graph-eligible step of this shape.
  Mode Plan(int64_t rows, int64_t logit_rows);

  // Starts capturing `stream` (thread-local capture mode).
  absl::Status BeginCapture(cudaStream_t stream);
  // Ends the capture, instantiates the graph for the shape, remembering the
  // signature of the op calls it was captured from, and launches it. On
  // failure the shape is never captured again.
  absl::Status EndCaptureAndLaunch(cudaStream_t stream, int64_t rows, int64_t logit_rows,
                                   size_t signature);
  // Ends a capture whose ops failed, discarding it; the shape is never
  // captured again.
  void AbortCapture(cudaStream_t stream, int64_t rows, int64_t logit_rows);
  // Launches the shape's graph (Plan said kReplay).
  absl::Status Launch(cudaStream_t stream, int64_t rows, int64_t logit_rows);
  // The signature of the op calls the shape's graph was captured from.
  size_t signature(int64_t rows, int64_t logit_rows) const;
  // Graphs captured and usable.
  int64_t captured() const;

  // Forgets every graph (device buffers they use were reallocated).
  void Clear();
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    int64_t seen = 0;
    bool failed = false;
    cudaGraphExec_t exec = nullptr;
    size_t signature = 0;
  };
  using Key = std::pair<int64_t, int64_t>;

  absl::flat_hash_map<Key, Entry> entries_;
};

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_STEP_GRAPHS_H_
