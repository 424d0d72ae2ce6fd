// Recording: per-thread event buffers, the switch, the event budget and the gpu markers of kernel
// calls (Note [Profiler], Note [Device timer]).
#include "core/profiler.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "core/device_timer.h"
#include "core/error.h"

namespace sl::profiler {

namespace detail {
std::atomic<bool> g_recording{false};
std::atomic<uint64_t> g_generation{0};
}  // namespace detail

namespace {

// A timed kernel call whose markers stop() has yet to resolve.
struct GpuSpan {
  const char* name;
  DeviceKind kind;
  int device;
  int64_t begin_marker, end_marker;
};

// Events carry absolute times until stop() makes them relative; `thread` is the buffer's serial.
struct ThreadBuffer {
  std::mutex mu;
  std::vector<Event> events;
  std::vector<GpuSpan> gpu;
  std::string name;
  uint32_t serial = 0;
};

struct Registry {
  std::mutex mu;  // guards buffers, names, and the start/stop transitions
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  uint32_t next_serial = 0;
  int64_t max_events = 0;
  int64_t start_ns = 0;
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> dropped{0};
  std::atomic<uint64_t> next_id{1};
  std::mutex intern_mu;
  std::unordered_set<std::string> interned;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may record during exit
  return *r;
}

// The calling thread's buffer, registered on first use. The registry holds a second reference,
// so a thread's events outlive the thread until the next start().
ThreadBuffer& own_buffer() {
  thread_local std::shared_ptr<ThreadBuffer> mine = [] {
    auto b = std::make_shared<ThreadBuffer>();
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    b->serial = r.next_serial++;
    r.buffers.push_back(b);
    return b;
  }();
  return *mine;
}

}  // namespace

const char* category_name(Category c) {
  switch (c) {
    case Category::kernel:
      return "kernel";
    case Category::autograd:
      return "autograd";
    case Category::comm:
      return "comm";
    case Category::wait:
      return "wait";
    case Category::phase:
      return "phase";
    case Category::user:
      return "user";
    case Category::memory:
      return "memory";
    case Category::gpu:
      return "gpu";
  }
  return "?";
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t generation() {
  return detail::g_generation.load(std::memory_order_acquire);
}

uint64_t next_async_id() {
  return registry().next_id.fetch_add(1, std::memory_order_relaxed);
}

void detail::record_abs(uint64_t generation, const char* name, Category c, int64_t begin_ns,
                        int64_t end_ns, int64_t bytes, bool async, uint64_t id) noexcept {
  Registry& r = registry();
  ThreadBuffer& b = own_buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  // stop() advances the generation before it empties the buffers, under each buffer's lock, so an
  // event of a finished recording can never land in the next one.
  if (g_generation.load(std::memory_order_acquire) != generation ||
      !g_recording.load(std::memory_order_relaxed)) {
    return;
  }
  if (r.count.fetch_add(1, std::memory_order_relaxed) >= r.max_events) {
    r.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Event e;
  e.name = name;
  e.category = c;
  e.async = async;
  e.thread = b.serial;
  e.start_ns = begin_ns;
  e.duration_ns = std::max<int64_t>(0, end_ns - begin_ns);
  e.bytes = bytes;
  e.id = id;
  try {
    b.events.push_back(e);
  } catch (...) {  // out of memory: the event is lost, the program goes on
    r.dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

void detail::record_memory_now(const char* name, int64_t live_bytes) noexcept {
  const int64_t t = now_ns();
  record_abs(profiler::generation(), name, Category::memory, t, t, live_bytes, false, 0);
}

void Scope::begin(const char* name, Category c, int64_t bytes) noexcept {
  name_ = name;
  category_ = c;
  bytes_ = bytes;
  generation_ = generation();
  start_ns_ = now_ns();
}

void Scope::end() noexcept {
  record(generation_, name_, category_, start_ns_, now_ns(), bytes_);
}

namespace {

void release_markers(DeviceKind kind, int device, std::span<const int64_t> markers) noexcept {
  if (markers.empty()) return;
  try {
    device_timer_release_kernel.get(kind)(device, markers);
  } catch (...) {  // a backend's release throws nothing; without one there was nothing to take
  }
}

// Keeps a timed call's span for stop() if its recording is still on; otherwise, or when the span
// has no second marker, returns its markers to the pool.
void keep_gpu_span(uint64_t generation, const GpuSpan& span) noexcept {
  Registry& r = registry();
  bool current = false;
  {
    ThreadBuffer& b = own_buffer();
    std::lock_guard<std::mutex> lock(b.mu);
    current = detail::g_generation.load(std::memory_order_acquire) == generation &&
              detail::g_recording.load(std::memory_order_relaxed);
    if (current && span.end_marker >= 0) {
      try {
        b.gpu.push_back(span);
        return;
      } catch (...) {  // out of memory: the event is lost, as record_abs's
      }
    }
  }
  if (current) r.dropped.fetch_add(1, std::memory_order_relaxed);
  const int64_t both[2] = {span.begin_marker, span.end_marker};
  release_markers(span.kind, span.device, std::span(both, span.end_marker >= 0 ? 2 : 1));
}

}  // namespace

detail::KernelCall::KernelCall(const char* name, DeviceKind kind, int device)
    : name_(name), generation_(generation()), start_ns_(now_ns()), kind_(kind), device_(device) {
  if (device < 0 || !device_timer_mark_kernel.has(kind)) return;
  // The gpu event takes its place in the budget before its markers are taken, so that the
  // markers in use stay within 2 * max_events.
  Registry& r = registry();
  if (r.count.fetch_add(1, std::memory_order_relaxed) >= r.max_events) {
    r.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  begin_marker_ = device_timer_mark_kernel.get(kind)(device);
  if (begin_marker_ < 0) r.dropped.fetch_add(1, std::memory_order_relaxed);
}

detail::KernelCall::~KernelCall() {
  // The kernel event is the host's side of the call; the second marker comes after it.
  const int64_t end_ns = now_ns();
  int64_t end_marker = -1;
  // No second marker for a recording that has ended meanwhile: the first goes back unused.
  if (begin_marker_ >= 0 && generation() == generation_) {
    try {
      end_marker = device_timer_mark_kernel.get(kind_)(device_);
    } catch (...) {  // the device's error reaches the program at its next synchronisation
    }
  }
  record(generation_, name_, Category::kernel, start_ns_, end_ns);
  if (begin_marker_ >= 0) {
    keep_gpu_span(generation_, GpuSpan{name_, kind_, device_, begin_marker_, end_marker});
  }
}

void start(Options opts) {
  SL_CHECK(opts.max_events >= 1, "profiler::start: max_events must be >= 1, got ", opts.max_events);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  SL_CHECK(!is_recording(), "profiler::start: a recording is already on (call stop() first)");
  // Forget the buffers of threads that have ended; empty the others.
  std::erase_if(r.buffers,
                [](const std::shared_ptr<ThreadBuffer>& b) { return b.use_count() == 1; });
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    b->events.clear();
    b->gpu.clear();  // empty: stop() takes every span
  }
  r.max_events = opts.max_events;
  r.count.store(0);
  r.dropped.store(0);
  r.start_ns = now_ns();
  detail::g_generation.fetch_add(1, std::memory_order_acq_rel);
  detail::g_recording.store(true, std::memory_order_release);
}

namespace {

// Turns the spans into gpu events on one track per device, in device order (Note [Device
// timer]). Every marker goes back to its pool; the first device error is thrown after that.
void resolve_gpu_spans(const std::vector<GpuSpan>& spans, int64_t start_ns, Profile& p) {
  std::map<std::pair<DeviceKind, int>, std::vector<const GpuSpan*>> by_device;
  for (const GpuSpan& s : spans) by_device[{s.kind, s.device}].push_back(&s);
  std::exception_ptr error;
  for (const auto& [key, list] : by_device) {
    const auto [kind, device] = key;
    std::vector<int64_t> markers;
    markers.reserve(2 * list.size());
    for (const GpuSpan* s : list) {
      markers.push_back(s->begin_marker);
      markers.push_back(s->end_marker);
    }
    if (!error) {
      try {
        std::vector<int64_t> host_ns(markers.size());
        device_timer_resolve_kernel.get(kind)(device, markers, host_ns);
        const auto track = static_cast<uint32_t>(p.threads.size());
        p.threads.push_back(Device(kind, device).str() + " stream");
        for (size_t i = 0; i < list.size(); ++i) {
          Event e;
          e.name = list[i]->name;
          e.category = Category::gpu;
          e.thread = track;
          e.start_ns = host_ns[2 * i] - start_ns;
          e.duration_ns = std::max<int64_t>(0, host_ns[2 * i + 1] - host_ns[2 * i]);
          p.events.push_back(e);
        }
      } catch (...) {
        error = std::current_exception();
      }
    }
    release_markers(kind, device, markers);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

Profile stop() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  SL_CHECK(is_recording(), "profiler::stop: no recording is on (call start() first)");
  const int64_t end = now_ns();
  detail::g_recording.store(false, std::memory_order_release);
  detail::g_generation.fetch_add(1, std::memory_order_acq_rel);
  Profile p;
  p.duration_ns = end - r.start_ns;
  p.dropped = r.dropped.load();
  // Threads in registration order; events name their thread by its place in that list.
  std::vector<std::shared_ptr<ThreadBuffer>> buffers = r.buffers;
  std::sort(buffers.begin(), buffers.end(),
            [](const auto& a, const auto& b) { return a->serial < b->serial; });
  std::vector<GpuSpan> spans;
  for (size_t i = 0; i < buffers.size(); ++i) {
    ThreadBuffer& b = *buffers[i];
    std::vector<Event> events;
    std::string name;
    {
      std::lock_guard<std::mutex> bl(b.mu);
      events.swap(b.events);
      name = b.name;
      spans.insert(spans.end(), b.gpu.begin(), b.gpu.end());
      b.gpu.clear();
    }
    p.threads.push_back(name.empty() ? "thread " + std::to_string(b.serial) : name);
    for (Event& e : events) {
      e.thread = static_cast<uint32_t>(i);
      e.start_ns -= r.start_ns;
      p.events.push_back(e);
    }
  }
  resolve_gpu_spans(spans, r.start_ns, p);
  for (const Event& e : p.events) {
    if (e.category == Category::gpu) {
      p.duration_ns = std::max(p.duration_ns, e.start_ns + e.duration_ns);
    }
  }
  std::stable_sort(p.events.begin(), p.events.end(), [](const Event& a, const Event& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.duration_ns > b.duration_ns;  // an enclosing event before what it encloses
  });
  return p;
}

void set_thread_name(std::string name) {
  ThreadBuffer& b = own_buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.name = std::move(name);
}

const char* intern(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.intern_mu);
  return r.interned.emplace(name).first->c_str();
}

}  // namespace sl::profiler
