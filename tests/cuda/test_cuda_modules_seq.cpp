// Module-level parity on CUDA with the CPU (module_parity.h): attention, transformer layers and
// stacks, and recurrent layers.
//
// Covered module classes (a new one of these families needs a case here):
//   MultiheadAttention, TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
//   TransformerDecoder, Transformer, GRU, LSTM.
//
// Tolerances: module_tol in module_parity.h.
#include "module_parity.h"

using namespace sl;
using namespace sl::testing::modules;

TEST_CASE("cuda module parity: MultiheadAttention with masks, weights, batch_first" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("MultiheadAttention module parity");
  manual_seed(48);
  using nn::MultiheadAttention;
  const int64_t E = 8, H = 2, B = 3, L = 5, S = 6;
  // key padding: batch 1 drops its last two keys, batch 2 its last one; never key 0, so no
  // query row is fully masked (that row would be NaN on both devices)
  Tensor kpm = zeros({B, L}, {.dtype = DType::b8});
  kpm.select(0, 1).narrow(0, 3, 2).fill_(true);
  kpm.select(0, 2).narrow(0, 4, 1).fill_(true);
  Tensor causal = nn::causal_mask(L, L);
  for (DType dt : kDtypes) {
    // self-attention [L, B, E] (one in-projection), bool key padding + causal attn_mask,
    // per-head weights
    check_module<MultiheadAttention>(
        [&] { return std::make_shared<MultiheadAttention>(E, H); },
        [](MultiheadAttention& m, const TensorList& t) {
          auto [y, w] = m.forward(
              t[0], t[0], t[0],
              {.key_padding_mask = t[1], .attn_mask = t[2], .average_attn_weights = false});
          return TensorList{y, w};
        },
        {rnd({L, B, E}, dt), kpm, causal}, dt);
    // batch_first cross-attention (separate projections), floating key padding and [L, S]
    // masks, no weights (the fused path where the device has it), no bias
    Tensor fkpm = randn({B, S}, {.dtype = dt});
    Tensor fmask = randn({L, S}, {.dtype = dt});
    check_module<MultiheadAttention>(
        [&] { return std::make_shared<MultiheadAttention>(E, H, 0.0, false, true); },
        [](MultiheadAttention& m, const TensorList& t) {
          auto [y, w] =
              m.forward(t[0], t[1], t[2],
                        {.key_padding_mask = t[3], .need_weights = false, .attn_mask = t[4]});
          return TensorList{y, w};
        },
        {rnd({B, L, E}, dt), rnd({B, S, E}, dt), rnd({B, S, E}, dt), fkpm, fmask}, dt);
    // is_causal with averaged weights; and a [B * H, L, S] bool mask with need_weights false
    Tensor mask3 = rand({B * H, L, L}).gt(0.6);
    for (int64_t i = 0; i < L; ++i) mask3.select(1, i).select(1, i).fill_(false);  // diagonal
    check_module<MultiheadAttention>(
        [&] { return std::make_shared<MultiheadAttention>(E, H, 0.0, true, true); },
        [](MultiheadAttention& m, const TensorList& t) {
          auto [y, w] = m.forward(t[0], t[0], t[0], {.is_causal = true});
          auto [y2, w2] = m.forward(t[0], t[0], t[0], {.need_weights = false, .attn_mask = t[1]});
          return TensorList{y, w, y2, w2};
        },
        {rnd({B, L, E}, dt), mask3}, dt);
    // unbatched [L, E], and attention dropout in training (the unfused path, default
    // generator reseeded before each side) and in eval
    for (bool train : {true, false}) {
      check_module<MultiheadAttention>(
          [&] { return std::make_shared<MultiheadAttention>(E, H, 0.25); },
          [](MultiheadAttention& m, const TensorList& t) {
            auto [y, w] = m.forward(t[0], t[0], t[0]);
            return TensorList{y, w};
          },
          {rnd({L, E}, dt)}, dt, train);
    }
  }
}

