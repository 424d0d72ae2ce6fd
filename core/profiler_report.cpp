// What a Profile says: the self-time table, the collectives, the text summary and Chrome traces.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/json_string.h"
#include "core/profiler.h"

namespace sl::profiler {

namespace {

// Intervals that nest on their thread: not async events, not memory samples.
bool is_span(const Event& e) {
  return !e.async && e.category != Category::memory;
}

// Self time: per thread, each event loses the time of the events directly inside it. Events are
// sorted by start, enclosing ones first, so a stack of the open ones finds each event's parent.
std::vector<int64_t> self_times(const std::vector<Event>& events) {
  std::vector<int64_t> self(events.size(), 0);
  std::map<uint32_t, std::vector<size_t>> open;  // thread -> stack of event indices
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!is_span(e)) continue;
    self[i] = e.duration_ns;
    std::vector<size_t>& stack = open[e.thread];
    while (!stack.empty()) {
      const Event& top = events[stack.back()];
      if (top.start_ns + top.duration_ns > e.start_ns) break;
      stack.pop_back();
    }
    if (!stack.empty()) self[stack.back()] -= e.duration_ns;
    stack.push_back(i);
  }
  return self;
}

// `value / unit` printed with `fmt` ("%.3f", "%.2f MiB").
std::string scaled(const char* fmt, int64_t value, double unit) {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, static_cast<double>(value) / unit);
  return buf;
}
std::string ms(int64_t ns) {
  return scaled("%.3f", ns, 1e6);
}
std::string mebibytes(int64_t bytes) {
  return scaled("%.2f MiB", bytes, 1024.0 * 1024.0);
}
std::string megabytes(int64_t bytes) {
  return scaled("%.2f MB", bytes, 1e6);
}

// A name as the summary prints it: one line whatever it holds. Control characters become C
// escapes (\n, \t, \r, \xNN) so that a name cannot break a row or the lines after it.
std::string printable(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

// Microseconds with the nanoseconds kept: 1234567 ns -> "1234.567".
std::string micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
  return buf;
}

}  // namespace

std::vector<Profile::Row> Profile::table() const {
  const std::vector<int64_t> self = self_times(events);
  std::map<std::pair<Category, std::string_view>, Row> rows;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!is_span(e)) continue;
    Row& r = rows[{e.category, e.name}];
    r.category = e.category;
    r.name = e.name;
    r.calls += 1;
    r.total_ns += e.duration_ns;
    r.self_ns += self[i];
  }
  std::vector<Row> out;
  out.reserve(rows.size());
  for (auto& [key, r] : rows) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(),
                   [](const Row& a, const Row& b) { return a.self_ns > b.self_ns; });
  return out;
}

std::vector<Profile::CommRow> Profile::comm_table() const {
  std::map<std::string, CommRow> rows;
  for (const Event& e : events) {
    if (!e.async || e.category != Category::comm) continue;
    CommRow& r = rows[e.name];
    r.name = e.name;
    r.calls += 1;
    r.bytes += e.bytes;
    r.in_flight_ns += e.duration_ns;
  }
  for (const Event& e : events) {
    if (e.async || e.category != Category::wait) continue;
    std::string_view n = e.name;
    if (!n.starts_with("wait ")) continue;
    auto it = rows.find(std::string(n.substr(5)));
    if (it != rows.end()) it->second.waited_ns += e.duration_ns;
  }
  std::vector<CommRow> out;
  for (auto& [name, r] : rows) out.push_back(std::move(r));
  return out;
}

