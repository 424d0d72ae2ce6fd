// FlatBuffers: parameters become views of the flat buffers without changing the handles model
// code holds; gradients accumulate into the flat gradient buffer.
#include "../support/testing.h"
#include "dist/flat_buffers.h"

using namespace sl;
using namespace sl::dist;

TEST_CASE("flat buffers: parameters become views, keeping values and identity") {
  Generator gen(7);
  auto l1 = std::make_shared<nn::Linear>(3, 4);
  auto l2 = std::make_shared<nn::Linear>(4, 1);
  nn::Sequential net({l1, l2});
  TensorList params = net.parameters();
  std::vector<Tensor> before;
  for (auto& p : params) before.push_back(p.detach().clone());
  Tensor w1 = l1->weight;  // a handle model code holds

  FlatBuffers fb(params, 3, 32);  // 3 ranks, 8-float buckets
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].is_same_storage(fb.param_buffer(0)));
    CHECK(params[i].requires_grad());
    CHECK(params[i].is_leaf());
    SL_CHECK_CLOSE(params[i], before[i], 0, 0);
  }
  CHECK(w1.is_same(l1->weight));
  CHECK(w1.is_same_storage(fb.param_buffer(0)));
  // 12 + 4 + 4 + 1 = 21 elements; buckets (reverse order, 32-byte cap): [b2 w2 b1]=9 -> 9,
  // [w1]=12 -> 12: padded 9 + 12 = 21
  CHECK(fb.layout().buckets().size() == 2);
  CHECK(fb.param_buffer(0).numel() == 21);
  CHECK(fb.param_bytes() == 21 * 4);

  // writing the flat buffer writes the parameters
  {
    NoGradGuard ng;
    Tensor buf = fb.param_buffer(0);
    buf.fill_(0.5);
  }
  CHECK(l1->weight.to_vector<float>() == std::vector<float>(12, 0.5f));

  // gradients accumulate into the flat gradient buffer
  fb.make_grad_buffers();
  Tensor x = randn({5, 3}, {}, &gen);
  net.forward(x).sum().backward();
  net.forward(x).sum().backward();
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].grad().is_same_storage(fb.grad_buffer(0)));
  }
  // reference: the same model outside flat buffers
  auto r1 = std::make_shared<nn::Linear>(3, 4);
  auto r2 = std::make_shared<nn::Linear>(4, 1);
  nn::Sequential ref({r1, r2});
  {
    NoGradGuard ng;
    for (auto& p : ref.parameters()) p.fill_(0.5);
  }
  ref.forward(x).sum().backward();
  ref.forward(x).sum().backward();
  for (size_t i = 0; i < params.size(); ++i) {
    SL_CHECK_CLOSE(params[i].grad(), ref.parameters()[i].grad(), 0, 0);
  }
  // zero_grads re-points a .grad that an optimizer's zero_grad(set_to_none) dropped
  net.zero_grad(true);
  CHECK(!l1->weight.grad().defined());
  fb.zero_grads();
  CHECK(l1->weight.grad().is_same_storage(fb.grad_buffer(0)));
  CHECK(fb.grad_buffer(0).abs().sum().item<float>() == 0.f);
}

TEST_CASE("flat buffers: views of buckets, slices, shards and pieces") {
  Tensor a = arange(5).to(DType::f32).requires_grad_();
  Tensor b = arange(3).to(DType::f32).add(10.0).detach().requires_grad_();
  FlatBuffers fb({a, b}, 2);
  // flat order b, a: [10 11 12 0 1 2 3 4], exactly 8 elements
  CHECK(fb.param_buffer(0).to_vector<float>() == std::vector<float>{10, 11, 12, 0, 1, 2, 3, 4});
  CHECK(fb.slice_view(fb.param_buffer(0), 0, 1).to_vector<float>() ==
        std::vector<float>{1, 2, 3, 4});
  auto shards = fb.make_shard_buffers(DType::f64);
  CHECK(shards[0].numel() == 4);
  CHECK(shards[0].dtype() == DType::f64);
  for (const Piece& pc : fb.layout().pieces_of_rank(0)) {
    Tensor src = fb.piece_in_flat(fb.param_buffer(0), pc);
    fb.piece_in_shard(shards[0], pc).copy_(src);
  }
  CHECK(shards[0].to_vector<double>() == std::vector<double>{10, 11, 12, 0});
}

TEST_CASE("flat buffers: errors") {
  Tensor a = zeros({2}).requires_grad_();
  SL_CHECK_THROWS(FlatBuffers({a, a}, 1), ValueError,
                  "FlatBuffers: parameter 1 is the same tensor as parameter 0");
  SL_CHECK_THROWS(FlatBuffers({a, Tensor()}, 1), ValueError,
                  "FlatBuffers: parameter 1 is undefined");
}
