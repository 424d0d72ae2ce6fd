#include "nn/embedding.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/embedding_bag.h"
#include "autograd/ops/index.h"
#include "core/creation.h"
#include "nn/init.h"

namespace sl::nn {

namespace detail {
std::optional<int64_t> checked_embedding_padding(const char* name, std::optional<int64_t> p,
                                                 int64_t n, int64_t d) {
  SL_CHECK(n > 0 && d > 0, name, ": num_embeddings and embedding_dim must be positive, got ", n,
           " and ", d);
  if (!p) return p;
  SL_CHECK(*p >= -n && *p < n, name, ": padding_idx ", *p, " must be within [", -n, ", ", n, ")");
  return *p < 0 ? *p + n : *p;
}

void check_pretrained(const char* name, const Tensor& weight) {
  SL_CHECK(weight.defined(), name, ".from_pretrained: the weight is undefined");
  SL_CHECK_SHAPE(weight.dim() == 2, name,
                 ".from_pretrained: embeddings parameter is expected to be 2-dimensional, got "
                 "shape ",
                 shape_str(weight.sizes()));
  SL_CHECK_DTYPE(is_floating(weight.dtype()), name,
                 ".from_pretrained: the weight must be floating, got ", dtype_name(weight.dtype()));
}

std::string embedding_repr_options(std::optional<int64_t> padding_idx,
                                   std::optional<double> max_norm, double norm_type,
                                   bool scale_grad_by_freq) {
  std::string s;
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  if (max_norm) s += ", max_norm=" + repr::py_float(*max_norm);
  if (norm_type != 2.0) s += ", norm_type=" + repr::py_float(norm_type);
  if (scale_grad_by_freq) s += ", scale_grad_by_freq=True";
  return s;
}
}  // namespace detail

namespace {
EmbeddingOptions checked_options(EmbeddingOptions o) {
  SL_CHECK(!o.sparse, "Embedding: sparse=true is not supported (there are no sparse tensors); ",
           "use sparse=false, a dense weight gradient");
  return o;
}
}  // namespace

Embedding::Embedding(int64_t n, int64_t d, EmbeddingOptions o, const Tensor& pretrained)
    : Module("Embedding"),
      num_embeddings(n),
      embedding_dim(d),
      padding_idx(detail::checked_embedding_padding("Embedding", o.padding_idx, n, d)),
      max_norm(checked_options(o).max_norm),
      norm_type(o.norm_type),
      scale_grad_by_freq(o.scale_grad_by_freq) {
  if (pretrained.defined()) {
    weight = register_parameter("weight", pretrained);
    return;
  }
  TensorOptions to = o.tensor_options;
  to.requires_grad = false;
  weight = register_parameter("weight", empty({n, d}, to));
  reset_parameters();
}

Embedding::Embedding(int64_t n, int64_t d, EmbeddingOptions options)
    : Embedding(n, d, options, Tensor()) {}

Embedding::Embedding(int64_t n, int64_t d, std::optional<int64_t> pad, TensorOptions opts)
    : Embedding(n, d, EmbeddingOptions{.padding_idx = pad, .tensor_options = opts}, Tensor()) {}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& weight, bool freeze,
                                                      EmbeddingOptions options) {
  detail::check_pretrained("Embedding", weight);
  Tensor w = weight.detach();  // shares weight's storage, as PyTorch's Parameter(_weight)
  auto m = std::shared_ptr<Embedding>(new Embedding(weight.size(0), weight.size(1), options, w));
  m->weight.requires_grad_(!freeze);
  return m;
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard ng;
    weight.detach().select(0, *padding_idx).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  SL_CHECK(indices.defined(), "Embedding: the input is undefined");
  SL_CHECK_DTYPE(indices.dtype() == DType::i64 || indices.dtype() == DType::i32,
                 "Embedding: indices must be int64 or int32, got ", dtype_name(indices.dtype()));
  if (max_norm) embedding_renorm_(weight, indices, *max_norm, norm_type);
  return embedding(weight, indices, padding_idx, scale_grad_by_freq);
}

std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) +
         detail::embedding_repr_options(padding_idx, max_norm, norm_type, scale_grad_by_freq);
}

}  // namespace sl::nn
