// PyTorch parity fixtures for the op tests: a minimal reader of the safetensors files that
// tools/gen_op_fixtures.py writes (see its docstring for the layout and naming).
//
// This reader trusts its input (files committed next to the tests); the hardened loader for
// user files is nn/serialize/safetensors.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

namespace sl::testing {

class Fixture {
 public:
  /// Loads tests/fixtures/ops/<family>.safetensors; throws IOError when missing or malformed.
  explicit Fixture(const std::string& family);
  /// The tensor "<case>/<what>"; throws ValueError naming the key when absent.
  Tensor get(const std::string& case_name, const std::string& what) const;
  bool has(const std::string& case_name, const std::string& what) const;
  /// A tensor as f64 (inputs are converted so gradchecks can reuse them).
  Tensor get_f64(const std::string& case_name, const std::string& what) const;
  /// The values of an i64 option tensor.
  std::vector<int64_t> ints(const std::string& case_name, const std::string& what) const;
  double number(const std::string& case_name, const std::string& what) const;
  /// Case names (the part before '/'), sorted, optionally only those starting with `prefix`.
  std::vector<std::string> cases(const std::string& prefix = "") const;

 private:
  std::map<std::string, Tensor> tensors_;
  std::string path_;
};

}  // namespace sl::testing
