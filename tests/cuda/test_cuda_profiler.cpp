// The profiler's gpu events (Note [Profiler], Note [Device timer]): one per CUDA kernel call on
// the device's track, none for the CPU or while not recording, nesting, the event and marker
// limits, the summary and the Chrome trace. On the fake GPU (Note [Fake GPU]) the markers are the
// host clock, so the checks on when a gpu event lies against its launch are exact there; the
// marker counts are the fake timer's and are checked only there.
#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include "core/ops/copy.h"
#include "cuda_testing.h"
#include "nn/serialize/json.h"

using namespace sl;
using profiler::Category;
using profiler::Event;
using profiler::Profile;
using sl::testing::fake_gpu_installed;
using sl::testing::fake_timer_counts;
using sl::testing::kGPU;

namespace {

// A kernel slot of the test: its CUDA entry launches nothing and stays kProbeSleep in the call
// (so that on a GPU its stream sits idle between the markers for that long), after running
// g_probe_inside when one is set.
constexpr auto kProbeSleep = std::chrono::microseconds(200);
std::function<void()> g_probe_inside;
void probe(const Tensor& /*maybe_undefined*/, const Tensor& /*t*/) {
  if (g_probe_inside) g_probe_inside();
  std::this_thread::sleep_for(kProbeSleep);
}
// Another: fills t with 2 through fill_kernel, a slot called inside a slot.
void outer(const Tensor& t) {
  fill_kernel(t.device().kind, t, Scalar(2.0));
}

}  // namespace

SL_DEFINE_KERNEL(probe_kernel, void(const Tensor& maybe_undefined, const Tensor& t));
SL_DEFINE_KERNEL(outer_kernel, void(const Tensor& t));
SL_REGISTER_KERNEL(probe_kernel, DeviceKind::cpu, &probe);
SL_REGISTER_KERNEL(probe_kernel, DeviceKind::cuda, &probe);
SL_REGISTER_KERNEL(outer_kernel, DeviceKind::cuda, &outer);

namespace {

std::vector<Event> events_of(const Profile& p, Category c, std::string_view name = "") {
  std::vector<Event> out;
  for (const Event& e : p.events) {
    if (e.category == c && (name.empty() || name == e.name)) out.push_back(e);
  }
  return out;
}

const Profile::Row* find_row(const std::vector<Profile::Row>& rows, Category c,
                             std::string_view name) {
  for (const auto& r : rows) {
    if (r.category == c && r.name == name) return &r;
  }
  return nullptr;
}

int64_t markers_taken() {
  return fake_gpu_installed() ? fake_timer_counts().taken : 0;
}

}  // namespace

TEST_CASE("profiler: each CUDA kernel call is one gpu event on the device's track" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("profiler gpu events");
  Tensor t = zeros({8}, {.device = kGPU});
  cuda::synchronize();  // an idle stream: each probe's first marker is reached at once
  const int64_t taken_before = markers_taken();
  constexpr int kCalls = 5;
  profiler::start();
  // The first argument is undefined: the device comes from the first defined one.
  for (int i = 0; i < kCalls; ++i) probe_kernel(DeviceKind::cuda, Tensor(), t);
  Profile p = profiler::stop();
  const std::vector<Event> host = events_of(p, Category::kernel, "probe_kernel");
  const std::vector<Event> gpu = events_of(p, Category::gpu);
  REQUIRE(host.size() == kCalls);
  REQUIRE(gpu.size() == kCalls);  // no other gpu event: nothing else ran
  for (int i = 0; i < kCalls; ++i) {
    CAPTURE(i);
    const Event& g = gpu[i];
    CHECK(std::string_view(g.name) == "probe_kernel");
    REQUIRE(g.thread < p.threads.size());
    CHECK(p.threads[g.thread] == "cuda:0 stream");
    CHECK(g.start_ns >= host[i].start_ns);  // never before its launch
    CHECK(g.duration_ns >= 0);
    // The stream waited between the markers while the host slept.
    CHECK(g.duration_ns >= std::chrono::nanoseconds(kProbeSleep).count() / 2);
    CHECK(g.start_ns + g.duration_ns <= p.duration_ns);
    if (fake_gpu_installed()) {
      // Host-clock markers: the first is taken inside the call, the second just after it.
      CHECK(g.start_ns <= host[i].start_ns + host[i].duration_ns);
      CHECK(g.start_ns + g.duration_ns >= host[i].start_ns + host[i].duration_ns);
    }
    if (i > 0) CHECK(g.start_ns >= gpu[i - 1].start_ns + gpu[i - 1].duration_ns);
  }
  // The host thread's events and the device's track are distinct tracks.
  CHECK(host[0].thread != gpu[0].thread);
  const auto rows = p.table();
  const Profile::Row* grow = find_row(rows, Category::gpu, "probe_kernel");
  REQUIRE(grow != nullptr);
  CHECK(grow->calls == kCalls);
  int64_t sum = 0;
  for (const Event& g : gpu) sum += g.duration_ns;
  CHECK(grow->total_ns == sum);
  CHECK(grow->self_ns == sum);
  const auto busy = p.device_busy();
  REQUIRE(busy.size() == 1);
  CHECK(busy[0].track == "cuda:0 stream");
  CHECK(busy[0].events == kCalls);
  CHECK(busy[0].busy_ns == sum);  // one after another on the stream
  if (fake_gpu_installed()) {
    CHECK(fake_timer_counts().taken - taken_before == 2 * kCalls);
    CHECK(fake_timer_counts().in_use == 0);  // stop() returned them
  }
  // The summary: the host's rows, then the device's.
  const std::string s = p.summary();
  CAPTURE(s);
  CHECK(s.find("on 1 thread(s) and 1 device(s)") != std::string::npos);
  const size_t at_devices = s.find("  cuda:0 stream: busy ");
  REQUIRE(at_devices != std::string::npos);
  CHECK(s.find("5 gpu event(s)", at_devices) != std::string::npos);
  const size_t at_kernel_row = s.find("kernel    probe_kernel");
  const size_t at_gpu_row = s.find("gpu       probe_kernel");
  REQUIRE(at_kernel_row != std::string::npos);
  REQUIRE(at_gpu_row != std::string::npos);
  CHECK(at_kernel_row < at_devices);
  CHECK(at_devices < at_gpu_row);
  // The trace: a named track for the device and an X event per gpu event on it.
  const serialize::Json doc = serialize::Json::parse(p.chrome_trace());
  int64_t track_tid = -1, gpu_x = 0;
  for (const serialize::Json& e : doc.at("traceEvents").items()) {
    const std::string ph = e.at("ph").as_string();
    if (ph == "M" && e.at("name").as_string() == "thread_name" &&
        e.at("args").at("name").as_string() == "cuda:0 stream") {
      track_tid = e.at("tid").as_int();
    }
    if (ph == "X" && e.at("cat").as_string() == "gpu") {
      ++gpu_x;
      CHECK(e.at("name").as_string() == "probe_kernel");
      CHECK(e.at("tid").as_int() == gpu[0].thread);
    }
  }
  CHECK(track_tid == gpu[0].thread);
  CHECK(gpu_x == kCalls);
}

