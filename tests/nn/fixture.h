// PyTorch reference fixtures for the nn parity tests (made by tools/gen_nn_fixtures.py; see the
// key layout in its docstring).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/module.h"
#include "support/testing.h"

namespace sl::testing {

/// One fixture file, tests/fixtures/nn/<family>.safetensors (or another folder's), read whole.
class Fixture {
 public:
  /// Reads <dir>/<family>.safetensors; an empty dir means the nn fixtures (SL_NN_FIXTURES).
  explicit Fixture(const std::string& family, const std::string& dir = "");
  bool has(const std::string& key) const { return tensors_.contains(key); }
  /// The tensor under key; fails the test (throws) when absent.
  Tensor get(const std::string& key) const;
  /// The string under key in the file's __metadata__ (state dict key lists, reprs); fails the
  /// test (throws) when absent.
  std::string meta(const std::string& key) const;
  /// Loads "<case>.param.*" into m by name, strictly: every name must match PyTorch's.
  void load_params(nn::Module& m, const std::string& test_case) const;
  /// Input i of a case, marked requires_grad when floating.
  Tensor input(const std::string& test_case, int i) const;
  /// Checks output j and, after backward with the stored upstream gradients, the input and
  /// parameter gradients. `outs` are the forward outputs (in order), `ins` the inputs passed.
  void check_backward(const std::string& test_case, const TensorList& outs, const TensorList& ins,
                      const nn::Module* m, double rtol, double atol) const;

 private:
  std::string family_;
  nn::StateDict tensors_;
  std::map<std::string, std::string> metadata_;
};

/// gradcheck over fn's inputs and every parameter of m (m must be float64). The analytic pass
/// runs with m's own parameters; for the numerical pass, the perturbed copies are written into
/// m's parameters for the call and the originals restored after.
bool module_gradcheck(nn::Module& m, const std::function<Tensor(const TensorList&)>& fn,
                      const TensorList& inputs, const GradcheckOptions& opts = {});

/// A metadata key list ("a\nb\nc"; "" for an empty state dict) as a vector of its lines.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace sl::testing
