// CPU kernels of the index family. Indices were checked by generic code (Note [Index checks]:
// on the CPU always, whatever sl::cuda::checked_indexing says), so the kernels do not guard them;
// `op` (the name a CUDA kernel records for a bad index) is unused here.
// Accumulating kernels give each output element to exactly one thread, which adds the
// contributions in index order: the same bits for any thread count. Integer sums wrap
// (Note [Integer wraparound]).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/loops.h"
#include "core/int_wrap.h"
#include "core/ops/copy.h"
#include "core/ops/index.h"

namespace sl::cpu {
namespace {

/// Grain (in lines) so that a task holds about kElementwiseGrain elements.
int64_t line_grain(int64_t line_len) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(line_len, 1));
}

void index_select_cpu(const Tensor& out, const Tensor& in, const Tensor& index,
                      const char* /*op*/) {
  const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2), k = index.size(0);
  const int64_t* idx = index.data_ptr<int64_t>();
  const size_t row_bytes = static_cast<size_t>(inner) * in.element_size();
  const char* src = static_cast<const char*>(in.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    parallel_for(0, outer * k, line_grain(inner), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t o = r / k, j = r % k;
        const char* from = src + static_cast<size_t>(o * n + idx[j]) * row_bytes;
        char* to = dst + static_cast<size_t>(r) * row_bytes;
        if (inner == 1) {
          *reinterpret_cast<T*>(to) = *reinterpret_cast<const T*>(from);
        } else {
          std::memcpy(to, from, row_bytes);
        }
      }
    });
  });
}

void index_add_cpu(const Tensor& out, const Tensor& index, const Tensor& src, Scalar alpha_s,
                   int64_t skip, const char* /*op*/) {
  const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2), k = index.size(0);
  const int64_t* idx = index.data_ptr<int64_t>();
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    using W = wrap_t<C>;
    if constexpr (std::is_same_v<T, bool>) {
      detail::throw_error<DTypeError>("index_add: not supported for bool tensors");
    } else {
      const W alpha = static_cast<W>(alpha_s.to<C>());
      T* y = out.data_ptr<T>();
      const T* s = src.data_ptr<T>();
      // Threads own ranges of (o, i); each adds its rows for every j in order.
      parallel_for(
          0, outer * inner, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(k, 1)),
          [&](int64_t b, int64_t e) {
            for (int64_t pos = b; pos < e;) {
              int64_t o = pos / inner, i0 = pos % inner;
              int64_t i1 = std::min(inner, i0 + (e - pos));
              for (int64_t j = 0; j < k; ++j) {
                if (idx[j] == skip) continue;
                T* yr = y + (o * n + idx[j]) * inner;
                const T* sr = s + (o * k + j) * inner;
                for (int64_t i = i0; i < i1; ++i) {
                  yr[i] = static_cast<T>(
                      static_cast<C>(W(static_cast<C>(yr[i])) + alpha * W(static_cast<C>(sr[i]))));
                }
              }
              pos += i1 - i0;
            }
          });
    }
  });
}

/// Offsets (in elements) of line `l` in each of N tensors, where the lines run along `dim` of
/// `sizes` and are numbered row-major over the other dims.
template <int N>
void line_offsets(int64_t l, const Shape& sizes, int64_t dim,
                  const std::array<const Shape*, N>& strides, int64_t* off) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (d == dim) continue;
    int64_t s = sizes[static_cast<size_t>(d)];
    int64_t c = l % s;
    l /= s;
    for (int k = 0; k < N; ++k) off[k] += c * (*strides[k])[static_cast<size_t>(d)];
  }
}

