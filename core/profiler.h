// The profiler: where a program's time goes, per kernel, backward node, collective and phase.
//
// Note [Profiler]
// profiler::start() begins recording on every thread; profiler::stop() ends it and returns a
// Profile: each thread's events since start() (sorted by start time), the threads' names, and how
// many events were dropped past Options::max_events. Events come from:
//  - every kernel call through a KernelSlot (core/dispatch.h), named after the slot
//    ("bmm_kernel"), category kernel. On the CPU that is the kernel's run time; on CUDA it is the
//    host's side of the call only, mostly the launch, since kernels run asynchronously;
//  - and for a call on a device whose kind has a device timer (core/device_timer.h: CUDA, and the
//    fake GPU of the tests), the time the device spent on it, category gpu, on one track per device
//    ("cuda:0 stream") after the threads: the call records a marker on the device's compute
//    stream before and after itself, and stop() waits for each device that has markers and turns
//    them into host-clock times (Note [Device timer]). A gpu event spans everything the device's
//    stream did from the first marker to the second: all the call's kernels, cuBLAS and cuDNN
//    work, and any time the stream sat idle waiting for the host to launch them, so on a
//    host-bound stretch gpu events are as long as the launches. A slot called inside another
//    gives a gpu event nested in the outer one, as on the host; calls from two threads at once
//    onto one device give gpu events that overlap without nesting. Only calls whose arguments
//    name their device (a defined Tensor, or a struct with a device() member) are timed: the
//    runtime's hooks (synchronize, device_name) launch no kernel;
//  - each backward node the autograd engine runs ("AddmmBackward"), category autograd;
//  - collectives (dist/process_group.cpp): the time each is in flight, from issue to completion,
//    as an async event that may overlap others (category comm); the MPI communication thread's
//    run of each (comm); and each Work::wait() on the caller's thread ("wait allreduce", category
//    wait): the communication a step did not hide behind computation;
//  - the phases of a training step (dist::Strategy, the trainer's loop; category phase) and a
//    program's own Scopes (category user);
//  - each allocation and free of a device's allocator (core/allocator.h AllocStats), as a
//    sample of its live bytes named after the device ("cpu memory", "cuda:0 memory"; category
//    memory), so a trace has a memory track and the summary names what ran at each peak.
// While not recording, each of these costs one relaxed atomic load and a branch. Times are the
// host's steady clock in nanoseconds, relative to start(); gpu events are placed on it through
// the anchor of Note [Device timer]. Names are not copied per event: they point to static
// strings, or to intern()'s copies, which live until the process ends. A timed kernel call
// counts two events against Options::max_events (its kernel and its gpu event).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"

namespace sl::profiler {

/// memory: a sample, not an interval (duration 0, bytes = the allocator's live bytes after an
/// allocation or free). gpu: a kernel call's time on a device, on the device's track.
enum class Category : uint8_t { kernel = 0, autograd, comm, wait, phase, user, memory, gpu };
inline constexpr int kNumCategories = 8;
/// "kernel", "autograd", "comm", "wait", "phase", "user", "memory", "gpu".
const char* category_name(Category c);

/// One recorded interval.
struct Event {
  const char* name = "";  ///< static storage or intern()'s: valid until the process ends
  Category category = Category::user;
  /// True for intervals that may overlap others of their thread without nesting (collectives in
  /// flight); they count in no one's self time and appear as async events in traces.
  bool async = false;
  uint32_t thread = 0;      ///< index into Profile::threads (a thread or a device's track)
  int64_t start_ns = 0;     ///< since start()
  int64_t duration_ns = 0;  ///< >= 0
  int64_t bytes = 0;        ///< payload of a collective; live bytes of a memory sample; 0 otherwise
  uint64_t id = 0;          ///< async events: pairs their begin and end in a trace
};

struct Options {
  /// Events kept per recording; later ones are counted in Profile::dropped. At 48 bytes each, the
  /// default bounds the profiler's memory near 50 MB.
  int64_t max_events = 1 << 20;
};

/// What one recording saw.
struct Profile {
  std::vector<Event> events;         ///< sorted by start_ns (then longer first)
  /// The threads' names ("thread N" where none was set), then one track per device with gpu
  /// events, named after the device ("cuda:0 stream"), in device order.
  std::vector<std::string> threads;
  /// Events past Options::max_events, and gpu events lost for want of a device marker.
  int64_t dropped = 0;
  /// From start() to stop(), or to the end of the last gpu event when that is later (work queued
  /// before stop() and run after it).
  int64_t duration_ns = 0;

