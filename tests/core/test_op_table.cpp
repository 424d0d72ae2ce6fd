// Runs the op-case table (tests/core/op_cases*.cpp): every case, on every device from
// test_devices(), in every dtype it lists, against its float64 reference.
#include <cmath>
#include <cstring>
#include <set>

#include "core/op_cases.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::testing;

namespace {

bool same_bits(const Ref& a, const Ref& b) {
  return a.shape == b.shape && a.v.size() == b.v.size() &&
         (a.v.empty() || std::memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(double)) == 0);
}

/// Runs one case; returns false when the device has no kernel for it (reported as a skip).
bool run_case(const OpCase& c, DType dt, Device dev) {
  INFO("case '" << c.name << "' dtype " << std::string(dtype_name(dt)) << " on " << dev.str());
  TensorList inputs = make_inputs(c, dt, dev);
  std::vector<Ref> ref_in;
  for (const Tensor& t : inputs) ref_in.push_back(to_ref(t));
  TensorList out;
  try {
    out = c.run(inputs);
  } catch (const DeviceError& e) {
    if (!dev.is_cpu() && std::strstr(e.what(), "no kernel for device type")) {
      report_skip(c.op + " on " + dev.str(), "no kernel for this device yet");
      return false;
    }
    throw;
  }
  std::vector<Ref> expect = c.ref(ref_in);
  REQUIRE(out.size() == expect.size());
  for (size_t k = 0; k < out.size(); ++k) {
    INFO("output " << k);
    DType want = expect[k].dtype.value_or(dt);
    CHECK(out[k].device() == dev);
    CHECK(out[k].dtype() == want);
    auto it = c.tol.find(want);
    Tolerance tol = it != c.tol.end() ? it->second : default_tolerance(want);
    SL_CHECK_CLOSE(out[k], from_ref(expect[k]), tol.rtol, tol.atol);
  }
  // out-of-place ops never write to their inputs
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i << " was modified");
    CHECK(same_bits(to_ref(inputs[i]), ref_in[i]));
  }
  return true;
}

}  // namespace

TEST_CASE("op table: every core op has at least one case, names are unique") {
  std::set<std::string> ops, names;
  for (const OpCase& c : all_op_cases()) {
    ops.insert(c.op);
    CHECK_MESSAGE(names.insert(c.name).second, "duplicate case name: " << c.name);
    CHECK_MESSAGE(!c.dtypes.empty(), c.name << " lists no dtypes");
  }
  for (const std::string& op : required_ops()) {
    CHECK_MESSAGE(ops.count(op) == 1, "no op case for " << op);
  }
}

TEST_CASE("op table: the comparison catches a wrong reference (self-test of the runner)") {
  // A reference off by one ulp-scale amount in one element must be reported for float64, and
  // any difference for int64; otherwise the table could pass without checking anything.
  for (const OpCase& c : all_op_cases()) {
    if (c.op != "add") continue;
    for (DType dt : {DType::f64, DType::i64}) {
      TensorList inputs = make_inputs(c, dt, kCPU);
      std::vector<Ref> ref_in;
      for (const Tensor& t : inputs) ref_in.push_back(to_ref(t));
      Tensor out = c.run(inputs)[0];
      Ref expect = c.ref(ref_in)[0];
      if (expect.numel() == 0) continue;
      Tolerance tol = default_tolerance(dt);
      CHECK(compare(out, from_ref(expect), tol.rtol, tol.atol).empty());
      expect.v[0] += dt == DType::i64 ? 1.0 : 1e-6 * (1.0 + std::fabs(expect.v[0]));
      CHECK_FALSE(compare(out, from_ref(expect), tol.rtol, tol.atol).empty());
    }
    break;
  }
}

TEST_CASE("op table: results match the float64 reference on every device and dtype") {
  int64_t runs = 0, skipped = 0;
  for (Device dev : test_devices()) {
    for (const OpCase& c : all_op_cases()) {
      for (DType dt : c.dtypes) {
        try {
          if (run_case(c, dt, dev))
            ++runs;
          else
            ++skipped;
        } catch (const std::exception& e) {
          FAIL_CHECK("case '" << c.name << "' dtype " << std::string(dtype_name(dt)) << " on "
                              << dev.str() << " threw: " << e.what());
        }
      }
    }
  }
  MESSAGE("op table: " << all_op_cases().size() << " cases, " << runs << " runs, " << skipped
                       << " skipped (no kernel on the device)");
  CHECK(runs > 0);
}
