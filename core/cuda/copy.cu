// CUDA kernels of the copy family: strided copy with dtype conversion, and fill.
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

template <class To, class From>
struct ConvertFn {
  __device__ To operator()(From v) const { return convert<To>(v); }
};

template <class U>
struct FillFn {
  U bits;
  __device__ U operator()() const { return bits; }
};

}  // namespace

void launch_convert(DType to, DType from, const StridedLayout<2>& L, cudaStream_t s) {
  visit_dev_dtype(to, [&](auto tt) {
    using To = typename decltype(tt)::type;
    visit_dev_dtype(from, [&](auto ft) {
      using From = typename decltype(ft)::type;
      launch_elementwise<To, From>(L, ConvertFn<To, From>{}, s);
    });
  });
}

void launch_fill(int elem_size, uint64_t bits, const StridedLayout<1>& L, cudaStream_t s) {
  switch (elem_size) {
    case 1:
      return launch_elementwise<uint8_t>(L, FillFn<uint8_t>{static_cast<uint8_t>(bits)}, s);
    case 2:
      return launch_elementwise<uint16_t>(L, FillFn<uint16_t>{static_cast<uint16_t>(bits)}, s);
    case 4:
      return launch_elementwise<uint32_t>(L, FillFn<uint32_t>{static_cast<uint32_t>(bits)}, s);
    case 8:
      return launch_elementwise<uint64_t>(L, FillFn<uint64_t>{bits}, s);
    default:
      ::sl::detail::throw_error<DTypeError>("fill: unsupported element size ", elem_size);
  }
}

}  // namespace sl::cuda
