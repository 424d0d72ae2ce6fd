#include "nn/embedding_bag.h"

#include "autograd/grad_mode.h"
#include "core/creation.h"
#include "nn/embedding.h"
#include "nn/init.h"

namespace sl::nn {

namespace {
EmbeddingBagMode checked_mode(const EmbeddingBagModuleOptions& o) {
  SL_CHECK(!o.sparse, "EmbeddingBag: sparse=true is not supported (there are no sparse tensors); ",
           "use sparse=false, a dense weight gradient");
  EmbeddingBagMode m = embedding_bag_mode(o.mode, "EmbeddingBag");
  SL_CHECK(!(m == EmbeddingBagMode::max && o.scale_grad_by_freq),
           "EmbeddingBag: max mode does not support scaling the gradient by the frequency "
           "(scale_grad_by_freq)");
  return m;
}
}  // namespace

EmbeddingBag::EmbeddingBag(int64_t n, int64_t d, const EmbeddingBagModuleOptions& o,
                           const Tensor& pretrained)
    : Module("EmbeddingBag"),
      num_embeddings(n),
      embedding_dim(d),
      padding_idx(detail::checked_embedding_padding("EmbeddingBag", o.padding_idx, n, d)),
      max_norm(o.max_norm),
      norm_type(o.norm_type),
      scale_grad_by_freq(o.scale_grad_by_freq),
      mode(checked_mode(o)),
      include_last_offset(o.include_last_offset) {
  if (pretrained.defined()) {
    weight = register_parameter("weight", pretrained);
    return;
  }
  TensorOptions to = o.tensor_options;
  to.requires_grad = false;
  weight = register_parameter("weight", empty({n, d}, to));
  reset_parameters();
}

EmbeddingBag::EmbeddingBag(int64_t n, int64_t d, EmbeddingBagModuleOptions options)
    : EmbeddingBag(n, d, options, Tensor()) {}

std::shared_ptr<EmbeddingBag> EmbeddingBag::from_pretrained(const Tensor& weight, bool freeze,
                                                            EmbeddingBagModuleOptions options) {
  detail::check_pretrained("EmbeddingBag", weight);
  auto m = std::shared_ptr<EmbeddingBag>(
      new EmbeddingBag(weight.size(0), weight.size(1), options, weight.detach()));
  m->weight.requires_grad_(!freeze);
  return m;
}

void EmbeddingBag::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard ng;
    weight.detach().select(0, *padding_idx).zero_();
  }
}

Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets,
                             const Tensor& per_sample_weights) {
  SL_CHECK(input.defined(), "EmbeddingBag: the input is undefined");
  return embedding_bag(weight, input,
                       {.offsets = offsets,
                        .mode = mode,
                        .max_norm = max_norm,
                        .norm_type = norm_type,
                        .scale_grad_by_freq = scale_grad_by_freq,
                        .per_sample_weights = per_sample_weights,
                        .include_last_offset = include_last_offset,
                        .padding_idx = padding_idx});
}

Tensor EmbeddingBag::forward(const Tensor& input) {
  return forward(input, Tensor());
}

std::string EmbeddingBag::extra_repr() const {
  std::string s =
      std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) +
      detail::embedding_repr_options(std::nullopt, max_norm, norm_type, scale_grad_by_freq);
  s += std::string(", mode=") + embedding_bag_mode_name(mode);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

}  // namespace sl::nn
