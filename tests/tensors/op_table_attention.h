// The op table's attention cases (test_op_table.cpp): scaled dot-product attention in each of its
// layouts (heads first, stacked, packed from a fused projection, tokens first) against one float64
// reference. Harness in op_table.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tensors/op_table.h"

namespace optest {

inline OpCase attention_case(tp::Shape q, tp::Shape k, tp::Shape v, bool causal) {
  int64_t r = q.size();
  int64_t tq = q[r - 2], d = q[r - 1], tk = k[r - 2], dv = v[r - 1];
  int64_t batch = count(q) / (tq * d);
  tp::Shape out = q;
  out.back() = dv;
  OpCase c;
  c.name = std::string("attention ") + (causal ? "causal " : "") + tp::to_string(q) + " " +
           tp::to_string(k) + " " + tp::to_string(v);
  c.inputs = {{q}, {k}, {v}};
  c.run = [causal](const std::vector<tp::Tensor>& in) {
    return std::vector<tp::Tensor>{tp::scaled_dot_product_attention(in[0], in[1], in[2], causal)};
  };
  c.reference = [=](const std::vector<Values>& x) {
    Values o(batch * tq * dv, 0.0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < tq; ++i) {
        Values s(tk);
        double mx = -1e300;
        int64_t visible = causal ? std::min(i + 1, tk) : tk;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += x[0][(b * tq + i) * d + e] * x[1][(b * tk + j) * d + e];
          s[j] = dot / std::sqrt(double(d));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < visible; ++j) z += std::exp(s[j] - mx);
        // Masked positions weigh 0 and are still multiplied in, as in PyTorch's math backend:
        // a NaN in v reaches every row that multiplies it, masked or not.
        for (int64_t j = 0; j < tk; ++j) {
          double p = j < visible ? std::exp(s[j] - mx) / z : 0.0;
          for (int64_t e = 0; e < dv; ++e)
            o[(b * tq + i) * dv + e] += p * x[2][(b * tk + j) * dv + e];
        }
      }
    return std::vector<Values>{o};
  };
  c.out_shapes = {out};
  c.activations = 3;
  return c;
}

// q, k and v of one shape stacked along a leading dim of 3: the attention reference on the three
// parts, its gradient in one piece.
inline OpCase packed_attention_case(tp::Shape part, bool causal) {
  OpCase plain = attention_case(part, part, part, causal);
  const size_t n = count(part);
  tp::Shape packed = part;
  packed.insert(packed.begin(), 3);
  OpCase c;
  c.name = "packed " + plain.name;
  c.inputs = {{packed}};
  c.run = [causal](const std::vector<tp::Tensor>& in) {
    return std::vector<tp::Tensor>{tp::scaled_dot_product_attention_packed(in[0], causal)};
  };
  c.reference = [reference = plain.reference, n](const std::vector<Values>& x) {
    std::vector<Values> parts;
    for (size_t i = 0; i < 3; ++i)
      parts.emplace_back(x[0].begin() + i * n, x[0].begin() + (i + 1) * n);
    return reference(parts);
  };
  c.out_shapes = plain.out_shapes;
  c.activations = 1;
  return c;
}

// qkv [B, T, 3, H, D] straight from a fused projection: the attention reference on its permuted
// heads, output [B, T, H, D], its gradient in one piece.
inline OpCase qkvpacked_attention_case(int64_t b, int64_t t, int64_t h, int64_t d, bool causal) {
  const tp::Shape part = {b, h, t, d};
  OpCase plain = attention_case(part, part, part, causal);
  const size_t n = count(part);
  const tp::Shape packed = {b, t, 3, h, d};
  OpCase c;
  c.name = "qkvpacked " + plain.name;
  c.inputs = {{packed}};
  c.run = [causal](const std::vector<tp::Tensor>& in) {
    return std::vector<tp::Tensor>{tp::scaled_dot_product_attention_qkvpacked(in[0], causal)};
  };
  c.reference = [reference = plain.reference, n, packed, part](const std::vector<Values>& x) {
    const Values stacked = ref_permute(x[0], packed, {2, 0, 3, 1, 4});  // [3, B, H, T, D]
    std::vector<Values> parts;
    for (size_t i = 0; i < 3; ++i)
      parts.emplace_back(stacked.begin() + i * n, stacked.begin() + (i + 1) * n);
    return std::vector<Values>{ref_permute(reference(parts)[0], part, {0, 2, 1, 3})};
  };
  c.out_shapes = {{b, t, h, d}};
  c.activations = 1;
  return c;
}

