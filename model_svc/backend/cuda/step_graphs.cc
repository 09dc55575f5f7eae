#include "model_svc/backend/cuda/step_graphs.h"

#include "model_svc/backend/cuda/cuda_status.h"

namespace llm::cuda {

StepGraphs::Mode StepGraphs::Plan(int64_t rows, int64_t logit_rows) {
  Entry& e = entries_[Key{rows, logit_rows}];
  if (e.exec != nullptr) return Mode::kReplay;
  if (e.failed || e.seen++ == 0) return Mode::kEager;
  return Mode::kCapture;
}

absl::Status StepGraphs::BeginCapture(cudaStream_t stream) {
  return CudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                    "cudaStreamBeginCapture");
}

absl::Status StepGraphs::EndCaptureAndLaunch(cudaStream_t stream, int64_t rows, int64_t logit_rows,
                                             size_t signature) {
  Entry& e = entries_[Key{rows, logit_rows}];
  cudaGraph_t graph = nullptr;
  absl::Status s = CudaStatus(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  if (s.ok()) {
    s = CudaStatus(cudaGraphInstantiate(&e.exec, graph, 0), "cudaGraphInstantiate");
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!s.ok()) {
    e.exec = nullptr;
    e.failed = true;
    return s;
  }
  e.signature = signature;
  return CudaStatus(cudaGraphLaunch(e.exec, stream), "cudaGraphLaunch");
}

void StepGraphs::AbortCapture(cudaStream_t stream, int64_t rows, int64_t logit_rows) {
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  entries_[Key{rows, logit_rows}].failed = true;
}

absl::Status StepGraphs::Launch(cudaStream_t stream, int64_t rows, int64_t logit_rows) {
  const Entry& e = entries_[Key{rows, logit_rows}];
  return CudaStatus(cudaGraphLaunch(e.exec, stream), "cudaGraphLaunch");
}

size_t StepGraphs::signature(int64_t rows, int64_t logit_rows) const {
  auto it = entries_.find(Key{rows, logit_rows});
  return it == entries_.end() ? 0 : it->second.signature;
}

int64_t StepGraphs::captured() const {
  int64_t n = 0;
  for (const auto& [key, e] : entries_) n += e.exec != nullptr;
  return n;
}

void StepGraphs::Clear() {
  for (auto& [key, e] : entries_) {
    if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
  }
  entries_.clear();
}

}  // namespace llm::cuda
