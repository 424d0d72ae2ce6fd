// The profiler under mpirun (Note [Profiler]): every collective a training step issues is an
// event, with the bytes the group's own counters count, run on the communication thread and
// waited for once.
#include <map>
#include <string>

#include "../../support/testing.h"
#include "../support/tiny_training.h"
#include "dist/process_group.h"

using namespace sl;
using namespace sl::dist;
using profiler::Category;
using profiler::Event;

TEST_CASE("profiler: a step's collectives are events with the group's counted bytes") {
  for (const std::string kind : {"ddp", "zero1", "zero2"}) {
    CAPTURE(kind);
    auto pg = world();
    testing::TrainConfig cfg;
    testing::TinyTrainer t(kind, cfg, pg);
    t.run(0, 1);  // a first step outside the recording
    pg->reset_stats();
    profiler::start();
    t.run(1, 3);
    const profiler::Profile p = profiler::stop();
    const CommStats stats = pg->stats();
    REQUIRE(stats.total().calls > 0);

    struct Seen {
      int64_t in_flight = 0, bytes = 0, run = 0, waited = 0;
    };
    std::map<std::string, Seen> seen;
    std::map<std::string, int64_t> phases;
    for (const Event& e : p.events) {
      const std::string name = e.name;
      if (e.category == Category::comm && e.async) {
        seen[name].in_flight += 1;
        seen[name].bytes += e.bytes;
      } else if (e.category == Category::comm) {
        CHECK(p.threads[e.thread] == "communication");
        seen[name].run += 1;
      } else if (e.category == Category::wait) {
        REQUIRE(name.starts_with("wait "));
        seen[name.substr(5)].waited += 1;
      } else if (e.category == Category::phase) {
        phases[name] += 1;
      }
    }
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      const auto ck = static_cast<CollectiveKind>(k);
      const CommCounter& c = stats[ck];
      const std::string name = collective_name(ck);
      CAPTURE(name);
      const Seen s = seen[name];
      CHECK(s.in_flight == c.calls);
      CHECK(s.bytes == c.payload_bytes);
      CHECK(s.run == c.calls);     // the MPI backend runs each on its thread
      CHECK(s.waited == c.calls);  // the strategies wait for every collective exactly once
    }
    // Two steps, each with its phases; zero1/zero2 update their shard, then gather.
    CHECK(phases["gradient sync"] == 2);
    CHECK(phases["update parameters"] == 2);
    const bool sharded = kind != "ddp";
    CHECK(phases["optimizer (own shard)"] == (sharded ? 2 : 0));
    CHECK(phases["allgather parameters"] == (sharded ? 2 : 0));
  }
}
