#include "model_svc/testing/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <string>

#include "common/half.h"
#include "common/strings.h"
#include "model_svc/kernels/quant.h"

namespace llm::model::testing {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "ReferenceLogits: %s\n", what.c_str());
  std::abort();
}

struct Matrix {
  gguf::TensorType type = gguf::TensorType::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<float> w;  // row-major
  const float* row(int64_t r) const { return w.data() + r * cols; }
};

Matrix Load(const gguf::File& file, const std::string& name) {
  const gguf::TensorInfo* t = file.FindTensor(name);
  if (t == nullptr) Die(StrCat("missing tensor ", name));
  Matrix m;
  m.type = static_cast<gguf::TensorType>(t->ggml_type);
  m.cols = t->ne[0];
  m.rows = t->rows();
  m.w.resize(m.rows * m.cols);
  const size_t row_bytes = t->size_bytes / m.rows;
  for (int64_t r = 0; r < m.rows; ++r) {
    kernels::DequantizeRow(static_cast<gguf::TensorType>(t->ggml_type), t->data + r * row_bytes,
                           m.w.data() + r * m.cols, m.cols);
  }
  return m;
}

int64_t Count(const gguf::File& file, const std::string& key, int64_t fallback) {
  if (file.Find(key) == nullptr) {
    if (fallback < 0) Die(StrCat("missing ", key));
    return fallback;
  }
  auto v = file.GetUint(key);
  if (!v.ok()) Die(std::string(v.status().message()));
  return static_cast<int64_t>(*v);
}

double Real(const gguf::File& file, const std::string& key, double fallback) {
  if (file.Find(key) == nullptr) return fallback;
  auto v = file.GetFloat(key);
  if (!v.ok()) Die(std::string(v.status().message()));
  return *v;
}

using Vec = std::vector<double>;

bool IsFloatType(gguf::TensorType t) {
  return t == gguf::TensorType::kF32 || t == gguf::TensorType::kF16 || t == gguf::TensorType::kBF16;
}

// x rounded to blocks of 32 int8 values, as fp32 activations would be.
Vec RoundToQ8(const Vec& x) {
  Vec out(x.size());
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(static_cast<float>(x[i])));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (size_t i = b; i < b + 32; ++i) {
      const float q = std::nearbyint(std::clamp(static_cast<float>(x[i]) * id, -127.0f, 127.0f));
      out[i] = static_cast<double>(d) * q;
    }
  }
  return out;
}

// W x, W being [rows x cols].
Vec MatVec(const Matrix& w, const Vec& x_in, const ReferenceOptions& options) {
  if (static_cast<int64_t>(x_in.size()) != w.cols) Die("matrix shape mismatch");
  const Vec x = options.q8_activations && !IsFloatType(w.type) ? RoundToQ8(x_in) : x_in;
  Vec out(w.rows);
  for (int64_t r = 0; r < w.rows; ++r) {
    const float* row = w.row(r);
    double sum = 0;
    for (int64_t c = 0; c < w.cols; ++c) sum += static_cast<double>(row[c]) * x[c];
    out[r] = sum;
  }
  return out;
}

Vec RmsNorm(const Vec& x, const Matrix& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * w.w[i];
  return out;
}

// fp16 rounding, as llama.cpp's GELU table does.
double RoundF16(double x) { return HalfToFloat(FloatToHalf(static_cast<float>(x))); }

// GELU (tanh approximation) as backend.h's GeluMul defines it: input and
// result rounded to fp16.
double Gelu(double g) {
  if (g <= -10) return 0;
  if (g >= 10) return g;
  const double h = RoundF16(g);
  return RoundF16(0.5 * h *
                  (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * h * (1 + 0.044715 * h * h))));
}

bool Has(const gguf::File& file, const std::string& name) {
  return file.FindTensor(name) != nullptr;
}

// Rows [first, first + count) of m.
Matrix Rows(const Matrix& m, int64_t first, int64_t count) {
  Matrix out;
  out.type = m.type;
  out.rows = count;
  out.cols = m.cols;
  out.w.assign(m.w.begin() + first * m.cols, m.w.begin() + (first + count) * m.cols);
  return out;
}

}  // namespace