TEST_CASE("profiler: no gpu events for CPU kernels, device-less hooks, or while not recording" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("profiler gpu events");
  Tensor c = zeros({8});
  Tensor g = ones({8}, {.device = kGPU});
  const int64_t taken_before = markers_taken();
  // Not recording: CUDA kernel calls take no marker.
  Tensor h = g + g;
  probe_kernel(DeviceKind::cuda, Tensor(), g);
  CHECK(h.sum().item<float>() == 16.0f);
  CHECK(markers_taken() == taken_before);
  profiler::start();
  probe_kernel(DeviceKind::cpu, Tensor(), c);  // a CPU kernel
  cuda::synchronize();                         // synchronize_kernel(int): names no tensor
  Profile p = profiler::stop();
  CHECK(events_of(p, Category::gpu).empty());
  CHECK(events_of(p, Category::kernel, "probe_kernel").size() == 1);
  CHECK(events_of(p, Category::kernel, "synchronize_kernel").size() == 1);
  CHECK(p.device_busy().empty());
  CHECK(p.summary().find("device(s)") == std::string::npos);
  CHECK(markers_taken() == taken_before);
}

TEST_CASE("profiler: every CUDA kernel call of a training step has its gpu event" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("profiler gpu events");
  manual_seed(3);
  Tensor x = randn({16, 32}, {.device = kGPU}).requires_grad_();
  Tensor w = randn({32, 8}, {.device = kGPU}).requires_grad_();
  cuda::synchronize();
  profiler::start();
  Tensor y = matmul(x, w).tanh().sum();
  y.backward();
  Profile p = profiler::stop();
  const std::vector<Event> gpu = events_of(p, Category::gpu);
  REQUIRE(!gpu.empty());
  std::map<std::string, int64_t> gpu_calls, host_calls;
  for (const Event& e : gpu) {
    gpu_calls[e.name] += 1;
    CHECK(p.threads.at(e.thread) == "cuda:0 stream");
    CHECK(e.duration_ns >= 0);
  }
  for (const Event& e : events_of(p, Category::kernel)) host_calls[e.name] += 1;
  CHECK(gpu_calls["bmm_kernel"] >= 3);    // the product and two in the backward
  CHECK(gpu_calls["unary_kernel"] >= 1);  // tanh
  // Each kernel call made on the GPU: as many gpu events as kernel events of its name.
  for (const auto& [name, n] : gpu_calls) {
    CAPTURE(name);
    CHECK(host_calls[name] == n);
  }
  CHECK(x.grad().defined());
  CHECK(w.grad().defined());
}

