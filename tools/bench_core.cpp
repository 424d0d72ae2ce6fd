// bench_core: Shardlight's core CPU speed beside the references it should approach, in one run.
//
//   build/tools/bench_core [--threads N] [--quick]
//   valgrind --tool=callgrind build/tools/bench_core --chain 200000   (instruction counts)
//
// - matmul f32 (sl::matmul, output allocated per call) vs cblas_sgemm called directly into a
//   preallocated output;
// - add / mul / gelu on 16M floats vs memcpy of the same bytes: the kernel writing a preallocated
//   output (what the kernel costs) and the public op (a new output per call, as users call it);
// - sum of 16M floats;
// - autograd: the extra cost of recording one op on tiny tensors, and of its backward; and the
//   profiler's cost per op while it records (core/profiler.h).
//
// Each reference and candidate are timed in alternation (so machine load hits both alike) and
// the median is reported. --quick shrinks every size so the program runs in about a second (the
// test suite uses it to keep this tool building and running; its numbers mean nothing).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

#include "core/ops/elementwise.h"  // kernel slots: time the kernel without the allocation
#include "sl_config.h"

#if SL_HAVE_CBLAS
#include <cblas.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

double now_s() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Times each function `reps` times in alternation after one warm-up call each; returns the
/// median seconds per call of each.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& fns, int reps) {
  for (const auto& f : fns) f();
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) {
      double t0 = now_s();
      fns[i]();
      t[i].push_back(now_s() - t0);
    }
  }
  std::vector<double> out;
  for (auto& v : t) out.push_back(median(v));
  return out;
}

void rule() {
  std::printf("%s\n", std::string(86, '-').c_str());
}

// ---- matmul ---------------------------------------------------------------------------------
void bench_matmul(bool quick) {
  struct Shape3 {
    int64_t m, k, n;
  };
  std::vector<Shape3> shapes = {{2048, 2048, 2048}, {2048, 768, 3072}, {8192, 256, 256}};
  if (quick) shapes = {{64, 48, 32}};
  std::printf("%-28s %14s %16s %8s\n", "matmul f32 [M,K]@[K,N]", "sl::matmul", "cblas_sgemm",
              "ratio");
  std::printf("%-28s %14s %16s %8s\n", "", "GFLOP/s", "GFLOP/s", "");
  rule();
  for (const auto& s : shapes) {
    sl::NoGradGuard no_grad;
    sl::Tensor a = sl::randn({s.m, s.k}), b = sl::randn({s.k, s.n});
    const double flops = 2.0 * static_cast<double>(s.m * s.k) * static_cast<double>(s.n);
    const int reps = quick ? 3 : std::max(5, static_cast<int>(2e11 / flops));
    std::vector<std::function<void()>> fns = {[&] { (void)sl::matmul(a, b); }};
#if SL_HAVE_CBLAS
    std::vector<float> c(static_cast<size_t>(s.m * s.n));
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    fns.push_back([&] {
      // the reference is OpenBLAS with its own threading, on as many threads as sl::matmul
      // (which keeps the BLAS single-threaded: Note [Deterministic BLAS tiles])
      if (openblas_set_num_threads) openblas_set_num_threads(sl::get_num_threads());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m),
                  static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, pa, static_cast<int>(s.k), pb,
                  static_cast<int>(s.n), 0.0f, c.data(), static_cast<int>(s.n));
      if (openblas_set_num_threads) openblas_set_num_threads(1);
    });
#endif
    auto t = time_interleaved(fns, reps);
    char label[64];
    std::snprintf(label, sizeof label, "%lld x %lld x %lld", static_cast<long long>(s.m),
                  static_cast<long long>(s.k), static_cast<long long>(s.n));
    if (t.size() == 2) {
      std::printf("%-28s %14.1f %16.1f %7.0f%%\n", label, flops / t[0] * 1e-9, flops / t[1] * 1e-9,
                  100.0 * t[1] / t[0]);
    } else {
      std::printf("%-28s %14.1f %16s %8s\n", label, flops / t[0] * 1e-9, "(no cblas)", "-");
    }
  }
}