// q [B, Tq, H, D], k [B, Tk, H, D], v [B, Tk, H, Dv] laid out tokens first: the attention
// reference on the permuted heads, output [B, Tq, H, Dv].
inline OpCase tokens_first_attention_case(int64_t b, int64_t t_q, int64_t t_k, int64_t h, int64_t d,
                                          int64_t d_v, bool causal) {
  OpCase plain = attention_case({b, h, t_q, d}, {b, h, t_k, d}, {b, h, t_k, d_v}, causal);
  const std::vector<tp::Shape> tokens = {{b, t_q, h, d}, {b, t_k, h, d}, {b, t_k, h, d_v}};
  OpCase c;
  c.name = "tokens-first " + plain.name;
  c.inputs = {{tokens[0]}, {tokens[1]}, {tokens[2]}};
  c.run = [causal](const std::vector<tp::Tensor>& in) {
    return std::vector<tp::Tensor>{
        tp::scaled_dot_product_attention_tokens_first(in[0], in[1], in[2], causal)};
  };
  c.reference = [reference = plain.reference, tokens, b, t_q, h,
                 d_v](const std::vector<Values>& x) {
    std::vector<Values> heads;
    for (size_t i = 0; i < 3; ++i) heads.push_back(ref_permute(x[i], tokens[i], {0, 2, 1, 3}));
    return std::vector<Values>{ref_permute(reference(heads)[0], {b, h, t_q, d_v}, {0, 2, 1, 3})};
  };
  c.out_shapes = {{b, t_q, h, d_v}};
  c.activations = 3;
  return c;
}

/// The attention rows of the table, in their order there.
inline std::vector<OpCase> attention_cases() {
  std::vector<OpCase> t;
  t.push_back(attention_case({2, 2, 5, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}, true));
  t.push_back(attention_case({1, 3, 4, 4}, {1, 3, 6, 4}, {1, 3, 6, 3}, false));
  t.push_back(attention_case({2, 4, 3}, {2, 4, 3}, {2, 4, 3}, true));
  t.push_back(attention_case({1, 1, 1, 2}, {1, 1, 3, 2}, {1, 1, 3, 2}, false));
  // Probabilities larger than q, k and v together: the backward recomputes them.
  t.push_back(attention_case({1, 2, 12, 2}, {1, 2, 12, 2}, {1, 2, 12, 2}, true));
  t.push_back(attention_case({2, 7, 2}, {2, 9, 2}, {2, 9, 1}, false));
  t.push_back(packed_attention_case({2, 2, 5, 4}, true));
  t.push_back(packed_attention_case({1, 3, 4, 2}, false));
  t.push_back(packed_attention_case({1, 2, 12, 2}, true));  // probabilities recomputed
  t.push_back(qkvpacked_attention_case(2, 5, 2, 4, true));
  t.push_back(qkvpacked_attention_case(1, 4, 3, 2, false));
  t.push_back(qkvpacked_attention_case(2, 12, 2, 2, true));  // probabilities recomputed
  t.push_back(tokens_first_attention_case(2, 5, 4, 2, 3, 2, false));
  t.push_back(tokens_first_attention_case(1, 6, 6, 3, 2, 3, true));
  return t;
}

}  // namespace optest