void gather_cpu(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index,
                const char* /*op*/) {
  const Shape& sizes = index.sizes();
  const int64_t len = sizes[static_cast<size_t>(dim)];
  const int64_t lines = len == 0 ? 0 : index.numel() / len;
  const Shape& ost = out.strides();  // == index's (both contiguous, same sizes)
  const Shape& ist = in.strides();
  const int64_t o_step = ost[static_cast<size_t>(dim)], i_step = ist[static_cast<size_t>(dim)];
  const int64_t* idx = index.data_ptr<int64_t>();
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data_ptr<T>();
    const T* x = in.data_ptr<T>();
    parallel_for(0, lines, line_grain(len), [&](int64_t b, int64_t e) {
      int64_t off[2];
      for (int64_t l = b; l < e; ++l) {
        line_offsets<2>(l, sizes, dim, {&ost, &ist}, off);
        for (int64_t j = 0; j < len; ++j) {
          int64_t p = off[0] + j * o_step;
          y[p] = x[off[1] + idx[p] * i_step];
        }
      }
    });
  });
}

void scatter_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                 bool accumulate, const char* /*op*/) {
  const Shape& sizes = index.sizes();
  const int64_t len = sizes[static_cast<size_t>(dim)];
  const int64_t lines = len == 0 ? 0 : index.numel() / len;
  const Shape& xst = index.strides();
  const Shape& sst = src.strides();
  const Shape& ost = out.strides();
  const int64_t x_step = xst[static_cast<size_t>(dim)], s_step = sst[static_cast<size_t>(dim)],
                o_step = ost[static_cast<size_t>(dim)];
  const int64_t* idx = index.data_ptr<int64_t>();
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    using W = wrap_t<C>;
    T* y = out.data_ptr<T>();
    const T* s = src.data_ptr<T>();
    // Lines differ in a coordinate other than dim, so they write disjoint output lines.
    parallel_for(0, lines, line_grain(len), [&](int64_t b, int64_t e) {
      int64_t off[3];
      for (int64_t l = b; l < e; ++l) {
        line_offsets<3>(l, sizes, dim, {&xst, &sst, &ost}, off);
        for (int64_t j = 0; j < len; ++j) {
          T v = s[off[1] + j * s_step];
          T& dst = y[off[2] + idx[off[0] + j * x_step] * o_step];
          if (!accumulate) {
            dst = v;
          } else if constexpr (std::is_same_v<T, bool>) {
            dst = dst || v;
          } else {
            dst = static_cast<T>(static_cast<C>(W(static_cast<C>(dst)) + W(static_cast<C>(v))));
          }
        }
      }
    });
  });
}

Tensor nonzero_flat_cpu(const Tensor& mask) {
  constexpr int64_t kBlock = 1 << 16;
  const int64_t n = mask.numel();
  const bool* m = mask.data_ptr<bool>();
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
  std::vector<int64_t> counts(static_cast<size_t>(nblocks) + 1, 0);
  parallel_for(0, nblocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      int64_t c = 0;
      for (int64_t i = blk * kBlock; i < std::min(n, (blk + 1) * kBlock); ++i) c += m[i];
      counts[static_cast<size_t>(blk) + 1] = c;
    }
  });
  for (size_t i = 1; i < counts.size(); ++i) counts[i] += counts[i - 1];
  Tensor out = ops::empty({counts.back()}, DType::i64, mask.device());
  int64_t* p = out.data_ptr<int64_t>();
  parallel_for(0, nblocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      int64_t w = counts[static_cast<size_t>(blk)];
      for (int64_t i = blk * kBlock; i < std::min(n, (blk + 1) * kBlock); ++i) {
        if (m[i]) p[w++] = i;
      }
    }
  });
  return out;
}

SL_REGISTER_KERNEL(index_select_kernel, DeviceKind::cpu, &index_select_cpu);
SL_REGISTER_KERNEL(index_add_kernel, DeviceKind::cpu, &index_add_cpu);
SL_REGISTER_KERNEL(gather_kernel, DeviceKind::cpu, &gather_cpu);
SL_REGISTER_KERNEL(scatter_kernel, DeviceKind::cpu, &scatter_cpu);
SL_REGISTER_KERNEL(nonzero_flat_kernel, DeviceKind::cpu, &nonzero_flat_cpu);

}  // namespace
}  // namespace sl::cpu
