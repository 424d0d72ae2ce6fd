// Greedy CTC decoding, edit distance and CER (see ctc_decode.h).
#include "ctc_decode.h"

#include <algorithm>

#include "core/error.h"
#include "core/shape.h"

namespace sl::models {

LabelSequences ctc_greedy_decode(const Tensor& scores, const Tensor& lengths, int64_t blank) {
  SL_CHECK_SHAPE(scores.defined() && scores.dim() == 3,
                 "ctc_greedy_decode: scores must be [T, B, C], got ",
                 scores.defined() ? shape_str(scores.sizes()) : "an undefined tensor");
  SL_CHECK_DTYPE(scores.is_floating_point(), "ctc_greedy_decode: scores must be floating, got ",
                 dtype_name(scores.dtype()));
  const int64_t T = scores.size(0), B = scores.size(1), C = scores.size(2);
  SL_CHECK_SHAPE(lengths.defined() && lengths.dim() == 1 && lengths.size(0) == B,
                 "ctc_greedy_decode: lengths must be [", B, "] (one per sample), got ",
                 lengths.defined() ? shape_str(lengths.sizes()) : "an undefined tensor");
  SL_CHECK_DTYPE(lengths.dtype() == DType::i64, "ctc_greedy_decode: lengths must be int64, got ",
                 dtype_name(lengths.dtype()));
  SL_CHECK(blank >= 0 && blank < C, "ctc_greedy_decode: blank ", blank, " is not a class in [0, ",
           C, ")");
  const std::vector<int64_t> lens = lengths.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    SL_CHECK(lens[b] >= 0 && lens[b] <= T, "ctc_greedy_decode: lengths[", b, "] = ", lens[b],
             " is outside [0, ", T, "]");
  }
  // In f64 on the host: exact for every floating dtype, so ties are ties.
  const std::vector<double> v = scores.to_vector<double>();
  LabelSequences out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    int64_t prev = -1;
    for (int64_t t = 0; t < lens[b]; ++t) {
      const double* row = v.data() + (t * B + b) * C;
      const int64_t best = std::max_element(row, row + C) - row;  // the first maximum
      if (best != prev && best != blank) out[b].push_back(best);
      prev = best;
    }
  }
  return out;
}

int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  // One row of the dynamic-programming table: row[j] = distance(a[:i], b[:j]).
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diag = row[0];  // distance(a[:i-1], b[:j-1])
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int64_t up = row[j];  // distance(a[:i-1], b[:j])
      row[j] = std::min({up + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

double character_error_rate(const LabelSequences& hypotheses, const LabelSequences& references) {
  SL_CHECK(hypotheses.size() == references.size(), "character_error_rate: ", hypotheses.size(),
           " hypotheses for ", references.size(), " references");
  int64_t errors = 0, chars = 0;
  for (size_t i = 0; i < references.size(); ++i) {
    errors += edit_distance(hypotheses[i], references[i]);
    chars += static_cast<int64_t>(references[i].size());
  }
  SL_CHECK(chars > 0, "character_error_rate: every reference is empty (", references.size(),
           " of them)");
  return static_cast<double>(errors) / static_cast<double>(chars);
}

}  // namespace sl::models
