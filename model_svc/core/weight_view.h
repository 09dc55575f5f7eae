// One weight tensor as a GGUF file stores it: what a backend uploads (CUDA)
// or wraps (CPU) at load time (core/backend.h, Backend::UploadWeight).
// model/weights.h locates a model's views in its file.
#ifndef LLM_MODEL_SVC_CORE_WEIGHT_VIEW_H_
#define LLM_MODEL_SVC_CORE_WEIGHT_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/gguf/gguf.h"

namespace llm::model {

// One matrix (or vector, rows == 1) as stored: `rows` rows of `cols`
// elements, row-major, in GGUF tensor type `type`. Borrowed: `name` and
// `data` point into the memory-mapped file, which must outlive the view.
struct WeightView {
  std::string_view name;
  gguf::TensorType type = gguf::TensorType::kF32;
  int64_t rows = 0;  // ne[1]: output features
  int64_t cols = 0;  // ne[0]: input features
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;

  // False for an optional tensor the file does not have.
  bool present() const { return data != nullptr; }
  // Rows [first, first + count) as a matrix of their own.
  WeightView RowRange(int64_t first, int64_t count) const {
    WeightView v = *this;
    v.rows = count;
    v.data = data + first * row_bytes;
    return v;
  }
  // Elements [first, first + count) of an F32 vector (rows == 1).
  WeightView VectorSlice(int64_t first, int64_t count) const {
    WeightView v = *this;
    v.cols = count;
    v.data = data + first * sizeof(float);
    v.row_bytes = count * sizeof(float);
    return v;
  }
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_CORE_WEIGHT_VIEW_H_