  /// One line of the summary: every non-async event of one (category, name).
  struct Row {
    Category category = Category::user;
    std::string name;
    int64_t calls = 0;
    int64_t total_ns = 0;
    /// total_ns less the time of events nested directly inside these on the same thread.
    int64_t self_ns = 0;
  };
  /// Rows sorted by self time, largest first (ties by category, then name).
  std::vector<Row> table() const;
  /// One line per collective name of the async comm events: calls, payload bytes, time in flight,
  /// and the time callers spent in the matching "wait <name>" events.
  struct CommRow {
    std::string name;
    int64_t calls = 0;
    int64_t bytes = 0;
    int64_t in_flight_ns = 0;
    int64_t waited_ns = 0;
  };
  std::vector<CommRow> comm_table() const;
  /// Per memory name (a device's allocator): the live bytes at the window's first and last
  /// sample, the highest, when it was first reached, and the names of the events open on the
  /// allocating thread then, outermost first ("backward", "Conv2dBackward", ...).
  struct MemoryPeak {
    std::string name;
    int64_t first_bytes = 0, last_bytes = 0, peak_bytes = 0;
    int64_t peak_at_ns = 0;
    std::vector<std::string> open;
  };
  std::vector<MemoryPeak> memory_peaks() const;
  /// Per device track: the union of its gpu events (the time its stream was inside a timed
  /// kernel call) and how many it has, in the order of Profile::threads.
  struct DeviceBusy {
    std::string track;  ///< "cuda:0 stream"
    int64_t events = 0;
    int64_t busy_ns = 0;
  };
  std::vector<DeviceBusy> device_busy() const;
  /// A text report: the duration, thread and event counts, the `rows` rows of table() with the
  /// most self time on the threads, then, when there are gpu events, device_busy() and the `rows`
  /// gpu rows with the most self time, comm_table() when there were collectives, and
  /// memory_peaks().
  std::string summary(size_t rows = 20) const;
  /// The events in the Chrome trace-event JSON format (chrome://tracing, ui.perfetto.dev): one
  /// process `pid` named `process_name` (none when empty), a track per thread, "X" events,
  /// "b"/"e" pairs for async ones and "C" (counter) events for memory samples, timestamps in
  /// microseconds.
  std::string chrome_trace(int pid = 0, const std::string& process_name = "") const;
  /// Writes chrome_trace() to `path` through a temporary file renamed into place, so an existing
  /// file is replaced whole or not at all. Throws IOError naming the path when it cannot.
  void write_chrome_trace(const std::string& path, int pid = 0,
                          const std::string& process_name = "") const;
};

namespace detail {
extern std::atomic<bool> g_recording;
extern std::atomic<uint64_t> g_generation;
/// Appends an event with absolute steady-clock times, if recording `generation` is still on.
void record_abs(uint64_t generation, const char* name, Category c, int64_t begin_ns, int64_t end_ns,
                int64_t bytes, bool async, uint64_t id) noexcept;
/// record_memory's work, out of line so that callers' fast path stays a load and a branch.
void record_memory_now(const char* name, int64_t live_bytes) noexcept;
}  // namespace detail

/// True between start() and stop().
inline bool is_recording() {
  return detail::g_recording.load(std::memory_order_relaxed);
}
/// Begins a recording; earlier events are discarded. Throws ValueError when one is already on or
/// opts.max_events < 1.
void start(Options opts = {});
/// Ends the recording and returns it. Scopes still open on any thread are not in it. Waits for
/// each device that has gpu markers (Note [Device timer]). Throws ValueError when not recording,
/// and the device's error (CudaError) when waiting for a device fails; the recording is over
/// then, and its markers are returned to their pools.
Profile stop();
/// Names the calling thread in profiles ("main", "communication"); kept for the thread's life.
void set_thread_name(std::string name);
/// A copy of `name` that lives until the process ends (one per distinct name), for Scope names
/// built at run time.
const char* intern(std::string_view name);
/// The steady clock in nanoseconds, the base of record()'s times.
int64_t now_ns();
/// The current recording, for a caller that records an interval later (record()).
uint64_t generation();
/// A fresh id for an async event.
uint64_t next_async_id();
/// Records [begin_ns, end_ns) (now_ns() times) on the calling thread if the recording that was
/// current at `generation()` is still on; does nothing otherwise.
inline void record(uint64_t generation, const char* name, Category c, int64_t begin_ns,
                   int64_t end_ns, int64_t bytes = 0, bool async = false, uint64_t id = 0) {
  if (is_recording()) detail::record_abs(generation, name, c, begin_ns, end_ns, bytes, async, id);
}

/// While recording: a memory sample of `live_bytes` under `name` (static or intern()'s), now, on
/// the calling thread.
inline void record_memory(const char* name, int64_t live_bytes) {
  if (is_recording()) [[unlikely]]
    detail::record_memory_now(name, live_bytes);
}

namespace detail {
/// A kernel slot's call while recording (KernelSlot::operator(), core/dispatch.h): its host
/// interval as a kernel event, and when `device` >= 0 and `kind` has a device timer, a marker on
/// the device's compute stream at construction and at destruction, which stop() resolves into a
/// gpu event (Note [Device timer]). The constructor throws what the device's marker throws
/// (CudaError); the destructor throws nothing (a failed second marker drops the gpu event).
class KernelCall {
 public:
  KernelCall(const char* name, DeviceKind kind, int device);
  ~KernelCall();
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

 private:
  const char* name_;
  uint64_t generation_;
  int64_t start_ns_;
  DeviceKind kind_;
  int device_;
  int64_t begin_marker_ = -1;  ///< -1: the call is not timed on the device
};
}  // namespace detail

/// Records the interval of its own lifetime on the calling thread, if a recording was on when it
/// was made and is still the same one when it ends. `name` must outlive the process (a literal or
/// intern()'s).
class Scope {
 public:
  explicit Scope(const char* name, Category c = Category::user, int64_t bytes = 0) noexcept {
    if (is_recording()) [[unlikely]]
      begin(name, c, bytes);
  }
  ~Scope() {
    if (name_ != nullptr) [[unlikely]]
      end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void begin(const char* name, Category c, int64_t bytes) noexcept;
  void end() noexcept;
  const char* name_ = nullptr;
  Category category_ = Category::user;
  int64_t bytes_ = 0;
  int64_t start_ns_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace sl::profiler
