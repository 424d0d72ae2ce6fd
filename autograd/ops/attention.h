// Differentiable scaled dot-product attention, as
// torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x semantics), built from the
// matmul family and the attention family's fused masked softmax (core/ops/attention.h).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "core/random.h"
#include "core/tensor.h"

namespace sl {

/// softmax(scale * scores + mask) over the last dim of scores [..., L, S], with the masks of
/// Note [Attention masks] (core/ops/attention.h): bool attn_mask keeps the true positions,
/// floating attn_mask is added, is_causal masks key j > query i. Differentiable w.r.t. scores.
/// Throws ShapeError (mask does not broadcast), DTypeError, DeviceError.
Tensor attention_softmax(const Tensor& scores, const Tensor& attn_mask = Tensor(),
                         bool is_causal = false, double scale = 1.0);

/// Which implementation scaled_dot_product_attention takes (as PyTorch's sdp_kernel flags).
enum class AttentionBackend : uint8_t {
  /// The fused path (Note [Fused attention], core/ops/attention.h) where it applies and pays: no
  /// dropout, q, k and v with the same batch dims, and more score elements than one block holds
  /// (ops::attention_block_elements()), so that it saves memory. Otherwise the unfused path, the
  /// faster one on every device so far (CUDA's one-pass kernel included: README, GPU check).
  automatic,
  /// The fused path wherever it applies; ValueError (naming the reason) where it does not.
  fused,
  /// Scores, the attention softmax and a second product, with the probabilities kept for the
  /// backward: the reference, and the only path with dropout or attention weights.
  unfused,
};
/// The backend in force (process-wide; automatic at start).
AttentionBackend attention_backend();
/// Sets the backend for every thread; returns the previous one.
AttentionBackend set_attention_backend(AttentionBackend backend);
/// Sets the backend until destruction, then restores the previous one (scopes nest).
class AttentionBackendScope {
 public:
  explicit AttentionBackendScope(AttentionBackend backend)
      : prev_(set_attention_backend(backend)) {}
  ~AttentionBackendScope() { set_attention_backend(prev_); }
  AttentionBackendScope(const AttentionBackendScope&) = delete;
  AttentionBackendScope& operator=(const AttentionBackendScope&) = delete;

 private:
  AttentionBackend prev_;
};

/// Attention of queries q [..., L, E] over keys k [..., S, E] and values v [..., S, Ev]
/// (batch dims broadcast, as torch.matmul):
///   softmax(q k^T * scale + mask) (dropout with dropout_p) @ v  ->  [..., L, Ev]
/// scale defaults to 1 / sqrt(E). attn_mask: bool (true = take part in attention) or
/// floating (added), broadcastable to [..., L, S]; is_causal: key j > query i is masked (with
/// attn_mask also given, both apply). dropout_p > 0 drops attention weights with the
/// generator `gen` (default generator when null); pass 0 in evaluation. Rows with every key
/// masked give NaN, as in PyTorch. Differentiable w.r.t. q, k, v (and a floating mask is
/// treated as a constant). The implementation follows attention_backend(); under autocast q, k
/// and v are lowered to the scope's dtype (AmpPolicy::lower) on either path. Throws ShapeError
/// (ranks, E or S mismatch, mask shape), ValueError (dropout_p outside [0, 1); the fused backend
/// forced where it does not apply), DTypeError, DeviceError. The fused path saves its output for
/// the backward on the CPU (as PyTorch's fused kernels do): changing the output in place before
/// the backward makes the backward throw AutogradError.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);

/// scaled_dot_product_attention that also returns the attention weights [..., L, S] (after
/// dropout, as nn.MultiheadAttention's need_weights reports them). Always the unfused path (the
/// fused one never forms the weights), whatever attention_backend() says.
std::pair<Tensor, Tensor> scaled_dot_product_attention_with_weights(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = Tensor(),
    double dropout_p = 0.0, bool is_causal = false, std::optional<double> scale = std::nullopt,
    Generator* gen = nullptr);

}  // namespace sl
