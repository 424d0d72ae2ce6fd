// Tensor::str(): PyTorch's repr (torch/_tensor_str.py), reimplemented: the same number formats
// (integer mode "1.", fixed "{:.4f}", scientific "{:.4e}"), right-aligned columns, wrapping at
// 80 characters, summarisation with "..." beyond 1000 elements, and the dtype / device /
// requires_grad / grad_fn suffixes.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/ops/copy.h"

namespace sl {

namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

struct Formatter {
  DType dtype;
  bool int_mode = true;
  bool sci_mode = false;
  size_t width = 1;

  // integer tensors print from the int64 value: through a double, 2^53 + 1 would print as 2^53
  std::string format(Scalar value) const {
    char buf[64];
    if (is_bool(dtype)) return value.to_bool() ? "True" : "False";
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value.to_int()));
      return buf;
    }
    const double v = value.to_double();
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else if (int_mode) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }

  std::string padded(Scalar v) const {
    std::string s = format(v);
    if (s.size() < width) s = std::string(width - s.size(), ' ') + s;
    return s;
  }
};

/// Values that will be shown (the summarised set when summarising).
void collect(const Tensor& t, bool summarize, std::vector<Scalar>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item());
    return;
  }
  int64_t n = t.size(0);
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) collect(t.select(0, i), summarize, out);
    for (int64_t i = n - kEdgeItems; i < n; ++i) collect(t.select(0, i), summarize, out);
  } else {
    for (int64_t i = 0; i < n; ++i) collect(t.select(0, i), summarize, out);
  }
}

Formatter make_formatter(const Tensor& t, bool summarize) {
  Formatter f{t.dtype()};
  std::vector<Scalar> vals;
  collect(t, summarize, vals);
  if (is_floating(t.dtype())) {
    std::vector<double> finite;
    for (Scalar s : vals) {
      const double v = s.to_double();
      if (std::isfinite(v) && v != 0.0) finite.push_back(std::fabs(v));
      if (std::isfinite(v) && std::ceil(v) != v) f.int_mode = false;
    }
    if (!finite.empty()) {
      double mx = *std::max_element(finite.begin(), finite.end());
      double mn = *std::min_element(finite.begin(), finite.end());
      if (f.int_mode) {
        f.sci_mode = mx / mn > 1000.0 || mx > 1e8;
      } else {
        f.sci_mode = mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4;
      }
    }
  }
  // as PyTorch: a floating column is as wide as its widest nonzero finite value; "nan", "inf"
  // and zeros neither widen it nor are padded beyond their own width
  f.width = 1;
  for (Scalar v : vals) {
    const double d = v.to_double();
    if (is_floating(t.dtype()) && (!std::isfinite(d) || d == 0.0)) continue;
    f.width = std::max(f.width, f.format(v).size());
  }
  return f;
}

void render(const Tensor& t, const Formatter& f, bool summarize, int indent, std::string& out) {
  if (t.dim() == 0) {
    out += f.format(t.item());
    return;
  }
  int64_t n = t.size(0);
  bool cut = summarize && n > 2 * kEdgeItems;
  if (t.dim() == 1) {
    size_t elem_len = f.width + 2;
    int64_t per_line =
        std::max<int64_t>(1, static_cast<int64_t>((kLineWidth - indent) / static_cast<int>(elem_len)));
    std::vector<std::string> items;
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == kEdgeItems) {
        items.push_back(" ...");  // PyTorch's item: ",  ..., " within a row
        i = n - kEdgeItems - 1;
        continue;
      }
      items.push_back(f.padded(t.select(0, i).item()));
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) {
        out += ',';
        if (static_cast<int64_t>(i) % per_line == 0) {
          out += '\n';
          out += std::string(static_cast<size_t>(indent + 1), ' ');
        } else {
          out += ' ';
        }
      }
      out += items[i];
    }
    out += ']';
    return;
  }
  out += '[';
  // built by appends: GCC 12 reports a false -Wrestrict for "," + std::string(...)
  std::string sep = ",";
  sep.append(static_cast<size_t>(t.dim() - 1), '\n');
  sep.append(static_cast<size_t>(indent + 1), ' ');
  bool first = true;
  for (int64_t i = 0; i < n; ++i) {
    if (!first) out += sep;
    first = false;
    if (cut && i == kEdgeItems) {
      out += "...";
      i = n - kEdgeItems - 1;
      continue;
    }
    render(t.select(0, i), f, summarize, indent + 1, out);
  }
  out += ']';
}

std::string shape_tuple(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  if (s.size() == 1) r += ",";
  return r + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  Tensor host = ops::to_device(detach(), kCPU);
  std::string out = "tensor(";
  std::vector<std::string> suffix;
  if (numel() == 0) {
    out += "[]";
    if (dim() != 1) suffix.push_back("size=" + shape_tuple(sizes()));
  } else {
    bool summarize = numel() > kThreshold;
    Formatter f = make_formatter(host, summarize);
    render(host, f, summarize, 7, out);
  }
  if (device() != kCPU) suffix.push_back("device='" + device().str() + "'");
  // as PyTorch: an empty tensor names every dtype but the default float one (its "[]" shows no
  // values to tell int64 or bool apart)
  bool default_dtype =
      dtype() == kDefaultFloat || (numel() > 0 && (dtype() == DType::i64 || dtype() == DType::b8));
  if (!default_dtype) suffix.push_back(std::string("dtype=torch.") + dtype_name(dtype()));
  if (grad_fn()) {
    suffix.push_back(std::string("grad_fn=<") + grad_fn()->name() + ">");
  } else if (requires_grad()) {
    suffix.push_back("requires_grad=True");
  }
  for (const auto& s : suffix) out += ", " + s;
  return out + ")";
}

}  // namespace sl