TEST_CASE("cuda module parity: TransformerEncoderLayer with src mask and key padding mask" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("TransformerEncoderLayer module parity");
  manual_seed(49);
  using nn::TransformerEncoderLayer;
  const int64_t E = 8, H = 2, B = 3, L = 5;
  Tensor kpm = zeros({B, L}, {.dtype = DType::b8});
  kpm.select(0, 0).narrow(0, 3, 2).fill_(true);
  Tensor causal = nn::causal_mask(L, L);
  for (DType dt : kDtypes) {
    for (bool batch_first : {false, true}) {
      for (bool norm_first : {false, true}) {
        CAPTURE(batch_first);
        CAPTURE(norm_first);
        const std::string act = norm_first ? "gelu" : "relu";
        check_module<TransformerEncoderLayer>(
            [&] {
              return std::make_shared<TransformerEncoderLayer>(
                  E, H,
                  nn::TransformerEncoderLayerOptions{.dim_feedforward = 16,
                                                     .dropout = 0.0,
                                                     .activation = act,
                                                     .batch_first = batch_first,
                                                     .norm_first = norm_first});
            },
            [](TransformerEncoderLayer& m, const TensorList& t) {
              return TensorList{m.forward(t[0], t[1], t[2]),
                                m.forward(t[0], Tensor(), Tensor(), true)};
            },
            {rnd(batch_first ? Shape{B, L, E} : Shape{L, B, E}, dt), causal, kpm}, dt);
      }
    }
  }
}

TEST_CASE("cuda module parity: TransformerDecoderLayer with all four masks, and tgt_is_causal" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("TransformerDecoderLayer module parity");
  manual_seed(53);
  using nn::TransformerDecoderLayer;
  const int64_t E = 8, H = 2, B = 3, T = 4, S = 5;
  Tensor tgt_kpm = zeros({B, T}, {.dtype = DType::b8});
  tgt_kpm.select(0, 0).narrow(0, 3, 1).fill_(true);
  Tensor mem_kpm = zeros({B, S}, {.dtype = DType::b8});
  mem_kpm.select(0, 2).narrow(0, 3, 2).fill_(true);
  Tensor mem_mask = zeros({T, S}, {.dtype = DType::b8});
  mem_mask.select(0, 1).narrow(0, 0, 2).fill_(true);
  Tensor causal = nn::Transformer::generate_square_subsequent_mask(T);  // float, -inf above
  for (DType dt : kDtypes) {
    for (bool batch_first : {false, true}) {
      for (bool norm_first : {false, true}) {
        CAPTURE(batch_first);
        CAPTURE(norm_first);
        const std::string act = norm_first ? "gelu" : "relu";
        check_module<TransformerDecoderLayer>(
            [&] {
              return std::make_shared<TransformerDecoderLayer>(
                  E, H,
                  nn::TransformerDecoderLayerOptions{.dim_feedforward = 16,
                                                     .dropout = 0.0,
                                                     .activation = act,
                                                     .batch_first = batch_first,
                                                     .norm_first = norm_first});
            },
            [](TransformerDecoderLayer& m, const TensorList& t) {
              return TensorList{m.forward(t[0], t[1], t[2], t[3], t[4], t[5]),
                                m.forward(t[0], t[1], Tensor(), Tensor(), Tensor(), t[5], true)};
            },
            {rnd(batch_first ? Shape{B, T, E} : Shape{T, B, E}, dt),
             rnd(batch_first ? Shape{B, S, E} : Shape{S, B, E}, dt), causal, mem_mask, tgt_kpm,
             mem_kpm},
            dt);
      }
    }
  }
}