TEST_CASE("profiler: a kernel slot called inside another is a gpu event nested in its own" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("profiler gpu events");
  Tensor t = zeros({64}, {.device = kGPU});
  profiler::start();
  outer_kernel(DeviceKind::cuda, t);
  Profile p = profiler::stop();
  CHECK(t.to(kCPU).sum().item<float>() == 128.0f);  // the inner fill ran
  const std::vector<Event> outer_ev = events_of(p, Category::gpu, "outer_kernel");
  const std::vector<Event> fill_ev = events_of(p, Category::gpu, "fill_kernel");
  REQUIRE(outer_ev.size() == 1);
  REQUIRE(fill_ev.size() == 1);
  const Event& o = outer_ev[0];
  const Event& f = fill_ev[0];
  CHECK(o.thread == f.thread);
  CHECK(f.start_ns >= o.start_ns);
  CHECK(f.start_ns + f.duration_ns <= o.start_ns + o.duration_ns);
  const auto rows = p.table();
  const Profile::Row* orow = find_row(rows, Category::gpu, "outer_kernel");
  REQUIRE(orow != nullptr);
  CHECK(orow->total_ns == o.duration_ns);
  CHECK(orow->self_ns == o.duration_ns - f.duration_ns);
  const auto busy = p.device_busy();
  REQUIRE(busy.size() == 1);
  CHECK(busy[0].events == 2);
  CHECK(busy[0].busy_ns == o.duration_ns);  // the nested one adds nothing
}

TEST_CASE("profiler: gpu events count against max_events; past it they take no marker" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("profiler gpu events");
  Tensor t = zeros({8}, {.device = kGPU});
  const int64_t taken_before = markers_taken();
  profiler::start({.max_events = 3});
  for (int i = 0; i < 5; ++i) probe_kernel(DeviceKind::cuda, Tensor(), t);
  Profile p = profiler::stop();
  // Each call asks for its gpu event when it begins and its kernel event when it ends: the
  // first call keeps both, the second its gpu event only, the rest nothing.
  CHECK(p.events.size() == 3);
  CHECK(events_of(p, Category::gpu).size() == 2);
  CHECK(events_of(p, Category::kernel).size() == 1);
  CHECK(p.dropped == 2 * 5 - 3);
  if (fake_gpu_installed()) {
    CHECK(markers_taken() - taken_before == 2 * 2);
    CHECK(fake_timer_counts().in_use == 0);
  }
}

// The pool's own limit exists only on the fake GPU's timer (a CUDA pool grows within
// max_events), so this case skips on a real GPU, and without any.
TEST_CASE("profiler: a gpu event that finds its device's pool empty is dropped" *
          sl::testing::skip_when(!sl::testing::gpu_visible() || !sl::testing::fake_gpu_installed(),
                                 "the fake GPU's marker pool limit",
                                 "no fake GPU (a real one, or none)")) {
  SL_REQUIRE_CUDA("profiler marker pool");
  Tensor t = zeros({8}, {.device = kGPU});
  // An even number of markers to give: the calls past them find none for their first marker;
  // an odd number: the first call past them gets a first marker and no second (it goes back).
  for (const bool odd : {false, true}) {
    CAPTURE(odd);
    const int64_t pool = fake_timer_counts().pool;  // all free: no recording is on
    REQUIRE(fake_timer_counts().in_use == 0);
    const int64_t room = (pool + 2) % 2 == (odd ? 1 : 0) ? pool + 2 : pool + 3;
    sl::testing::set_fake_timer_capacity(room);
    const int64_t fit = room / 2, calls = fit + 4;
    profiler::start();
    for (int64_t i = 0; i < calls; ++i) probe_kernel(DeviceKind::cuda, Tensor(), t);
    Profile p = profiler::stop();
    sl::testing::set_fake_timer_capacity(int64_t{1} << 22);
    CHECK(static_cast<int64_t>(events_of(p, Category::gpu).size()) == fit);
    CHECK(static_cast<int64_t>(events_of(p, Category::kernel).size()) == calls);
    CHECK(p.dropped == calls - fit);
    CHECK(p.summary().find(std::to_string(calls - fit) + " dropped") != std::string::npos);
    CHECK(fake_timer_counts().pool == room);
    CHECK(fake_timer_counts().in_use == 0);  // a lone first marker went back too
  }
}

TEST_CASE("profiler: a kernel call still running when its recording stops gives back its markers" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("profiler gpu events");
  Tensor t = zeros({8}, {.device = kGPU});
  Profile inside;
  const int64_t taken_before = markers_taken();
  profiler::start();
  g_probe_inside = [&] { inside = profiler::stop(); };
  probe_kernel(DeviceKind::cuda, Tensor(), t);
  g_probe_inside = nullptr;
  CHECK_FALSE(profiler::is_recording());
  CHECK(events_of(inside, Category::gpu).empty());
  CHECK(events_of(inside, Category::kernel).empty());
  if (fake_gpu_installed()) {
    CHECK(markers_taken() - taken_before == 1);  // none after the call for an ended recording
    CHECK(fake_timer_counts().in_use == 0);
  }
  // The next recording is whole.
  profiler::start();
  probe_kernel(DeviceKind::cuda, Tensor(), t);
  Profile next = profiler::stop();
  CHECK(events_of(next, Category::gpu, "probe_kernel").size() == 1);
  if (fake_gpu_installed()) CHECK(fake_timer_counts().in_use == 0);
}