std::vector<std::vector<float>> ReferenceLogits(const gguf::File& file,
                                                std::span<const int32_t> tokens,
                                                const ReferenceOptions& options) {
  auto arch_or = file.GetString("general.architecture");
  if (!arch_or.ok()) Die(std::string(arch_or.status().message()));
  const std::string arch(*arch_or);
  const std::string p = StrCat(arch, ".");
  // The families' differences, written out here independently of
  // model/architecture.cc (llama.cpp's graph builders are the source).
  const bool neox = arch == "qwen2" || arch == "qwen3" || arch == "gemma3" || arch == "phi3";
  const bool gemma = arch == "gemma3";
  const int64_t d = Count(file, p + "embedding_length", -1);
  const int64_t layers = Count(file, p + "block_count", -1);
  const int64_t heads = Count(file, p + "attention.head_count", -1);
  const int64_t kv_heads = Count(file, p + "attention.head_count_kv", heads);
  const int64_t head_dim = Count(file, p + "attention.key_length", d / heads);
  const int64_t rope_dim = Count(file, p + "rope.dimension_count", head_dim);
  const int64_t ff = Count(file, p + "feed_forward_length", -1);
  const double base = Real(file, p + "rope.freq_base", 10000.0);
  const double eps = Real(file, p + "attention.layer_norm_rms_epsilon", 1e-5);
  const int64_t window = gemma ? Count(file, p + "attention.sliding_window", 0) : 0;
  double freq_scale = 1.0;
  if (file.Find(p + "rope.scaling.type") != nullptr) {
    auto type = file.GetString(p + "rope.scaling.type");
    if (!type.ok()) Die(std::string(type.status().message()));
    if (*type == "linear") freq_scale = 1.0 / Real(file, p + "rope.scaling.factor", 1.0);
  }
  const int64_t group = heads / kv_heads;
  const int64_t q_dim = heads * head_dim, kv_dim = kv_heads * head_dim;

  const Matrix embd = Load(file, "token_embd.weight");
  const Matrix out_norm = Load(file, "output_norm.weight");
  const Matrix head = Has(file, "output.weight") ? Load(file, "output.weight") : embd;
  std::vector<double> factors(rope_dim / 2, 1.0);
  if (Has(file, "rope_freqs.weight")) {
    const Matrix f = Load(file, "rope_freqs.weight");
    for (int64_t i = 0; i < rope_dim / 2; ++i) factors[i] = f.w[i];
  }
  struct Layer {
    Matrix attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo, post_attn_norm, ffn_norm, gate,
        up, down, post_ffn_norm;
    bool bias = false, sliding = false;
  };
  std::vector<Layer> layer(layers);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string b = StrCat("blk.", i, ".");
    Layer& l = layer[i];
    l.attn_norm = Load(file, b + "attn_norm.weight");
    if (Has(file, b + "attn_qkv.weight")) {
      const Matrix qkv = Load(file, b + "attn_qkv.weight");
      l.wq = Rows(qkv, 0, q_dim);
      l.wk = Rows(qkv, q_dim, kv_dim);
      l.wv = Rows(qkv, q_dim + kv_dim, kv_dim);
    } else {
      l.wq = Load(file, b + "attn_q.weight");
      l.wk = Load(file, b + "attn_k.weight");
      l.wv = Load(file, b + "attn_v.weight");
    }
    if (Has(file, b + "attn_qkv.bias")) {
      const Matrix bias = Load(file, b + "attn_qkv.bias");  // one row
      l.bq.w.assign(bias.w.begin(), bias.w.begin() + q_dim);
      l.bk.w.assign(bias.w.begin() + q_dim, bias.w.begin() + q_dim + kv_dim);
      l.bv.w.assign(bias.w.begin() + q_dim + kv_dim, bias.w.end());
      l.bias = true;
    } else if (Has(file, b + "attn_q.bias")) {
      l.bq = Load(file, b + "attn_q.bias");
      l.bk = Load(file, b + "attn_k.bias");
      l.bv = Load(file, b + "attn_v.bias");
      l.bias = true;
    }
    if (Has(file, b + "attn_q_norm.weight")) {
      l.q_norm = Load(file, b + "attn_q_norm.weight");
      l.k_norm = Load(file, b + "attn_k_norm.weight");
    }
    l.wo = Load(file, b + "attn_output.weight");
    if (gemma) {
      l.post_attn_norm = Load(file, b + "post_attention_norm.weight");
      l.post_ffn_norm = Load(file, b + "post_ffw_norm.weight");
      l.sliding = window > 0 && i % 6 < 5;
    }
    l.ffn_norm = Load(file, b + "ffn_norm.weight");
    if (arch == "phi3") {
      const Matrix gate_up = Load(file, b + "ffn_up.weight");
      l.gate = Rows(gate_up, 0, ff);
      l.up = Rows(gate_up, ff, ff);
    } else {
      l.gate = Load(file, b + "ffn_gate.weight");
      l.up = Load(file, b + "ffn_up.weight");
    }
    l.down = Load(file, b + "ffn_down.weight");
  }

  const int64_t n = static_cast<int64_t>(tokens.size());
  // Residual stream of every position.
  std::vector<Vec> x(n, Vec(d));
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= embd.rows) Die(StrCat("token ", tokens[t], " out of range"));
    const float* row = embd.row(tokens[t]);
    // Gemma scales its embeddings by sqrt(d) (in float, as llama.cpp does).
    const double scale = gemma ? std::sqrt(static_cast<float>(d)) : 1.0;
    for (int64_t i = 0; i < d; ++i) x[t][i] = row[i] * scale;
  }
  auto rope = [&](Vec& v, int64_t num_heads, int64_t pos, double rope_base, double scale) {
    const int64_t pairs = rope_dim / 2;
    for (int64_t h = 0; h < num_heads; ++h) {
      for (int64_t i = 0; i < pairs; ++i) {
        const double theta = static_cast<double>(pos) * scale *
                             std::pow(rope_base, -2.0 * static_cast<double>(i) / rope_dim) /
                             factors[i];
        double& a = v[h * head_dim + (neox ? i : 2 * i)];
        double& b = v[h * head_dim + (neox ? i + pairs : 2 * i + 1)];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(theta) - b0 * std::sin(theta);
        b = a0 * std::sin(theta) + b0 * std::cos(theta);
      }
    }
  };
  // RMSNorm of each head_dim slice of v.
  auto head_norm = [&](Vec& v, const Matrix& w) {
    for (size_t h = 0; h < v.size() / head_dim; ++h) {
      const Vec part(v.begin() + h * head_dim, v.begin() + (h + 1) * head_dim);
      const Vec normed = RmsNorm(part, w, eps);
      std::copy(normed.begin(), normed.end(), v.begin() + h * head_dim);
    }
  };
  auto add = [](Vec& v, const Matrix& b) {
    for (size_t i = 0; i < v.size(); ++i) v[i] += b.w[i];
  };

  auto observe = [&](std::string_view name, int64_t layer_index, int64_t t, const Vec& v) {
    if (options.observer) options.observer(name, layer_index, t, v);
  };
  for (int64_t li = 0; li < layers; ++li) {
    const Layer& l = layer[li];
    const double rope_base = l.sliding ? 10000.0 : base;
    const double scale = l.sliding ? 1.0 : freq_scale;
    // Keys and values of every position, then causal attention.
    std::vector<Vec> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      const Vec xn = RmsNorm(x[t], l.attn_norm, eps);
      q[t] = MatVec(l.wq, xn, options);
      k[t] = MatVec(l.wk, xn, options);
      v[t] = MatVec(l.wv, xn, options);
      if (l.bias) add(q[t], l.bq), add(k[t], l.bk), add(v[t], l.bv);
      if (!l.q_norm.w.empty()) head_norm(q[t], l.q_norm), head_norm(k[t], l.k_norm);
      rope(q[t], heads, t, rope_base, scale);
      rope(k[t], kv_heads, t, rope_base, scale);
      observe("attn_norm", li, t, xn);
      observe("Qcur", li, t, q[t]);
      observe("Kcur", li, t, k[t]);
      observe("Vcur", li, t, v[t]);
    }
    for (int64_t t = 0; t < n; ++t) {
      Vec attn(heads * head_dim, 0.0);
      const int64_t first = l.sliding ? std::max<int64_t>(0, t + 1 - window) : 0;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kvh = h / group;
        std::vector<double> score(t + 1, 0.0);
        double max = -INFINITY;
        for (int64_t j = first; j <= t; ++j) {
          double s = 0;
          for (int64_t e = 0; e < head_dim; ++e) {
            s += q[t][h * head_dim + e] * k[j][kvh * head_dim + e];
          }
          score[j] = s / std::sqrt(static_cast<double>(head_dim));
          max = std::max(max, score[j]);
        }
        double sum = 0;
        for (int64_t j = first; j <= t; ++j) sum += (score[j] = std::exp(score[j] - max));
        for (int64_t j = first; j <= t; ++j) {
          for (int64_t e = 0; e < head_dim; ++e) {
            attn[h * head_dim + e] += score[j] / sum * v[j][kvh * head_dim + e];
          }
        }
      }
      observe("kqv_out", li, t, attn);
      Vec o = MatVec(l.wo, attn, options);
      observe("attn_out", li, t, o);
      if (gemma) {
        o = RmsNorm(o, l.post_attn_norm, eps);
        observe("attn_post_norm", li, t, o);
      }
      for (int64_t i = 0; i < d; ++i) x[t][i] += o[i];
      observe("ffn_inp", li, t, x[t]);
    }
    for (int64_t t = 0; t < n; ++t) {
      const Vec xn = RmsNorm(x[t], l.ffn_norm, eps);
      const Vec g = MatVec(l.gate, xn, options), u = MatVec(l.up, xn, options);
      Vec act(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        act[i] = (gemma ? Gelu(g[i]) : g[i] / (1.0 + std::exp(-g[i]))) * u[i];
      }
      Vec down = MatVec(l.down, act, options);
      observe("ffn_norm", li, t, xn);
      observe("ffn_gate", li, t, g);
      observe("ffn_up", li, t, u);
      observe("ffn_act", li, t, act);
      observe("ffn_out", li, t, down);
      if (gemma) {
        down = RmsNorm(down, l.post_ffn_norm, eps);
        observe("ffn_post_norm", li, t, down);
      }
      for (int64_t i = 0; i < d; ++i) x[t][i] += down[i];
      observe("l_out", li, t, x[t]);
    }
  }

  std::vector<std::vector<float>> logits(n);
  for (int64_t t = 0; t < n; ++t) {
    const Vec normed = RmsNorm(x[t], out_norm, eps);
    observe("result_norm", -1, t, normed);
    const Vec row = MatVec(head, normed, options);
    logits[t].assign(row.begin(), row.end());
  }
  return logits;
}

}  // namespace llm::model::testing