std::vector<Profile::MemoryPeak> Profile::memory_peaks() const {
  std::map<std::string, MemoryPeak> peaks;
  std::map<std::string, uint32_t> peak_thread;
  for (const Event& e : events) {
    if (e.category != Category::memory) continue;
    auto [it, fresh] = peaks.try_emplace(e.name);
    MemoryPeak& m = it->second;
    if (fresh) {
      m.name = e.name;
      m.first_bytes = m.peak_bytes = e.bytes;
      m.peak_at_ns = e.start_ns;
      peak_thread[e.name] = e.thread;
    } else if (e.bytes > m.peak_bytes) {
      m.peak_bytes = e.bytes;
      m.peak_at_ns = e.start_ns;
      peak_thread[e.name] = e.thread;
    }
    m.last_bytes = e.bytes;
  }
  std::vector<MemoryPeak> out;
  for (auto& [name, m] : peaks) {
    // What was open on the allocating thread at the peak, outermost first (events are sorted by
    // start, enclosing ones first).
    const uint32_t thread = peak_thread[name];
    for (const Event& e : events) {
      if (e.start_ns > m.peak_at_ns) break;
      if (is_span(e) && e.thread == thread && e.start_ns + e.duration_ns >= m.peak_at_ns) {
        m.open.emplace_back(e.name);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Profile::DeviceBusy> Profile::device_busy() const {
  // Per track, the union of its gpu events: sorted by start, so an event adds what lies past
  // the furthest end so far (nested ones add nothing).
  std::map<uint32_t, DeviceBusy> tracks;
  std::map<uint32_t, int64_t> covered_until;
  for (const Event& e : events) {
    if (e.category != Category::gpu) continue;
    auto [it, fresh] = tracks.try_emplace(e.thread);
    DeviceBusy& d = it->second;
    int64_t& until = covered_until[e.thread];
    if (fresh) {
      d.track = e.thread < threads.size() ? threads[e.thread] : "track " + std::to_string(e.thread);
      until = e.start_ns;
    }
    d.events += 1;
    const int64_t end = e.start_ns + e.duration_ns;
    d.busy_ns += std::max<int64_t>(0, end - std::max(e.start_ns, until));
    until = std::max(until, end);
  }
  std::vector<DeviceBusy> out;
  for (auto& [track, d] : tracks) out.push_back(std::move(d));
  return out;
}

std::string Profile::summary(size_t rows) const {
  std::set<uint32_t> active, device_tracks;
  for (const Event& e : events)
    (e.category == Category::gpu ? device_tracks : active).insert(e.thread);
  char line[256];
  std::snprintf(line, sizeof line, "profile: %s ms, %zu event(s) on %zu thread(s)",
                ms(duration_ns).c_str(), events.size(), active.size());
  std::string out = line;
  if (!device_tracks.empty()) out += " and " + std::to_string(device_tracks.size()) + " device(s)";
  if (dropped > 0) {
    out += ", " + std::to_string(dropped) + " dropped (past max_events)";
  }
  out += "\n";
  const std::vector<Row> t = table();
  const double wall = static_cast<double>(std::max<int64_t>(duration_ns, 1));
  // The rows of the host's threads, or of the devices' tracks.
  auto print_rows = [&](bool gpu) {
    std::snprintf(line, sizeof line, "%12s %7s %12s %9s  %-9s %s\n", "self ms", "self %",
                  "total ms", "calls", "category", "name");
    out += line;
    size_t shown = 0, more = 0;
    for (const Row& r : t) {
      if ((r.category == Category::gpu) != gpu) continue;
      if (shown == rows) {
        ++more;
        continue;
      }
      ++shown;
      // the name after the fixed-width columns, outside the buffer: any length, one line
      std::snprintf(line, sizeof line, "%12s %6.1f%% %12s %9" PRId64 "  %-9s ",
                    ms(r.self_ns).c_str(), 100.0 * static_cast<double>(r.self_ns) / wall,
                    ms(r.total_ns).c_str(), r.calls, category_name(r.category));
      out += line + printable(r.name) + "\n";
    }
    if (more > 0) out += "(" + std::to_string(more) + " more rows)\n";
  };
  print_rows(false);
  const std::vector<DeviceBusy> busy = device_busy();
  if (!busy.empty()) {
    out +=
        "on the devices (gpu: a kernel call's time on its device's stream; busy: their "
        "union):\n";
    for (const DeviceBusy& d : busy) {
      std::snprintf(line, sizeof line, ": busy %s ms (%.1f%%), %" PRId64 " gpu event(s)\n",
                    ms(d.busy_ns).c_str(), 100.0 * static_cast<double>(d.busy_ns) / wall, d.events);
      out += "  " + printable(d.track) + line;
    }
    print_rows(true);
  }
  const std::vector<CommRow> c = comm_table();
  if (!c.empty()) {
    out += "collectives (in flight: issue to completion; waited: callers blocked in wait()):\n";
    for (const CommRow& r : c) {
      std::string name = printable(r.name);
      if (name.size() < 15) name.append(15 - name.size(), ' ');
      std::snprintf(
          line, sizeof line, " %6" PRId64 " call(s) %12s  in flight %10s ms  waited %10s ms\n",
          r.calls, megabytes(r.bytes).c_str(), ms(r.in_flight_ns).c_str(), ms(r.waited_ns).c_str());
      out += "  " + name + line;
    }
  }
  for (const MemoryPeak& m : memory_peaks()) {
    std::string where;
    for (const std::string& n : m.open) where += (where.empty() ? "" : " > ") + printable(n);
    std::snprintf(line, sizeof line, ": peak %s at %s ms (first %s, last %s)",
                  mebibytes(m.peak_bytes).c_str(), ms(m.peak_at_ns).c_str(),
                  mebibytes(m.first_bytes).c_str(), mebibytes(m.last_bytes).c_str());
    out += printable(m.name) + line;
    out += where.empty() ? "\n" : ", in " + where + "\n";
  }
  return out;
}

std::string Profile::chrome_trace(int pid, const std::string& process_name) const {
  std::string out =
      "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped\":" + std::to_string(dropped) +
      "},\"traceEvents\":[";
  const std::string pid_s = std::to_string(pid);
  bool first = true;
  auto open = [&](const char* ph) {
    if (!first) out += ",\n";
    first = false;
    out += "{\"ph\":\"";
    out += ph;
    out += "\",\"pid\":" + pid_s + ",";
  };
  if (!process_name.empty()) {
    open("M");
    out += "\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":";
    json_escape_string(process_name, out);
    out += "}}";
  }
  for (size_t t = 0; t < threads.size(); ++t) {
    open("M");
    out += "\"tid\":" + std::to_string(t) + ",\"name\":\"thread_name\",\"args\":{\"name\":";
    json_escape_string(threads[t], out);
    out += "}}";
  }
  for (const Event& e : events) {
    auto head = [&](const char* ph, int64_t ts) {
      open(ph);
      out += "\"tid\":" + std::to_string(e.thread) + ",\"ts\":" + micros(ts) + ",\"name\":";
      json_escape_string(e.name, out);
      out += ",\"cat\":\"";
      out += category_name(e.category);
      out += "\"";
    };
    if (e.category == Category::memory) {
      head("C", e.start_ns);
      out += ",\"args\":{\"bytes\":" + std::to_string(e.bytes) + "}}";
    } else if (e.async) {
      head("b", e.start_ns);
      out += ",\"id\":" + std::to_string(e.id) + ",\"args\":{\"bytes\":" + std::to_string(e.bytes) +
             "}}";
      head("e", e.start_ns + e.duration_ns);
      out += ",\"id\":" + std::to_string(e.id) + "}";
    } else {
      head("X", e.start_ns);
      out += ",\"dur\":" + micros(e.duration_ns);
      if (e.bytes != 0) out += ",\"args\":{\"bytes\":" + std::to_string(e.bytes) + "}";
      out += "}";
    }
  }
  out += "]}\n";
  return out;
}

void Profile::write_chrome_trace(const std::string& path, int pid,
                                 const std::string& process_name) const {
  const std::string text = chrome_trace(pid, process_name);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    SL_CHECK_IO(f.is_open(), "profiler: cannot write the trace to '", path, "': cannot create '",
                tmp, "' (", std::strerror(errno), ")");
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.close();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      sl::detail::throw_error<IOError>("profiler: cannot write the trace to '", path,
                                       "': writing '", tmp, "' failed (", std::strerror(errno),
                                       ")");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    sl::detail::throw_error<IOError>("profiler: cannot write the trace to '", path,
                                     "': ", ec.message());
  }
}

}  // namespace sl::profiler
