// The CUDA emulator's cuBLAS (include/cublas_v2.h): cublasGemmEx from
// cuBLAS's column-major definition.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "common/strings.h"
#include "model_svc/backend/cuda/emu/emulator.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace {

using llm::StrCat;

size_t TypeBytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

const float* HalfTable() {
  static const std::vector<float>* table = [] {
    auto* t = new std::vector<float>(65536);
    for (uint32_t h = 0; h < 65536; ++h) (*t)[h] = llm::HalfToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table->data();
}

float Load(const void* p, cudaDataType_t t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
  const uint16_t bits = static_cast<const uint16_t*>(p)[i];
  if (t == CUDA_R_16F) return HalfTable()[bits];
  const uint32_t wide = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

void Store(void* p, cudaDataType_t t, int64_t i, float v) {
  if (t == CUDA_R_32F) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<uint16_t*>(p)[i] = t == CUDA_R_16F ? llm::FloatToHalf(v) : llm::FloatToBf16(v);
  }
}

// Row r of op(X) as k floats: op(A)'s row r (A) or op(B)'s column r (B).
// Column-major: X(i, j) = x[i + j * ld].
template <cudaDataType_t T>
void LoadRowOf(const void* x, int64_t ld, bool trans, bool is_b, int64_t r, int64_t k, float* out) {
  // Element l of the row is X(i, j) with (i, j) = A: (r, l) or (l, r) when
  // transposed; B: (l, r) or (r, l) when transposed.
  const bool contiguous = is_b != trans;  // i = l: the row runs down a column
  const int64_t step = contiguous ? 1 : ld;
  const int64_t start = contiguous ? r * ld : r;
  if constexpr (T == CUDA_R_32F) {
    const float* p = static_cast<const float*>(x) + start;
    for (int64_t l = 0; l < k; ++l) out[l] = p[l * step];
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(x) + start;
    if constexpr (T == CUDA_R_16F) {
      const float* table = HalfTable();
      for (int64_t l = 0; l < k; ++l) out[l] = table[p[l * step]];
    } else {
      for (int64_t l = 0; l < k; ++l) {
        const uint32_t wide = uint32_t{p[l * step]} << 16;
        std::memcpy(&out[l], &wide, 4);
      }
    }
  }
}

void LoadRow(const void* x, cudaDataType_t t, int64_t ld, bool trans, bool is_b, int64_t r,
             int64_t k, float* out) {
  switch (t) {
    case CUDA_R_16F:
      return LoadRowOf<CUDA_R_16F>(x, ld, trans, is_b, r, k, out);
    case CUDA_R_16BF:
      return LoadRowOf<CUDA_R_16BF>(x, ld, trans, is_b, r, k, out);
    default:
      return LoadRowOf<CUDA_R_32F>(x, ld, trans, is_b, r, k, out);
  }
}

float Dot(const float* a, const float* b, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t l = 0;
  for (; l + 8 <= k; l += 8) {
    for (int u = 0; u < 8; ++u) acc[u] += a[l + u] * b[l + u];
  }
  for (; l < k; ++l) acc[0] += a[l] * b[l];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

cublasStatus_t Invalid(const std::string& why) {
  std::fprintf(stderr, "CUDA emulator: cublasGemmEx: %s\n", why.c_str());
  return CUBLAS_STATUS_INVALID_VALUE;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes != 0 && !llm::cuda::emu::IsDeviceRange(workspace, bytes)) {
    return Invalid("the workspace is not device memory");
  }
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (transa == CUBLAS_OP_C || transb == CUBLAS_OP_C ||
      (transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
    return Invalid("transa / transb");
  }
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (m < 0 || n < 0 || k < 0) return Invalid(StrCat("m ", m, ", n ", n, ", k ", k));
  // cuBLAS's checks of the leading dimensions (column-major).
  if (lda < std::max(1, ta ? k : m)) return Invalid(StrCat("lda ", lda, " < ", ta ? k : m));
  if (ldb < std::max(1, tb ? n : k)) return Invalid(StrCat("ldb ", ldb, " < ", tb ? n : k));
  if (ldc < std::max(1, m)) return Invalid(StrCat("ldc ", ldc, " < ", m));
  const bool types_ok = computeType == CUBLAS_COMPUTE_32F && Atype == Btype &&
                        (Atype == CUDA_R_32F || Atype == CUDA_R_16F || Atype == CUDA_R_16BF) &&
                        (Ctype == CUDA_R_32F || Ctype == Atype);
  if (!types_ok) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  // Each operand's extent: its columns times the leading dimension, the
  // last column only as far as its rows go.
  auto extent = [](int64_t rows, int64_t cols, int64_t ld, cudaDataType_t t) {
    return static_cast<size_t>(((cols - 1) * ld + rows) * static_cast<int64_t>(TypeBytes(t)));
  };
  const char* outside = nullptr;
  if (k > 0 && !llm::cuda::emu::IsDeviceRange(A, extent(ta ? k : m, ta ? m : k, lda, Atype))) {
    outside = "A";
  } else if (k > 0 &&
             !llm::cuda::emu::IsDeviceRange(B, extent(tb ? n : k, tb ? k : n, ldb, Btype))) {
    outside = "B";
  } else if (!llm::cuda::emu::IsDeviceRange(C, extent(m, n, ldc, Ctype))) {
    outside = "C";
  }
  if (outside != nullptr) {
    const std::string why =
        StrCat("cublasGemmEx: operand ", outside, " (m ", m, ", n ", n, ", k ", k, ", lda ", lda,
               ", ldb ", ldb, ", ldc ", ldc, ", op ", ta ? "T" : "N", tb ? "T" : "N",
               ") reaches beyond its device allocation");
    std::fprintf(stderr, "CUDA emulator: %s\n", why.c_str());
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  llm::cuda::emu::Enqueue(handle->stream, [=] {
    // op(B)'s columns once; then op(A)'s rows one at a time.
    std::vector<float> pb(static_cast<size_t>(n) * k), row(k);
    for (int64_t j = 0; j < n; ++j) LoadRow(B, Btype, ldb, tb, /*is_b=*/true, j, k, &pb[j * k]);
    for (int64_t i = 0; i < m; ++i) {
      LoadRow(A, Atype, lda, ta, /*is_b=*/false, i, k, row.data());
      for (int64_t j = 0; j < n; ++j) {
        float v = a * Dot(row.data(), pb.data() + j * k, k);
        const int64_t c = i + j * static_cast<int64_t>(ldc);
        if (b != 0.0f) v += b * Load(C, Ctype, c);  // beta == 0: C is not read
        Store(C, Ctype, c, v);
      }
    }
    return cudaSuccess;
  });
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
#define LLM_EMU_NAME(s) \
  case s:               \
    return #s;
    LLM_EMU_NAME(CUBLAS_STATUS_SUCCESS)
    LLM_EMU_NAME(CUBLAS_STATUS_NOT_INITIALIZED)
    LLM_EMU_NAME(CUBLAS_STATUS_ALLOC_FAILED)
    LLM_EMU_NAME(CUBLAS_STATUS_INVALID_VALUE)
    LLM_EMU_NAME(CUBLAS_STATUS_ARCH_MISMATCH)
    LLM_EMU_NAME(CUBLAS_STATUS_MAPPING_ERROR)
    LLM_EMU_NAME(CUBLAS_STATUS_EXECUTION_FAILED)
    LLM_EMU_NAME(CUBLAS_STATUS_INTERNAL_ERROR)
    LLM_EMU_NAME(CUBLAS_STATUS_NOT_SUPPORTED)
#undef LLM_EMU_NAME
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) { return cublasGetStatusName(status); }
