// The CUDA backend as a plugin: libllm_cuda.so, loaded with dlopen by
// CreateBackend (backend_factory.cc) when a CUDA backend is asked for.
//
// Why a plugin: a binary built with CUDA then runs on machines without the
// CUDA libraries (the CPU image, a CPU node), and the CUDA libraries'
// thread-local storage (cuBLASLt has ~90 KiB of it) stays out of the static
// TLS block that every thread's stack must hold, which broke threads created
// with small stacks (civetweb's, for the metrics endpoint) when model_server
// linked CUDA directly.
//
// ABI: plain C entry points; the plugin and its host must come from the
// same build (same compiler, Abseil and headers). Each returns a heap object
// that the caller owns.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_PLUGIN_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_PLUGIN_H_

// absl::Status* : OK when a CUDA device is usable, else why not.
#define LLM_CUDA_PLUGIN_DEVICE_STATUS "llm_cuda_device_status"
// (const llm::cuda::CudaBackendOptions*) ->
//     absl::StatusOr<std::unique_ptr<llm::model::Backend>>*
#define LLM_CUDA_PLUGIN_CREATE_BACKEND "llm_cuda_create_backend"
// The file name, looked for beside the running executable (or at
// $LLM_CUDA_PLUGIN).
#define LLM_CUDA_PLUGIN_FILE "libllm_cuda.so"

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_PLUGIN_H_
