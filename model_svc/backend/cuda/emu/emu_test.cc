// The CUDA emulator itself: barriers, warp shuffles, the race check and the
// other faults it reports, launch checks, stream capture and graph replay,
// copies checked against their direction, and cublasGemmEx against a
// reference from cuBLAS's column-major definition.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/backend/cuda/launch.h"

namespace llm::cuda {
namespace {

using ::testing::HasSubstr;

// Device memory holding `values`.
template <typename T>
T* ToDevice(const std::vector<T>& values) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, values.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> ToHost(const T* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// The launch's error (cudaGetLastError) and its message.
std::string LastError() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

// out[t] = in[(t + 1) % n] through shared memory, with or without the barrier.
__global__ void RotateKernel(const float* in, float* out, bool barrier) {
  LLM_SHARED_ARRAY(float, s, 256);
  const int t = threadIdx.x, n = blockDim.x;
  s[t] = in[blockIdx.x * n + t];
  if (barrier) __syncthreads();
  out[blockIdx.x * n + t] = s[(t + 1) % n];
}

TEST(CudaEmulator, BarrierOrdersSharedMemory) {
  std::vector<float> in(3 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  float* d_in = ToDevice(in);
  float* d_out = ToDevice(std::vector<float>(in.size()));
  LaunchKernel<RotateKernel>(3, 256, nullptr, d_in, d_out, true);
  ASSERT_EQ(LastError(), "");
  const std::vector<float> out = ToHost(d_out, in.size());
  for (int b = 0; b < 3; ++b) {
    for (int t = 0; t < 256; ++t) EXPECT_EQ(out[b * 256 + t], in[b * 256 + (t + 1) % 256]);
  }
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST(CudaEmulator, MissingBarrierIsAReportedRace) {
  float* d_in = ToDevice(std::vector<float>(64, 1.0f));
  float* d_out = ToDevice(std::vector<float>(64));
  LaunchKernel<RotateKernel>(1, 64, nullptr, d_in, d_out, false);
  const std::string error = LastError();
  EXPECT_THAT(error, HasSubstr("RotateKernel"));
  EXPECT_THAT(error, HasSubstr("shared-memory race on s[1]"));
  // Thread 0 runs first (thread order), reading s[1] before thread 1 writes it.
  EXPECT_THAT(error, HasSubstr("thread (0,0,0) (warp 0, lane 0) read it, then thread (1,0,0) "
                               "(warp 0, lane 1) wrote it with no barrier between"));
  EXPECT_THAT(error, HasSubstr("block (0,0,0)"));
  cudaFree(d_in);
  cudaFree(d_out);
}

// Sum over each warp with __shfl_xor_sync.
__global__ void WarpSumKernel(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[threadIdx.x] = v;
}

TEST(CudaEmulator, WarpShuffleIsAnExchangeAmongLanes) {
  std::vector<float> in(128);
  for (int i = 0; i < 128; ++i) in[i] = static_cast<float>(i % 7);
  float* d_in = ToDevice(in);
  float* d_out = ToDevice(std::vector<float>(128));
  LaunchKernel<WarpSumKernel>(1, 128, nullptr, d_in, d_out);
  ASSERT_EQ(LastError(), "");
  const std::vector<float> out = ToHost(d_out, 128);
  for (int w = 0; w < 4; ++w) {
    float want = 0;
    for (int l = 0; l < 32; ++l) want += in[w * 32 + l];
    for (int l = 0; l < 32; ++l) EXPECT_EQ(out[w * 32 + l], want) << w << " " << l;
  }
  // A full mask in a block of 16 threads names lanes that do not exist.
  LaunchKernel<WarpSumKernel>(1, 16, nullptr, d_in, d_out);
  EXPECT_THAT(LastError(), HasSubstr("names lane 16, which the block lacks"));
  cudaFree(d_in);
  cudaFree(d_out);
}

__global__ void DeadlockKernel() {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}

TEST(CudaEmulator, BarrierThatCannotCompleteIsReported) {
  LaunchKernel<DeadlockKernel>(1, 64, nullptr);
  EXPECT_THAT(LastError(), HasSubstr("deadlock: 1 threads wait at __syncthreads and 31"));
}

__global__ void AddOneKernel(int* counter) {
  if (threadIdx.x == 0) *counter += 1;
}

TEST(CudaEmulator, InvalidLaunchConfiguration) {
  int* d = ToDevice(std::vector<int>(1));
  LaunchKernel<AddOneKernel>(1, 2048, nullptr, d);
  EXPECT_THAT(LastError(), HasSubstr("invalid launch configuration"));
  LaunchKernel<AddOneKernel>(dim3(1, 70000), 32, nullptr, d);
  EXPECT_THAT(LastError(), HasSubstr("AddOneKernel"));
  EXPECT_EQ(ToHost(d, 1)[0], 0);
  cudaFree(d);
}

TEST(CudaEmulator, CaptureRecordsAndGraphReplays) {
  int* d = ToDevice(std::vector<int>(1));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  LaunchKernel<AddOneKernel>(1, 32, stream, d);
  LaunchKernel<AddOneKernel>(1, 32, stream, d);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(ToHost(d, 1)[0], 0) << "captured, not run";
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(ToHost(d, 1)[0], 4);
  // A synchronous call inside a capture is refused and spoils the capture.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t spoiled;
  EXPECT_EQ(cudaStreamEndCapture(stream, &spoiled), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(spoiled, nullptr);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(d);
}

TEST(CudaEmulator, CopiesAreCheckedAgainstTheirDirection) {
  std::vector<float> host(16);
  float* d = ToDevice(host);
  EXPECT_EQ(cudaMemcpy(host.data(), d, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 68, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "past the end of the allocation";
  EXPECT_EQ(cudaMemcpy(d, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  cudaGetLastError();
  cudaFree(d);
}

// C = op(A) op(B) from cuBLAS's column-major definition, in double.
std::vector<double> Reference(bool ta, bool tb, int m, int n, int k, const std::vector<float>& a,
                              int lda, const std::vector<float>& b, int ldb) {
  std::vector<double> c(m * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int l = 0; l < k; ++l) {
        const double x = ta ? a[l + i * lda] : a[i + l * lda];
        const double y = tb ? b[j + l * ldb] : b[l + j * ldb];
        s += x * y;
      }
      c[i + j * m] = s;
    }
  }
  return c;
}

TEST(CudaEmulator, GemmExFollowsCublasColumnMajorDefinition) {
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  const int m = 9, n = 5, k = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1;
      std::vector<float> a(lda * (ta ? m : k)), b(ldb * (tb ? k : n));
      std::vector<uint16_t> ah(a.size()), bh(b.size());
      // fp16 operands: the reference sees the rounded values.
      for (size_t i = 0; i < a.size(); ++i) a[i] = HalfToFloat(ah[i] = FloatToHalf(normal(gen)));
      for (size_t i = 0; i < b.size(); ++i) b[i] = HalfToFloat(bh[i] = FloatToHalf(normal(gen)));
      uint16_t* da = ToDevice(ah);
      uint16_t* db = ToDevice(bh);
      float* dc = ToDevice(std::vector<float>(m * n));
      const float one = 1, zero = 0;
      ASSERT_EQ(cublasGemmEx(handle, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                             m, n, k, &one, da, CUDA_R_16F, lda, db, CUDA_R_16F, ldb, &zero, dc,
                             CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS);
      const std::vector<float> got = ToHost(dc, m * n);
      const std::vector<double> want = Reference(ta, tb, m, n, k, a, lda, b, ldb);
      for (int i = 0; i < m * n; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << ta << tb << " " << i;
      // A leading dimension below the operand's rows is cuBLAS's invalid value.
      EXPECT_EQ(cublasGemmEx(handle, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                             m, n, k, &one, da, CUDA_R_16F, (ta ? k : m) - 1, db, CUDA_R_16F, ldb,
                             &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_INVALID_VALUE);
      // The transposed reading of A runs past its allocation (as a wrong
      // operand layout does on a GPU, where it reads other memory).
      if (!ta) {
        EXPECT_EQ(cublasGemmEx(handle, CUBLAS_OP_T, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one,
                               da, CUDA_R_16F, lda, db, CUDA_R_16F, ldb, &zero, dc, CUDA_R_32F, m,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  CUBLAS_STATUS_EXECUTION_FAILED);
        EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cuBLAS's failure is its own status";
      }
      cudaFree(da);
      cudaFree(db);
      cudaFree(dc);
    }
  }
  cublasDestroy(handle);
}

}  // namespace
}  // namespace llm::cuda
