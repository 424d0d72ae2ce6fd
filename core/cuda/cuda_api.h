// sl::cuda: device-level controls of the CUDA backend, as torch.cuda.* (no CUDA types here, so
// any program can include it; in a build without CUDA the queries answer "no GPU" and the
// actions that need a GPU throw DeviceError).
//
// Note [CUDA streams and synchronisation]
// Each GPU has one compute stream (the legacy default stream, core/cuda/runtime.h) on which every
// kernel, cuBLAS and cuDNN call and device-to-device copy of that device is queued, in program
// order. The host waits for the GPU only at these points: copies to or from host memory
// (Tensor::to, item(), to_vector(), copy_ between devices; not host-to-device copies from a
// pinned tensor, which are queued, Note [Pinned host memory] in core/allocator.h), integer division
// checks (they read a flag back), index checks in checked mode (they read the index's min and max
// back), nonzero / masked_select (they read the count back), gradient norms (they read the norm
// back), empty_cache (it waits for pending frees), profiler::stop() after a recording with timed
// kernel calls on the GPU (it waits for the compute stream to read its markers, Note [Device
// timer]), and an explicit sl::cuda::synchronize(). Errors from kernels are therefore reported at
// the next of these points, not at the op that caused them (profiler::stop() throws the
// CudaError, and its recording is lost); so is an out-of-range index met by a kernel in unchecked
// indexing mode (IndexError, Note [Unchecked indexing] in core/cuda/index_error.h; every point
// above but empty_cache and profiler::stop() reports it).
// Memory freed by a tensor is reused by later allocations on the same stream without waiting
// (Note [Caching allocator]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dispatch.h"

namespace sl::cuda {

/// Number of visible GPUs (0 without a GPU, a driver, or CUDA support in the build).
int device_count();
/// True when at least one GPU is usable.
bool is_available();
/// True when this build contains the CUDA backend (whether or not a GPU is present).
bool is_compiled();
/// Blocks until all queued work on cuda:`device` is done (device -1: every GPU, in order).
/// Throws CudaError (a DeviceError) for an error a kernel raised since the last
/// synchronisation, IndexError for an out-of-range index an index kernel met since the last
/// report (unchecked indexing, see set_checked_indexing; reported once, then cleared), and
/// DeviceError when the device does not exist.
void synchronize(int device = -1);
/// Name of the GPU ("NVIDIA H200"); throws DeviceError when it does not exist.
std::string device_name(int device = 0);
/// Compute capability as major * 10 + minor (90 for Hopper).
int compute_capability(int device = 0);

/// Allow TensorFloat-32 tensor cores in float32 matmuls (default false: full float32 precision,
/// as torch.backends.cuda.matmul.allow_tf32 = False).
void set_allow_tf32(bool allow);
bool allow_tf32();

/// cuDNN convolutions take deterministic algorithms only (default true: the same bits from run
/// to run, as torch.backends.cudnn.deterministic = True). false takes the first algorithm of
/// cuDNN's ranked heuristics whatever its determinism (PyTorch's default): weight gradients may
/// then differ in the last bits between runs.
void set_cudnn_deterministic(bool on);
bool cudnn_deterministic();

/// How cuDNN convolution algorithms are chosen, as torch.backends.cudnn.benchmark (default
/// false). false: cuDNN's heuristics rank the algorithms and the first usable one is taken (no
/// extra work, but cuDNN 9's legacy heuristics can rank a several times slower kernel first).
/// true: the first convolution of each new geometry (sizes, dtype, padding, stride, dilation,
/// groups and the switches above) runs every algorithm cuDNN offers on its own buffers and keeps
/// the fastest; later calls with that geometry reuse it. Costs milliseconds to seconds per new
/// geometry and a workspace of up to 1 GiB while timing; suits inputs of fixed sizes. Either way
/// each choice is made once per geometry and cached (Note [Convolution algorithm cache] in
/// core/cuda/conv_algo_cache.h); set_cudnn_deterministic still restricts the choice. Applies to
/// convolutions launched after the call, from any thread; throws nothing.
void set_cudnn_benchmark(bool on);
bool cudnn_benchmark();
/// The convolution algorithms chosen so far in this process, one line per geometry and pass, in
/// the order they were chosen (pass, sizes, dtype, switches, algorithm, math type, workspace and,
/// in benchmark mode, the measured time). Empty without a GPU or without cuDNN.
std::vector<std::string> cudnn_conv_choices();

/// Checked indexing of CUDA index tensors (process-wide; Note [Index checks] in
/// core/ops/index.h). On (the default): index_select, index_add, gather, scatter, scatter_add,
/// embedding, one_hot and the class-index losses check every index before their kernel runs, a
/// min and a max reduction read back to the host: two synchronisations per indexing op, and an
/// out-of-range index throws IndexError from the op itself. Off: no check and no
/// synchronisation before the kernel; the kernels guard each index instead: an out-of-range (or
/// negative) index is never used to read or write memory, the output element that needed it is
/// skipped (gather, index_select and embedding write 0 there; scatter, scatter_add, index_add
/// and one_hot leave it unchanged), and the first bad index since the last report is thrown as
/// IndexError, naming the op, the index and the valid range, at the next synchronisation point
/// of that GPU (synchronize, item(), any copy between host and device, Note [CUDA streams and
/// synchronisation]); the error is then cleared. An index that no output element uses (an op
/// with an empty output) is not reported. CPU index tensors are always checked: there the check
/// costs two passes over the index and no synchronisation. Dtype, shape and device checks are
/// the same in both modes.
void set_checked_indexing(bool on);
/// The current setting of set_checked_indexing (true by default).
bool checked_indexing();

/// cuDNN for pooling and batch norm, as torch.backends.cudnn.enabled (default true). When on,
/// the CUDA average pooling and batch norm calls whose semantics cuDNN shares with Shardlight's
/// own kernels go through cuDNN (results then differ from the own kernels' only by rounding; the
/// case table: Note [cuDNN routing] in core/cuda/cudnn_routing.h); when off, every pooling and
/// batch norm call runs on the own kernels. Max pooling and adaptive
/// pooling always use the own kernels. Convolution has no own CUDA kernel: it goes through cuDNN
/// either way. In a build without cuDNN the switch is recorded but changes nothing (own kernels
/// only). Applies to ops launched after the call, from any thread; throws nothing.
void set_cudnn_enabled(bool on);
bool cudnn_enabled();

/// Backend hooks (registered by core/cuda when compiled with CUDA).
SL_DECLARE_KERNEL(synchronize_kernel, void(int device));
SL_DECLARE_KERNEL(device_name_kernel, std::string(int device));
SL_DECLARE_KERNEL(compute_capability_kernel, int(int device));

}  // namespace sl::cuda