// ---- elementwise and reduction -----------------------------------------------------------
void bench_memory_bound(bool quick) {
  const int64_t n = quick ? (1 << 12) : (1 << 24);
  const int reps = quick ? 3 : 15;
  const double mb = static_cast<double>(n) * sizeof(float);
  sl::NoGradGuard no_grad;
  sl::Tensor a = sl::randn({n}), b = sl::randn({n}), out = sl::empty({n});
  out.fill_(0);  // touch the pages once
  const float* src = a.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  auto memcpy1 = [&] { std::memcpy(dst, src, static_cast<size_t>(mb)); };
  // memcpy split across the library's threads, the fairest reference for a threaded kernel
  auto memcpy_par = [&] {
    sl::parallel_for(0, n, 1 << 16, [&](int64_t s, int64_t e) {
      std::memcpy(dst + s, src + s, static_cast<size_t>(e - s) * sizeof(float));
    });
  };

  struct Case {
    const char* name;
    int tensors;  // tensors read + written
    std::function<void()> kernel, api;
  };
  using sl::BinaryOp;
  using sl::DeviceKind;
  using sl::UnaryOp;
  std::vector<Case> cases = {
      {"add  a + b", 3, [&] { sl::binary_kernel(DeviceKind::cpu, BinaryOp::add, out, a, b, 1); },
       [&] { (void)(a + b); }},
      {"mul  a * b", 3, [&] { sl::binary_kernel(DeviceKind::cpu, BinaryOp::mul, out, a, b, 1); },
       [&] { (void)(a * b); }},
      {"gelu (erf)", 2, [&] { sl::unary_kernel(DeviceKind::cpu, UnaryOp::gelu, out, a); },
       [&] { (void)sl::gelu(a); }},
      {"gelu (tanh)", 2, [&] { sl::unary_kernel(DeviceKind::cpu, UnaryOp::gelu_tanh, out, a); },
       [&] { (void)sl::gelu(a, "tanh"); }},
      {"exp", 2, [&] { sl::unary_kernel(DeviceKind::cpu, UnaryOp::exp, out, a); },
       [&] { (void)sl::exp(a); }},
      {"sigmoid", 2, [&] { sl::unary_kernel(DeviceKind::cpu, UnaryOp::sigmoid, out, a); },
       [&] { (void)sl::sigmoid(a); }},
      {"tanh", 2, [&] { sl::unary_kernel(DeviceKind::cpu, UnaryOp::tanh, out, a); },
       [&] { (void)sl::tanh(a); }},
  };

  std::printf("\n%-28s %14s %16s %8s\n", "f32, 16M elements (64 MB)", "kernel GB/s",
              "op GB/s (alloc)", "kernel/");
  std::printf("%-28s %14s %16s %8s\n", "", "", "", "memcpy");
  rule();
  auto tm = time_interleaved({memcpy1, memcpy_par}, reps);
  const double bw1 = 2 * mb / tm[0] * 1e-9, bwp = 2 * mb / tm[1] * 1e-9;
  const double ref = std::max(bw1, bwp);
  std::printf("%-28s %14.1f %16s %8s\n", "memcpy (1 call)", bw1, "", "");
  std::printf("%-28s %14.1f %16s %8s\n", "memcpy (split on threads)", bwp, "", "");
  for (const auto& c : cases) {
    auto t = time_interleaved({memcpy_par, c.kernel, c.api}, reps);
    double bytes = c.tensors * mb;
    double k = bytes / t[1] * 1e-9;
    // the memcpy of this round, so that load changes between cases do not skew the ratio
    double ref_now = std::max(ref, 2 * mb / t[0] * 1e-9);
    std::printf("%-28s %14.1f %16.1f %7.0f%%\n", c.name, k, bytes / t[2] * 1e-9,
                100.0 * k / ref_now);
  }
  auto ts = time_interleaved({memcpy_par, [&] { (void)a.sum(); }}, reps);
  std::printf("%-28s %14.1f %16s %7.0f%%\n", "sum (reads 64 MB)", mb / ts[1] * 1e-9, "",
              100.0 * (mb / ts[1]) / std::max(ref, 2 * mb / ts[0]));
}

// ---- autograd overhead ----------------------------------------------------------------------
void bench_autograd(bool quick) {
  const int ops = quick ? 50 : 2000;
  const int reps = quick ? 3 : 15;
  sl::Tensor x = sl::randn({4}, {.requires_grad = true});
  sl::Tensor w = sl::randn({4});
  auto chain = [&] {
    sl::Tensor y = x;
    for (int i = 0; i < ops; ++i) y = y * w;
    return y;
  };
  auto no_grad = [&] {
    sl::NoGradGuard g;
    (void)chain();
  };
  auto record = [&] { (void)chain(); };
  auto record_backward = [&] {
    sl::Tensor y = chain().sum();
    y.backward();
    x.set_grad(sl::Tensor());
  };
  // The same chain with the profiler recording it (Note [Profiler]): start, the ops, stop
  // (which gathers and sorts the events) all inside the timed call.
  auto profiled = [&] {
    sl::profiler::start();
    {
      sl::NoGradGuard g;
      (void)chain();
    }
    (void)sl::profiler::stop();
  };
  auto t = time_interleaved({no_grad, record, record_backward, profiled}, reps);
  const double us = 1e6 / ops;
  std::printf("\n%-28s %14s\n", "autograd, 4-element tensors", "us per op");
  rule();
  std::printf("%-28s %14.2f\n", "mul, grad mode off", t[0] * us);
  std::printf("%-28s %14.2f\n", "mul, recorded", t[1] * us);
  std::printf("%-28s %14.2f\n", "recording overhead", (t[1] - t[0]) * us);
  std::printf("%-28s %14.2f\n", "backward of one mul", (t[2] - t[1]) * us);
  std::printf("%-28s %14.2f\n", "mul, profiler recording", t[3] * us);
  std::printf("%-28s %14.2f\n", "profiler overhead", (t[3] - t[0]) * us);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--chain" && i + 1 < argc) {
      // Only N muls of 4-element tensors with grad mode off, then exit: a fixed workload for
      // instruction counts (valgrind --tool=callgrind), e.g. the profiler's cost while off.
      const int n = std::atoi(argv[++i]);
      sl::set_num_threads(1);
      sl::Tensor y = sl::randn({4}), w = sl::randn({4});
      sl::NoGradGuard g;
      for (int k = 0; k < n; ++k) y = y * w;
      return y.numel() == 4 ? 0 : 1;
    } else if (arg == "--threads" && i + 1 < argc) {
      sl::set_num_threads(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_core [--threads N] [--quick] | --chain N\n");
      return 2;
    }
  }
  std::printf("bench_core: %d threads%s\n", sl::get_num_threads(),
              quick ? " (--quick: tiny sizes, numbers meaningless)" : "");
  std::printf("BLAS: %s\n  %s\n\n", sl::blas_info().config.c_str(), sl::blas_info().note.c_str());
  bench_matmul(quick);
  bench_memory_bound(quick);
  bench_autograd(quick);
  return 0;
}