TEST_CASE("cuda module parity: Transformer (2 + 2 layers, final norms) with masks" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("Transformer module parity");
  manual_seed(54);
  using nn::Transformer;
  const int64_t E = 8, H = 2, B = 2, T = 4, S = 5;
  Tensor src_kpm = zeros({B, S}, {.dtype = DType::b8});
  src_kpm.select(0, 1).narrow(0, 2, 3).fill_(true);
  Tensor tgt_kpm = zeros({B, T}, {.dtype = DType::b8});
  tgt_kpm.select(0, 0).narrow(0, 3, 1).fill_(true);
  Tensor causal = Transformer::generate_square_subsequent_mask(T);
  for (DType dt : kDtypes) {
    for (bool batch_first : {false, true}) {
      CAPTURE(batch_first);
      check_module<Transformer>(
          [&] {
            return std::make_shared<Transformer>(
                E, H, 2, 2,
                nn::TransformerLayerOptions{
                    .dim_feedforward = 16, .dropout = 0.0, .batch_first = batch_first});
          },
          [](Transformer& m, const TensorList& t) {
            return TensorList{m.forward(t[0], t[1], Tensor(), t[2], Tensor(), t[3], t[4], t[3])};
          },
          {rnd(batch_first ? Shape{B, S, E} : Shape{S, B, E}, dt),
           rnd(batch_first ? Shape{B, T, E} : Shape{T, B, E}, dt), causal, src_kpm, tgt_kpm},
          dt);
    }
  }
}

TEST_CASE("cuda module parity: GRU and LSTM modules, batch_first, bidirectional, lengths" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("GRU / LSTM module parity");
  manual_seed(50);
  const int64_t T = 6, B = 3, I = 5, H = 4;
  Tensor lengths = from_vector<int64_t>({6, 2, 4});
  for (DType dt : kDtypes) {
    for (bool batch_first : {false, true}) {
      for (bool bidirectional : {false, true}) {
        CAPTURE(batch_first);
        CAPTURE(bidirectional);
        const nn::RNNOptions o{
            .num_layers = 2, .batch_first = batch_first, .bidirectional = bidirectional};
        const int64_t D = bidirectional ? 2 : 1;
        const Shape xs = batch_first ? Shape{B, T, I} : Shape{T, B, I};
        // with lengths and initial states (their gradients too)
        check_module<nn::LSTM>(
            [&] { return std::make_shared<nn::LSTM>(I, H, o); },
            [](nn::LSTM& m, const TensorList& t) {
              auto [y, h, c] = m.forward(t[0], t[1], t[2], t[3]);
              return TensorList{y, h, c};
            },
            {rnd(xs, dt), rnd({2 * D, B, H}, dt), rnd({2 * D, B, H}, dt), lengths}, dt);
        check_module<nn::GRU>([&] { return std::make_shared<nn::GRU>(I, H, o); },
                              [](nn::GRU& m, const TensorList& t) {
                                auto [y, h] = m.forward(t[0], t[1], t[2]);
                                return TensorList{y, h};
                              },
                              {rnd(xs, dt), rnd({2 * D, B, H}, dt), lengths}, dt);
      }
    }
    // one layer, no bias, no lengths, zero initial states (the one-tensor forward)
    check_unary<nn::GRU>(
        [&] { return std::make_shared<nn::GRU>(I, H, nn::RNNOptions{.bias = false}); },
        rnd({T, B, I}, dt), dt);
    check_unary<nn::LSTM>([&] { return std::make_shared<nn::LSTM>(I, H); }, rnd({T, I}, dt),
                          dt);  // unbatched
    // inter-layer dropout in training (default generator reseeded before each side)
    check_module<nn::LSTM>(
        [&] {
          return std::make_shared<nn::LSTM>(I, H, nn::RNNOptions{.num_layers = 2, .dropout = 0.3});
        },
        [](nn::LSTM& m, const TensorList& t) {
          auto [y, h, c] = m.forward(t[0], Tensor(), Tensor(), t[1]);
          return TensorList{y, h, c};
        },
        {rnd({T, B, I}, dt), lengths}, dt);
  }
}
