// The transformer family of torch.nn (PyTorch 1.13), with PyTorch's submodule names so a state
// dict written by torch loads 1:1:
// - TransformerEncoderLayer: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
//   dropout2;
// - TransformerDecoderLayer: self_attn, multihead_attn, linear1, dropout, linear2, norm1 to
//   norm3, dropout1 to dropout3;
// - TransformerEncoder and TransformerDecoder: layers.0 to layers.{N-1}, norm (when given);
// - Transformer: encoder (with its LayerNorm "encoder.norm"), decoder ("decoder.norm").
// Each layer is a residual block per sublayer, with LayerNorm after it (post-LN, as BERT and the
// original paper) or before it (pre-LN, norm_first).
#pragma once

#include <memory>
#include <string>

#include "core/ops/matmul.h"
#include "nn/attention.h"
#include "nn/containers.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace sl::nn {

/// The options the encoder and decoder layers share (PyTorch's constructor arguments after
/// d_model and nhead). nn::Transformer passes them to every layer it builds.
struct TransformerLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  /// "relu" or "gelu" (exact); "gelu_tanh" for the tanh approximation.
  std::string activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  /// Pre-LN: x + sa(norm1(x)), x + ff(norm2(x)); otherwise post-LN: norm1(x + sa(x)), ...
  bool norm_first = false;
  TensorOptions tensor_options = {};
};
using TransformerEncoderLayerOptions = TransformerLayerOptions;
using TransformerDecoderLayerOptions = TransformerLayerOptions;

/// Self-attention, then a feed-forward block (torch.nn.TransformerEncoderLayer).
/// Throws ValueError for an unknown activation or dim_feedforward <= 0 (and as
/// MultiheadAttention for d_model / nhead).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions opts = {});
  /// src [B, L, E] (batch_first) or [L, B, E], or unbatched [L, E]; out like src. Masks as
  /// MultiheadAttention's attn_mask and key_padding_mask; is_causal adds a causal mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask,
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  /// A deep copy (PyTorch's copy.deepcopy, as TransformerEncoder clones its layer): a new layer
  /// of the same configuration, on the device and dtype of this one's parameters, with equal
  /// parameter and buffer values, the same requires_grad flags and training modes, and memory
  /// of its own. Gradients are not copied. See Note [Cloning transformer layers].
  virtual std::shared_ptr<TransformerEncoderLayer> clone() const;

  const TransformerEncoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;

 private:
  Tensor sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm, bool is_causal);
  Tensor ff_block(const Tensor& x);
};

/// Self-attention over tgt, cross-attention from tgt to `memory` (the encoder's output), then a
/// feed-forward block (torch.nn.TransformerDecoderLayer). Throws as TransformerEncoderLayer.
class TransformerDecoderLayer : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerDecoderLayerOptions opts = {});
  /// tgt [B, T, E] (batch_first) or [T, B, E], or unbatched [T, E]; memory [B, S, E] / [S, B, E]
  /// / [S, E], the same rank and batch size as tgt. Out like tgt. tgt_mask [T, T] or
  /// [B * nhead, T, T] and tgt_key_padding_mask [B, T] go to self_attn; memory_mask [T, S] or
  /// [B * nhead, T, S] and memory_key_padding_mask [B, S] to multihead_attn (bool: true = hidden;
  /// floating: added). tgt_is_causal adds a causal mask to the self-attention.
  /// Throws ShapeError naming TransformerDecoderLayer when tgt or memory is not d_model wide, or
  /// their ranks or batch sizes differ; as MultiheadAttention for masks that do not fit.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool tgt_is_causal = false);
  /// As TransformerEncoderLayer::clone.
  virtual std::shared_ptr<TransformerDecoderLayer> clone() const;

  const TransformerDecoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;

 private:
  Tensor sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm, bool is_causal);
  Tensor mha_block(const Tensor& x, const Tensor& mem, const Tensor& mask, const Tensor& kpm);
  Tensor ff_block(const Tensor& x);
};

// Note [Cloning transformer layers]
// PyTorch's TransformerEncoder/Decoder deep-copy the layer they are given num_layers times
// (_get_clones: copy.deepcopy). nn::Module has no generic deep copy: its copy constructor is
// deleted, and a virtual clone on Module would have to be written (and kept right) in every layer
// of the library. The two layers are instead fully described by (d_model, nhead, options) plus
// their state, so each has a clone() that builds a fresh layer from that configuration and copies
// the state into it. clone() is virtual: a subclass with more state overrides it, and the stacks
// then copy the subclass. Cloning takes a const reference and never shares memory, so the
// prototype stays the caller's and every copy trains on its own.

/// num_layers deep copies of `encoder_layer` (layers.0, layers.1, ...; the prototype itself is
/// not kept), run in turn, then `norm` when given (registered as is, not copied, as PyTorch).
/// Throws ValueError for num_layers < 0.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                     std::shared_ptr<Module> norm = nullptr);
  /// src and masks as TransformerEncoderLayer::forward; every layer gets the same masks.
  Tensor forward(const Tensor& src, const Tensor& mask,
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  /// Layer i; throws IndexError out of range.
  std::shared_ptr<TransformerEncoderLayer> layer(size_t i) const;

  const int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<Module> norm;  ///< null when none was given
};

/// num_layers deep copies of `decoder_layer`, run in turn on (output, memory), then `norm` when
/// given. Throws ValueError for num_layers < 0.
class TransformerDecoder : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  TransformerDecoder(const TransformerDecoderLayer& decoder_layer, int64_t num_layers,
                     std::shared_ptr<Module> norm = nullptr);
  /// As TransformerDecoderLayer::forward; every layer gets the same memory and masks.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool tgt_is_causal = false);
  /// Layer i; throws IndexError out of range.
  std::shared_ptr<TransformerDecoderLayer> layer(size_t i) const;

  const int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<Module> norm;  ///< null when none was given
};

/// The encoder-decoder model of "Attention Is All You Need" (torch.nn.Transformer): an encoder
/// of num_encoder_layers layers and a decoder of num_decoder_layers layers, each stack ending in
/// a LayerNorm(d_model, layer_norm_eps); every layer gets `opts`. After construction every
/// parameter with more than one dimension is redrawn with xavier_uniform_ (PyTorch's
/// _reset_parameters), so the layers of a stack start different. Throws as the layers, and
/// ValueError for a negative layer count.
class Transformer : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  Transformer(int64_t d_model = 512, int64_t nhead = 8, int64_t num_encoder_layers = 6,
              int64_t num_decoder_layers = 6, TransformerLayerOptions opts = {});
  /// src [B, S, E] (batch_first) or [S, B, E], or unbatched [S, E]; tgt [B, T, E] / [T, B, E] /
  /// [T, E]; out like tgt. src_mask [S, S], tgt_mask [T, T], memory_mask [T, S] (or per batch
  /// and head, [B * nhead, ., .]); key padding masks [B, S], [B, T], [B, S]. Throws ShapeError
  /// naming Transformer when src and tgt differ in rank or batch size or are not d_model wide
  /// (PyTorch's RuntimeErrors), and as the layers for masks.
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = Tensor(),
                 const Tensor& tgt_mask = Tensor(), const Tensor& memory_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor());
  /// A float [sz, sz] mask, -inf above the diagonal and 0 elsewhere (the additive form of
  /// causal_mask), in the default float dtype. Throws ValueError for sz < 0.
  static Tensor generate_square_subsequent_mask(int64_t sz, Device device = kCPU);

  const int64_t d_model, nhead;
  const bool batch_first;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

}  // namespace sl::nn
