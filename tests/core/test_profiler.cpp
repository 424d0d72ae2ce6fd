// The profiler (Note [Profiler]): what it records, self times computed by hand, its limits, and
// the Chrome trace read back with the JSON parser.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "nn/serialize/json.h"
#include "support/testing.h"

using namespace sl;
using profiler::Category;
using profiler::Event;
using profiler::Profile;

namespace {

const Profile::Row* find_row(const std::vector<Profile::Row>& rows, std::string_view name) {
  for (const auto& r : rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

int64_t count_named(const Profile& p, std::string_view name) {
  int64_t n = 0;
  for (const Event& e : p.events) n += std::string_view(e.name) == name ? 1 : 0;
  return n;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("profiler: start and stop misuse is a ValueError; nothing is recorded when off") {
  REQUIRE_FALSE(profiler::is_recording());
  SL_CHECK_THROWS(profiler::stop(), ValueError, "profiler::stop: no recording is on");
  SL_CHECK_THROWS(profiler::start({.max_events = 0}), ValueError, "max_events must be >= 1, got 0");
  REQUIRE_FALSE(profiler::is_recording());
  { profiler::Scope s("before start"); }
  Tensor a = ones({4, 4});
  Tensor b = a + a;  // a kernel call while off
  CHECK(b.numel() == 16);
  profiler::start();
  SL_CHECK_THROWS(profiler::start(), ValueError, "a recording is already on");
  Profile p = profiler::stop();
  CHECK(p.events.empty());
  CHECK(p.dropped == 0);
  CHECK(p.duration_ns >= 0);
}

TEST_CASE("profiler: kernel calls and backward nodes are events on the calling thread") {
  profiler::set_thread_name("profiler test");
  manual_seed(1);
  Tensor x = randn({16, 16}).requires_grad_();
  profiler::start();
  Tensor y = matmul(x, x).tanh().sum();
  const std::string tanh_node = y.grad_fn()->next_edges[0].node->name();
  y.backward();
  Profile p = profiler::stop();
  CHECK(tanh_node == "TanhBackward");
  CHECK(count_named(p, "bmm_kernel") >= 3);  // the forward product and two in the backward
  CHECK(count_named(p, "TanhBackward") == 1);
  CHECK(count_named(p, "SumBackward") == 1);
  for (const Event& e : p.events) {
    CAPTURE(e.name);
    CHECK(e.start_ns >= 0);
    CHECK(e.start_ns + e.duration_ns <= p.duration_ns);
    REQUIRE(e.thread < p.threads.size());
    CHECK(p.threads[e.thread] == "profiler test");
    const std::string_view n = e.name;
    if (n.ends_with("_kernel")) CHECK(e.category == Category::kernel);
    if (n.ends_with("Backward")) CHECK(e.category == Category::autograd);
  }
  // Sorted by start, an enclosing event before what it encloses.
  for (size_t i = 1; i < p.events.size(); ++i) {
    CHECK(p.events[i - 1].start_ns <= p.events[i].start_ns);
  }
  // The backward node encloses the kernels it called: its self time is smaller than its total.
  const auto rows = p.table();
  const Profile::Row* mm = find_row(rows, "MatmulBackward");
  if (mm == nullptr) mm = find_row(rows, "MmBackward");
  REQUIRE(mm != nullptr);
  CHECK(mm->self_ns < mm->total_ns);
}

TEST_CASE("profiler: self time subtracts directly nested events of the same thread only") {
  profiler::start();
  const uint64_t gen = profiler::generation();
  const int64_t b = profiler::now_ns();
  // outer [0, 1000) holds one [100, 300) and two [400, 900), which holds three [500, 600); four
  // starts where outer ends, so it is not inside it. Times in ns from b.
  profiler::record(gen, "outer", Category::user, b, b + 1000);
  profiler::record(gen, "one", Category::user, b + 100, b + 300);
  profiler::record(gen, "two", Category::user, b + 400, b + 900);
  profiler::record(gen, "three", Category::user, b + 500, b + 600);
  profiler::record(gen, "four", Category::user, b + 1000, b + 1100);
  // An async event inside outer takes nothing from it.
  profiler::record(gen, "in flight", Category::comm, b + 50, b + 2000, 64, true, 7);
  // Another thread's event during outer takes nothing from it either.
  std::thread([&] { profiler::record(gen, "elsewhere", Category::user, b + 10, b + 990); }).join();
  Profile p = profiler::stop();
  const auto rows = p.table();
  struct Expected {
    const char* name;
    int64_t total, self;
  };
  for (Expected want :
       {Expected{"outer", 1000, 300}, Expected{"one", 200, 200}, Expected{"two", 500, 400},
        Expected{"three", 100, 100}, Expected{"four", 100, 100}, Expected{"elsewhere", 980, 980}}) {
    CAPTURE(want.name);
    const Profile::Row* r = find_row(rows, want.name);
    REQUIRE(r != nullptr);
    CHECK(r->calls == 1);
    CHECK(r->total_ns == want.total);
    CHECK(r->self_ns == want.self);
  }
  CHECK(find_row(rows, "in flight") == nullptr);  // async events are not in the table
  // Rows by self time, largest first.
  for (size_t i = 1; i < rows.size(); ++i) CHECK(rows[i - 1].self_ns >= rows[i].self_ns);
  const auto comm = p.comm_table();
  REQUIRE(comm.size() == 1);
  CHECK(comm[0].name == "in flight");
  CHECK(comm[0].bytes == 64);
  CHECK(comm[0].in_flight_ns == 1950);
}

TEST_CASE("profiler: threads keep their names and their events after they end") {
  profiler::start();
  std::thread([] {
    profiler::set_thread_name("worker of the test");
    profiler::Scope s("on the worker", Category::phase);
  }).join();
  Profile p = profiler::stop();
  REQUIRE(count_named(p, "on the worker") == 1);
  for (const Event& e : p.events) {
    if (std::string_view(e.name) == "on the worker") {
      CHECK(p.threads[e.thread] == "worker of the test");
      CHECK(e.category == Category::phase);
    }
  }
}

TEST_CASE("profiler: max_events bounds a recording and counts what it dropped") {
  profiler::start({.max_events = 10});
  for (int i = 0; i < 50; ++i) profiler::Scope s("tick");
  Profile p = profiler::stop();
  CHECK(p.events.size() == 10);
  CHECK(p.dropped == 40);
  CHECK(p.summary().find("40 dropped") != std::string::npos);
  // The next recording starts from zero.
  profiler::start({.max_events = 10});
  { profiler::Scope s("tock"); }
  Profile q = profiler::stop();
  CHECK(q.events.size() == 1);
  CHECK(q.dropped == 0);
}

TEST_CASE("profiler: a scope open across stop and start is in neither recording") {
  profiler::start();
  Profile second;
  {
    profiler::Scope s("straddles");
    Profile first = profiler::stop();
    CHECK(count_named(first, "straddles") == 0);
    profiler::start();
  }
  second = profiler::stop();
  CHECK(count_named(second, "straddles") == 0);
  // And record() with an old generation is ignored.
  const uint64_t old = profiler::generation();
  profiler::start();
  profiler::record(old, "stale", Category::user, profiler::now_ns(), profiler::now_ns());
  CHECK(profiler::stop().events.empty());
}

TEST_CASE("profiler: the Chrome trace is JSON holding every event, names escaped") {
  profiler::set_thread_name("trace \"main\"");
  profiler::start();
  const uint64_t gen = profiler::generation();
  const int64_t b = profiler::now_ns();
  const char* odd = profiler::intern("quote \" backslash \\ newline \n tab \t bell \x07 \xc3\xa9");
  CHECK(profiler::intern(std::string(odd)) == odd);  // one copy per distinct name
  profiler::record(gen, odd, Category::user, b + 1234567, b + 1234567 + 2001);
  profiler::record(gen, "allreduce", Category::comm, b + 10, b + 5010, 4096, true, 42);
  { profiler::Scope s("scoped", Category::phase, 99); }
  Profile p = profiler::stop();
  const serialize::Json doc = serialize::Json::parse(p.chrome_trace(3, "rank 3"));
  CHECK(doc.at("otherData").at("dropped").as_int() == 0);
  const serialize::Json& ev = doc.at("traceEvents");
  // Metadata: the process and each thread; then one X per event, a b/e pair per async one.
  // Timestamps count from start(), b from a moment after it: compare them with the async
  // event's begin at b + 10 ns. 1234567 ns -> 1234.567 us, text read back as a double.
  size_t meta = 0, complete = 0, begins = 0, ends = 0;
  std::set<std::string> thread_names;
  double odd_ts = -1, odd_dur = -1, begin_ts = -1, end_ts = -1;
  for (const serialize::Json& e : ev.items()) {
    CHECK(e.at("pid").as_int() == 3);
    const std::string ph = e.at("ph").as_string();
    if (ph == "M") {
      ++meta;
      if (e.at("name").as_string() == "process_name") {
        CHECK(e.at("args").at("name").as_string() == "rank 3");
      } else {
        thread_names.insert(e.at("args").at("name").as_string());
      }
      continue;
    }
    const std::string name = e.at("name").as_string();
    if (ph == "X") {
      ++complete;
      if (name == odd) {
        odd_ts = e.at("ts").as_double();
        odd_dur = e.at("dur").as_double();
        CHECK(e.at("cat").as_string() == "user");
      }
      if (name == "scoped") CHECK(e.at("args").at("bytes").as_int() == 99);
    } else if (ph == "b" || ph == "e") {
      (ph == "b" ? begins : ends) += 1;
      CHECK(name == "allreduce");
      CHECK(e.at("id").as_int() == 42);
      CHECK(e.at("cat").as_string() == "comm");
      (ph == "b" ? begin_ts : end_ts) = e.at("ts").as_double();
      if (ph == "b") CHECK(e.at("args").at("bytes").as_int() == 4096);
    } else {
      FAIL("unexpected phase " << ph);
    }
  }
  // Microseconds with three decimals: exact to the nanosecond up to double rounding.
  CHECK(odd_dur == doctest::Approx(2.001).epsilon(1e-12));
  CHECK(odd_ts - begin_ts == doctest::Approx(1234.557).epsilon(1e-9));
  CHECK(end_ts - begin_ts == doctest::Approx(5.0).epsilon(1e-9));
  CHECK(meta == 1 + p.threads.size());
  CHECK(complete == 2);
  CHECK(begins == 1);
  CHECK(ends == 1);
  CHECK(thread_names.count("trace \"main\"") == 1);
}

TEST_CASE("profiler: write_chrome_trace replaces a file whole or throws an IOError") {
  profiler::start();
  { profiler::Scope s("written"); }
  Profile p = profiler::stop();
  const auto dir =
      std::filesystem::temp_directory_path() / ("sl_profiler_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto file = dir / "trace.json";
  {
    std::ofstream old(file);
    old << "an older trace";
  }
  p.write_chrome_trace(file.string(), 1, "writer");
  CHECK(read_file(file) == p.chrome_trace(1, "writer"));
  // A folder that does not exist: nothing is created.
  const auto missing = dir / "no such folder" / "trace.json";
  SL_CHECK_THROWS(p.write_chrome_trace(missing.string()), IOError,
                  ("profiler: cannot write the trace to '" + missing.string() + "'").c_str());
  CHECK_FALSE(std::filesystem::exists(dir / "no such folder"));
  // A folder in the way of the file: it stays, and no temporary file is left behind.
  const auto folder = dir / "a folder";
  std::filesystem::create_directories(folder / "inside");
  SL_CHECK_THROWS(p.write_chrome_trace(folder.string()), IOError,
                  ("profiler: cannot write the trace to '" + folder.string() + "'").c_str());
  CHECK(std::filesystem::is_directory(folder / "inside"));
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 2);  // trace.json and the folder
  std::filesystem::remove_all(dir);
}

TEST_CASE("profiler: the summary lists rows by self time and the collectives") {
  profiler::start();
  const uint64_t gen = profiler::generation();
  const int64_t b = profiler::now_ns();
  profiler::record(gen, "long", Category::phase, b, b + 3'000'000);
  profiler::record(gen, "short", Category::kernel, b + 3'000'000, b + 4'000'000);
  profiler::record(gen, "reduce_scatter", Category::comm, b, b + 2'000'000, 8'000'000, true, 1);
  profiler::record(gen, "wait reduce_scatter", Category::wait, b + 1'000'000, b + 1'500'000);
  Profile p = profiler::stop();
  const std::string s = p.summary(2);
  CAPTURE(s);
  const size_t at_long = s.find("long"), at_short = s.find("short");
  REQUIRE(at_long != std::string::npos);
  REQUIRE(at_short != std::string::npos);
  CHECK(at_long < at_short);
  CHECK(s.find("3.000") != std::string::npos);
  CHECK(s.find("(1 more rows)") != std::string::npos);
  CHECK(s.find("reduce_scatter") != std::string::npos);
  CHECK(s.find("8.00 MB") != std::string::npos);
  const auto comm = p.comm_table();
  REQUIRE(comm.size() == 1);
  CHECK(comm[0].waited_ns == 500'000);
  CHECK(comm[0].in_flight_ns == 2'000'000);
}

TEST_CASE("profiler: the summary keeps one line per row whatever the names hold") {
  // A name with control characters is printed with C escapes, and a long one whole, so neither
  // breaks its row nor the lines after it (a 256-byte line buffer used to cut long names and
  // their newline off).
  const std::string long_name(400, 'n');
  profiler::start();
  const uint64_t gen = profiler::generation();
  const int64_t b = profiler::now_ns();
  profiler::record(gen, "a\nb\tc\x01", Category::phase, b, b + 3'000'000);
  profiler::record(gen, long_name.c_str(), Category::kernel, b + 3'000'000, b + 4'000'000);
  profiler::record(gen, "all\nreduce", Category::comm, b, b + 2'000'000, 1000, true, 1);
  Profile p = profiler::stop();
  const std::string s = p.summary();
  CAPTURE(s);
  CHECK(s.find("  phase     a\\nb\\tc\\x01\n") != std::string::npos);
  CHECK(s.find("  kernel    " + long_name + "\n") != std::string::npos);
  CHECK(s.find("  all\\nreduce") != std::string::npos);
  // every line of the summary is a header, a row or a known section line
  size_t lines = 0;
  for (size_t at = 0; at < s.size(); at = s.find('\n', at) + 1) ++lines;
  CHECK(lines == 6);  // profile line, header, 2 rows, "collectives ..." and its row
}

TEST_CASE("profiler: allocations and frees are memory samples; the peak names what was open") {
  const int64_t base = memory_stats().live_bytes;
  profiler::start();
  {
    profiler::Scope outer("outer phase", Category::phase);
    Tensor small = empty({10});  // 40 bytes
    {
      profiler::Scope inner("inner phase", Category::phase);
      Tensor big = empty({1 << 20});  // 4 MiB, freed when inner ends
    }
  }
  Profile p = profiler::stop();
  // The live bytes after each allocation and free, above what was live before.
  std::vector<int64_t> seen;
  for (const Event& e : p.events) {
    if (e.category != Category::memory) continue;
    CHECK(std::string_view(e.name) == "cpu memory");
    CHECK(e.duration_ns == 0);
    seen.push_back(e.bytes - base);
  }
  CHECK(seen == std::vector<int64_t>{40, 40 + (4 << 20), 40, 0});
  const auto peaks = p.memory_peaks();
  REQUIRE(peaks.size() == 1);
  CHECK(peaks[0].name == "cpu memory");
  CHECK(peaks[0].first_bytes == base + 40);
  CHECK(peaks[0].peak_bytes == base + 40 + (4 << 20));
  CHECK(peaks[0].last_bytes == base);
  CHECK(peaks[0].open == std::vector<std::string>{"outer phase", "inner phase"});
  // Samples are not intervals: no table rows, and they take no self time from the phases.
  const auto rows = p.table();
  CHECK(rows.size() == 2);
  for (const auto& r : rows) CHECK(r.category == Category::phase);
  const Profile::Row* inner = find_row(rows, "inner phase");
  REQUIRE(inner != nullptr);
  CHECK(inner->self_ns == inner->total_ns);
  CHECK(p.summary().find("cpu memory: peak ") != std::string::npos);
  CHECK(p.summary().find(", in outer phase > inner phase") != std::string::npos);
  // In the trace they are counter ("C") events with the live bytes.
  const serialize::Json doc = serialize::Json::parse(p.chrome_trace());
  std::vector<int64_t> counters;
  for (const serialize::Json& e : doc.at("traceEvents").items()) {
    if (e.at("ph").as_string() != "C") continue;
    CHECK(e.at("name").as_string() == "cpu memory");
    counters.push_back(e.at("args").at("bytes").as_int() - base);
  }
  CHECK(counters == seen);
}

TEST_CASE("profiler: gpu events on device tracks: busy time, their own rows in the summary") {
  // A profile as stop() makes one for a process with two GPUs (Note [Device timer]): the main
  // thread, then a track per device. Times in ms.
  constexpr int64_t ms = 1'000'000;
  auto event = [](const char* name, Category c, uint32_t thread, int64_t start, int64_t dur) {
    Event e;
    e.name = name;
    e.category = c;
    e.thread = thread;
    e.start_ns = start;
    e.duration_ns = dur;
    return e;
  };
  Profile p;
  p.threads = {"main", "cuda:0 stream", "cuda:1 stream"};
  p.duration_ns = 10 * ms;
  // cuda:0 runs a [1, 4) with a copy [1.5, 2) inside it, then b [4.5, 5.5); cuda:1 runs b [5, 7).
  p.events = {event("step", Category::phase, 0, 0, 9 * ms),
              event("a", Category::gpu, 1, 1 * ms, 3 * ms),
              event("a copy", Category::gpu, 1, 3 * ms / 2, ms / 2),
              event("a", Category::kernel, 0, 1 * ms, ms / 10),
              event("b", Category::gpu, 1, 9 * ms / 2, 1 * ms),
              event("b", Category::gpu, 2, 5 * ms, 2 * ms)};
  const auto busy = p.device_busy();
  REQUIRE(busy.size() == 2);
  CHECK(busy[0].track == "cuda:0 stream");
  CHECK(busy[0].events == 3);
  CHECK(busy[0].busy_ns == 3 * ms + 1 * ms);  // the copy adds nothing
  CHECK(busy[1].track == "cuda:1 stream");
  CHECK(busy[1].events == 1);
  CHECK(busy[1].busy_ns == 2 * ms);
  // Self times per track: a loses its copy; b's rows add up over both devices.
  const auto rows = p.table();
  const Profile::Row* a = nullptr;
  const Profile::Row* b = nullptr;
  for (const auto& r : rows) {
    if (r.category == Category::gpu && r.name == "a") a = &r;
    if (r.category == Category::gpu && r.name == "b") b = &r;
  }
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->self_ns == 3 * ms - ms / 2);
  CHECK(b->calls == 2);
  CHECK(b->self_ns == 3 * ms);
  const std::string s = p.summary();
  CAPTURE(s);
  CHECK(s.find("on 1 thread(s) and 2 device(s)") != std::string::npos);
  CHECK(s.find("  cuda:0 stream: busy 4.000 ms (40.0%), 3 gpu event(s)\n") != std::string::npos);
  CHECK(s.find("  cuda:1 stream: busy 2.000 ms (20.0%), 1 gpu event(s)\n") != std::string::npos);
  // The threads' rows first (no gpu row among them), then the devices' by self time.
  const size_t at_devices = s.find("cuda:0 stream: busy");
  const size_t at_step = s.find("phase     step");
  const size_t at_b = s.find("3.000   30.0%        3.000         2  gpu       b\n");
  const size_t at_a = s.find("2.500   25.0%        3.000         1  gpu       a\n");
  const size_t at_copy = s.find("gpu       a copy\n");
  REQUIRE(at_step != std::string::npos);
  REQUIRE(at_b != std::string::npos);
  REQUIRE(at_a != std::string::npos);
  REQUIRE(at_copy != std::string::npos);
  CHECK(at_step < at_devices);
  CHECK(s.find("gpu ") > at_devices);
  CHECK(at_devices < at_b);
  CHECK(at_b < at_a);
  CHECK(at_a < at_copy);
  // With one row per part: each part says how many it left out.
  const std::string one = p.summary(1);
  CAPTURE(one);
  CHECK(one.find("(1 more rows)") != std::string::npos);  // the kernel row a
  CHECK(one.find("(2 more rows)") != std::string::npos);  // gpu a and a copy
}
