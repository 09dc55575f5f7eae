#include "model_svc/backend/backend_factory.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "common/strings.h"
#include "model_svc/backend/cpu/cpu_backend.h"
#if LLM_HAVE_CUDA
#include "model_svc/backend/cuda/cuda_backend.h"
#include "model_svc/backend/cuda/plugin.h"
#endif

namespace llm::model {
namespace {

#if LLM_HAVE_CUDA
// The plugin's entry points, loaded once; or why it could not be loaded.
struct CudaPlugin {
  absl::Status status;
  void* (*device_status)() = nullptr;
  void* (*create)(const void*) = nullptr;
};

std::string ExecutableDir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string p(path, n);
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

const CudaPlugin& LoadCudaPlugin() {
  static const CudaPlugin* plugin = [] {
    auto* p = new CudaPlugin;
    const char* env = std::getenv("LLM_CUDA_PLUGIN");
    const std::string path =
        env != nullptr && *env != '\0' ? env : ExecutableDir() + "/" LLM_CUDA_PLUGIN_FILE;
    // Never closed: backends it created may live until exit.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      p->status =
          absl::FailedPreconditionError(StrCat("cannot load the CUDA backend plugin: ", dlerror()));
      return p;
    }
    p->device_status = reinterpret_cast<void* (*)()>(dlsym(handle, LLM_CUDA_PLUGIN_DEVICE_STATUS));
    p->create =
        reinterpret_cast<void* (*)(const void*)>(dlsym(handle, LLM_CUDA_PLUGIN_CREATE_BACKEND));
    if (p->device_status == nullptr || p->create == nullptr) {
      p->status = absl::FailedPreconditionError(
          StrCat("the CUDA backend plugin ", path, " lacks its entry points"));
    }
    return p;
  }();
  return *plugin;
}

absl::Status CudaStatusViaPlugin() {
  const CudaPlugin& plugin = LoadCudaPlugin();
  if (!plugin.status.ok()) return plugin.status;
  std::unique_ptr<absl::Status> s(static_cast<absl::Status*>(plugin.device_status()));
  return *s;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaViaPlugin(const BackendOptions& options) {
  const CudaPlugin& plugin = LoadCudaPlugin();
  if (!plugin.status.ok()) return plugin.status;
  cuda::CudaBackendOptions cuda_options;
  cuda_options.device = options.cuda_device;
  cuda_options.graphs = options.cuda_graphs;
  cuda_options.quantized_weights = options.cuda_quantized_weights;
  std::unique_ptr<absl::StatusOr<std::unique_ptr<Backend>>> created(
      static_cast<absl::StatusOr<std::unique_ptr<Backend>>*>(plugin.create(&cuda_options)));
  return std::move(*created);
}
#endif

}  // namespace

bool CudaBackendBuilt() { return LLM_HAVE_CUDA != 0; }

absl::Status CudaBackendStatus() {
#if LLM_HAVE_CUDA
  return CudaStatusViaPlugin();
#else
  return absl::FailedPreconditionError(
      "this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.name != "cpu" && options.name != "cuda" && options.name != "auto") {
    return absl::InvalidArgumentError(
        StrCat("unknown backend \"", options.name, "\" (cpu, cuda or auto)"));
  }
  if (options.name == "cuda") {
#if LLM_HAVE_CUDA
    return CreateCudaViaPlugin(options);
#else
    return CudaBackendStatus();
#endif
  }
#if LLM_HAVE_CUDA
  if (options.name == "auto" && CudaBackendStatus().ok()) return CreateCudaViaPlugin(options);
#endif
  cpu::CpuBackendOptions cpu_options;
  cpu_options.threads = options.threads;
  cpu_options.mmap_weights = options.cpu_mmap_weights;
  cpu_options.cpus = options.cpu_pool_cpus;
  absl::Status placement;
  std::unique_ptr<Backend> backend = cpu::CreateCpuBackend(cpu_options, &placement);
  if (!placement.ok()) return placement;
  return backend;
}

}  // namespace llm::model
