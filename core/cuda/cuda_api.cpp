#include "core/cuda/cuda_api.h"

#include <atomic>

#include "core/cuda/conv_algo_cache.h"
#include "core/device.h"
#include "sl_config.h"

namespace sl::cuda {

SL_DEFINE_KERNEL(synchronize_kernel, void(int device));
SL_DEFINE_KERNEL(device_name_kernel, std::string(int device));
SL_DEFINE_KERNEL(compute_capability_kernel, int(int device));

namespace {
std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_cudnn_deterministic{true};
std::atomic<bool> g_cudnn_benchmark{false};
std::atomic<bool> g_checked_indexing{true};
std::atomic<bool> g_cudnn_enabled{true};

void check_device(const char* op, int device) {
  int n = device_count();
  SL_CHECK_DEVICE(device >= 0 && device < n, op, ": cuda:", device, " is not available (", n,
                  " GPU(s) visible", is_compiled() ? "" : "; built without CUDA", ")");
}
}  // namespace

int device_count() {
  return cuda_device_count();
}
bool is_available() {
  return device_count() > 0;
}
bool is_compiled() {
  return SL_HAVE_CUDA != 0;
}

void synchronize(int device) {
  if (device == -1) {
    for (int d = 0; d < device_count(); ++d) synchronize_kernel(DeviceKind::cuda, d);
    return;
  }
  check_device("synchronize", device);
  synchronize_kernel(DeviceKind::cuda, device);
}

std::string device_name(int device) {
  check_device("device_name", device);
  return device_name_kernel(DeviceKind::cuda, device);
}

int compute_capability(int device) {
  check_device("compute_capability", device);
  return compute_capability_kernel(DeviceKind::cuda, device);
}

void set_allow_tf32(bool allow) {
  g_allow_tf32.store(allow);
}
bool allow_tf32() {
  return g_allow_tf32.load();
}
void set_cudnn_deterministic(bool on) {
  g_cudnn_deterministic.store(on);
}
bool cudnn_deterministic() {
  return g_cudnn_deterministic.load();
}
void set_cudnn_benchmark(bool on) {
  g_cudnn_benchmark.store(on);
}
bool cudnn_benchmark() {
  return g_cudnn_benchmark.load();
}
std::vector<std::string> cudnn_conv_choices() {
  return conv_algo_cache().descriptions();
}
void set_checked_indexing(bool on) {
  g_checked_indexing.store(on);
}
bool checked_indexing() {
  return g_checked_indexing.load();
}
void set_cudnn_enabled(bool on) {
  g_cudnn_enabled.store(on);
}
bool cudnn_enabled() {
  return g_cudnn_enabled.load();
}

}  // namespace sl::cuda
