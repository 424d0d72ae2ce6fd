// The op-case table: one list of cases for every core op, each with its inputs (shapes
// including broadcasting, 0-d and zero-size dims, non-contiguous layouts, negative dims), the
// dtypes it runs in, the call under test and a float64 reference computed with plain loops
// (tests/core/ref.h). tests/core/test_op_table.cpp runs every case on every device in every
// listed dtype; tests/autograd/test_gradcheck.cpp runs gradcheck on every differentiable case.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/ref.h"

namespace sl::testing {

/// How input values are drawn (deterministically, from the case's name).
enum class Domain {
  any,       ///< uniform in [-2, 2] (integers: [-5, 5])
  positive,  ///< uniform in [0.5, 2.5] (integers: [1, 5])
  unit,      ///< uniform in (-0.9, 0.9) (integers: [-1, 1])
  grid,      ///< multiples of 0.5 in [-2, 2]: produces ties on purpose (integers: [-3, 3])
  wide,      ///< uniform in [-60, 60]: overflows a naive exp in every dtype (integers: [-50, 50])
  special,   ///< cycles through nan, inf, -inf, 0, -0, 1.5, -2 (floating only)
  boolean,   ///< true/false (the input is bool whatever the case's dtype)
  index,     ///< int64 in [0, bound)
};

/// How the input tensor is laid out in memory (values are the same logical array).
enum class Layout {
  contiguous,
  transposed,  ///< last two dims swapped in memory (needs >= 2 dims)
  strided,     ///< every other element of a twice-longer last dim
  expanded,    ///< dim 0 broadcast from size 1 (stride 0; all rows alias)
};

struct InputSpec {
  Shape shape;
  Domain domain = Domain::any;
  Layout layout = Layout::contiguous;
  int64_t bound = 0;  ///< Domain::index: values in [0, bound)
  /// For gradcheck: whether this (floating) input gets requires_grad.
  bool differentiable = true;
  /// Keep this input in float64/float32... regardless of the case's dtype (e.g. a float input
  /// of a mixed-dtype case); unset = the case's dtype (or bool / int64 per domain).
  std::optional<DType> dtype;
};

struct Tolerance {
  double rtol = 0, atol = 0;
};

struct OpCase {
  std::string op;    ///< the op under test, for coverage ("softmax", "index_select", ...)
  std::string name;  ///< unique description of the case
  std::vector<InputSpec> inputs;
  std::vector<DType> dtypes;
  std::function<TensorList(const TensorList&)> run;
  std::function<std::vector<Ref>(const std::vector<Ref>&)> ref;
  /// Run gradcheck (f64, CPU) on output 0 w.r.t. the differentiable inputs.
  bool grad = true;
  /// Per-dtype tolerance overrides; each one has its reason in the case's file.
  std::map<DType, Tolerance> tol;
};

/// Shorthands for the case files.
inline InputSpec in(Shape s, Domain d = Domain::any, Layout l = Layout::contiguous) {
  InputSpec i;
  i.shape = std::move(s);
  i.domain = d;
  i.layout = l;
  return i;
}
inline InputSpec index_in(Shape s, int64_t bound, DType dt = DType::i64) {
  InputSpec i;
  i.shape = std::move(s);
  i.domain = Domain::index;
  i.bound = bound;
  i.dtype = dt;
  i.differentiable = false;
  return i;
}
inline InputSpec bool_in(Shape s) {
  InputSpec i;
  i.shape = std::move(s);
  i.domain = Domain::boolean;
  i.differentiable = false;
  return i;
}

/// Default tolerances per result dtype (reasons in op_cases.cpp).
Tolerance default_tolerance(DType dt);

/// Dtype sets most cases use.
extern const std::vector<DType> kFloatDTypes;    // f32 f64 f16 bf16
extern const std::vector<DType> kNumericDTypes;  // floats + i64 i32
extern const std::vector<DType> kAllDTypes;      // numeric + bool

std::vector<OpCase> elementwise_cases();
std::vector<OpCase> reduce_cases();
std::vector<OpCase> matmul_cases();
std::vector<OpCase> view_cases();
std::vector<OpCase> softmax_index_cases();
std::vector<OpCase> shape_sort_cases();
std::vector<OpCase> inplace_cases();
std::vector<OpCase> inplace_cases();
std::vector<OpCase> conv_cases();
/// All of the above.
const std::vector<OpCase>& all_op_cases();

/// The inputs of a case in `dtype` on `device`: values drawn per spec, layout applied on the
/// device. With requires_grad, differentiable floating inputs require grad (for gradcheck).
TensorList make_inputs(const OpCase& c, DType dtype, Device device, bool requires_grad = false);
/// A case's floating outputs flattened and joined into one tensor (so that gradcheck and
/// gradgradcheck check a multi-output op whole), as a function of its inputs.
std::function<Tensor(const TensorList&)> joined_float_outputs(const OpCase& c);
/// Whether any of the inputs requires grad.
bool any_requires_grad(const TensorList& inputs);
/// The logical values of a tensor as a reference array.
Ref to_ref(const Tensor& t);
/// A float64 CPU tensor holding a reference array.
Tensor from_ref(const Ref& r);

/// The core ops that must each have at least one case (checked by test_op_table.cpp).
const std::vector<std::string>& required_ops();
/// The differentiable ops that must each have at least one gradcheck (test_gradcheck.cpp).
const std::vector<std::string>& required_grad_ops();

}  // namespace sl::testing
