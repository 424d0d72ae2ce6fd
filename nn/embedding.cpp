#include "nn/embedding.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/index.h"
#include "core/creation.h"
#include "nn/init.h"

namespace sl::nn {

namespace {
std::optional<int64_t> checked_padding(std::optional<int64_t> p, int64_t n, int64_t d) {
  SL_CHECK(n > 0 && d > 0, "Embedding: num_embeddings and embedding_dim must be positive, got ", n,
           " and ", d);
  if (!p) return p;
  SL_CHECK(*p >= -n && *p < n, "Embedding: padding_idx ", *p, " must be within [", -n, ", ", n,
           ")");
  return *p < 0 ? *p + n : *p;
}
}  // namespace

Embedding::Embedding(int64_t n, int64_t d, std::optional<int64_t> pad, TensorOptions opts)
    : Module("Embedding"),
      num_embeddings(n),
      embedding_dim(d),
      padding_idx(checked_padding(pad, n, d)) {
  opts.requires_grad = false;
  weight = register_parameter("weight", empty({n, d}, opts));
  reset_parameters();
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
  return embedding(weight, indices, padding_idx);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

}  // namespace sl::nn
