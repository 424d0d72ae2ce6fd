// The sizes every CPU conv2d path starts from (internal header).
#pragma once

#include <cstdint>

#include "core/ops/conv.h"

namespace sl::cpu {

/// Batch, channels, spatial size and groups of one conv2d with input [N, C, H, W] and weight
/// [O, C / G, kh, kw]; Cg and Og are the input and output channels of one group. The im2col
/// loops (ConvDims, core/cpu/conv.cpp) and the Winograd ones (WinoDims,
/// core/cpu/conv_winograd.cpp) extend it with what each needs.
struct ConvShape {
  int64_t N, C, H, W, O, G, Cg, Og;
  ConvShape(const Tensor& input, const Tensor& weight, const Conv2dGeometry& g)
      : N(input.size(0)),
        C(input.size(1)),
        H(input.size(2)),
        W(input.size(3)),
        O(weight.size(0)),
        G(g.groups),
        Cg(C / G),
        Og(O / G) {}
};

}  // namespace sl::cpu
