// sl::nn::functional: the torch.nn.functional spellings, so model code translates line by line
// (`namespace F = sl::nn::functional; F::relu(F::conv2d(x, w, b, 1, 1))`). The differentiable
// ops themselves live in autograd/ops/*.h (each with its contract there); this header gathers
// them, and adds the losses (nn/loss*.h), the distances (nn/distance.h) and the few
// compositions that are not single ops.
#pragma once

#include "autograd/ops/attention.h"
#include "autograd/ops/conv.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/embedding_bag.h"
#include "autograd/ops/index.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/norm.h"
#include "autograd/ops/pool.h"
#include "autograd/ops/softmax.h"
#include "autograd/ops/upsample.h"
#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/distance.h"
#include "nn/dropout.h"
#include "nn/loss.h"
#include "nn/loss_likelihood.h"
#include "nn/loss_margin.h"

namespace sl::nn::functional {

using sl::adaptive_avg_pool1d;
using sl::adaptive_avg_pool2d;
using sl::adaptive_max_pool1d;
using sl::adaptive_max_pool1d_with_indices;
using sl::adaptive_max_pool2d;
using sl::adaptive_max_pool2d_with_indices;
using sl::avg_pool1d;
using sl::avg_pool2d;
using sl::batch_norm;
using sl::conv1d;
using sl::conv2d;
using sl::dropout;
// F.embedding takes (weight, indices, padding_idx, scale_grad_by_freq) here, weight first; for
// F.embedding's max_norm call F::embedding_renorm_(weight, indices, max_norm, norm_type) first,
// as PyTorch's F.embedding does.
using sl::embedding;
// F.embedding_bag(weight, input, {.offsets = ..., .mode = EmbeddingBagMode::sum, ...}).
using sl::embedding_bag;
using sl::embedding_renorm_;
using sl::EmbeddingBagMode;
using sl::EmbeddingBagOptions;
using sl::gelu;
using sl::group_norm;
using sl::hardtanh;
using sl::instance_norm;
using sl::interpolate;
using sl::InterpolateOptions;
using sl::layer_norm;
using sl::leaky_relu;
using sl::linear;
using sl::log_softmax;
using sl::max_pool1d;
using sl::max_pool1d_with_indices;
using sl::max_pool2d;
using sl::max_pool2d_with_indices;
using sl::one_hot;
using sl::relu;
// F.scaled_dot_product_attention (PyTorch 2.x: q, k, v, attn_mask, dropout_p, is_causal, scale)
// and the variant that also returns the attention weights; contracts in autograd/ops/attention.h.
using sl::scaled_dot_product_attention;
using sl::scaled_dot_product_attention_with_weights;
using sl::sigmoid;
using sl::silu;
using sl::softmax;
using sl::tanh;

/// F.normalize: x / max(||x||_p over dim, eps).
inline Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12) {
  return x / x.norm(p, {dim}, true).clamp(eps);
}

}  // namespace sl::nn::functional
