// Greedy CTC decoding, edit distance and CER (models/ctc_decode.h) on hand-derived cases.
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

#include "models/ctc_decode.h"
#include "support/testing.h"

using namespace sl;
using models::character_error_rate;
using models::ctc_greedy_decode;
using models::edit_distance;
using models::LabelSequences;

namespace {

/// Scores [T, B, C] whose argmax at (t, b) is path[b][t] (1 there, 0 elsewhere; steps past a
/// path's end argmax to class C - 1, which the lengths must exclude).
Tensor one_hot_scores(const std::vector<std::vector<int64_t>>& paths, int64_t T, int64_t C) {
  const int64_t B = static_cast<int64_t>(paths.size());
  std::vector<float> v(static_cast<size_t>(T * B * C), 0.f);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t c = t < static_cast<int64_t>(paths[b].size()) ? paths[b][t] : C - 1;
      v[(t * B + b) * C + c] = 1.f;
    }
  }
  return from_vector(v, {T, B, C});
}

}  // namespace

TEST_CASE("ctc decode: greedy collapses repeats, then drops blanks, within each length") {
  // Sample 0: path A A _ A B _ _ B (A=1, B=2, blank 0) -> runs A, _, A, B, _, B -> "A A B B":
  // the blank between the two A's keeps them apart, and so does the one between the B's.
  // Sample 1: path _ C C C _ then 3 steps past its length 5 (class 3 = C there too, excluded).
  // Sample 2: length 0 -> nothing.
  Tensor s = one_hot_scores({{1, 1, 0, 1, 2, 0, 0, 2}, {0, 3, 3, 3, 0}, {}}, 8, 4);
  LabelSequences out = ctc_greedy_decode(s, tensor({int64_t{8}, int64_t{5}, int64_t{0}}));
  REQUIRE(out.size() == 3);
  CHECK(out[0] == std::vector<int64_t>{1, 1, 2, 2});
  CHECK(out[1] == std::vector<int64_t>{3});
  CHECK(out[2].empty());
  // Cut at 3 steps, sample 0 reads A A _ -> "A"; log-probabilities decode as their logits
  // (log_softmax keeps the argmax), and any blank index works.
  out = ctc_greedy_decode(log_softmax(s * 3.0, -1), tensor({int64_t{3}, int64_t{5}, int64_t{0}}));
  CHECK(out[0] == std::vector<int64_t>{1});
  out = ctc_greedy_decode(s, tensor({int64_t{8}, int64_t{5}, int64_t{0}}), /*blank=*/3);
  // blank 3: sample 0 keeps every run (A, _=0 is a label now, A, B, 0, B); sample 1: 0 then 0.
  CHECK(out[0] == std::vector<int64_t>{1, 0, 1, 2, 0, 2});
  CHECK(out[1] == std::vector<int64_t>{0, 0});
}

TEST_CASE("ctc decode: ties go to the lowest class, and f64 scores decode alike") {
  // Every step scores classes 1 and 2 equally: the first maximum (1) wins, collapsed to one.
  Tensor s = zeros({3, 1, 3}, {.dtype = DType::f64});
  s.narrow(2, 1, 2).fill_(2.0);
  CHECK(ctc_greedy_decode(s, tensor({int64_t{3}}))[0] == std::vector<int64_t>{1});
}

TEST_CASE("ctc decode: bad inputs are refused with clear errors") {
  Tensor s = zeros({4, 2, 3});
  Tensor len = tensor({int64_t{4}, int64_t{2}});
  SL_CHECK_THROWS(ctc_greedy_decode(zeros({4, 3}), len), ShapeError, "must be [T, B, C]");
  SL_CHECK_THROWS(ctc_greedy_decode(zeros({4, 2, 3}, {.dtype = DType::i64}), len), DTypeError,
                  "scores must be floating");
  SL_CHECK_THROWS(ctc_greedy_decode(s, tensor({int64_t{4}})), ShapeError, "lengths must be [2]");
  SL_CHECK_THROWS(ctc_greedy_decode(s, tensor({4.f, 2.f})), DTypeError, "must be int64");
  SL_CHECK_THROWS(ctc_greedy_decode(s, tensor({int64_t{5}, int64_t{2}})), ValueError,
                  "lengths[0] = 5 is outside [0, 4]");
  SL_CHECK_THROWS(ctc_greedy_decode(s, len, 3), ValueError, "blank 3 is not a class in [0, 3)");
}

TEST_CASE("ctc decode: edit distance on hand-counted cases") {
  using V = std::vector<int64_t>;
  auto word = [](const std::string& w) { return V(w.begin(), w.end()); };
  CHECK(edit_distance({}, {}) == 0);
  CHECK(edit_distance(word("abc"), {}) == 3);  // three deletions
  CHECK(edit_distance({}, word("ab")) == 2);   // two insertions
  CHECK(edit_distance(word("abc"), word("abc")) == 0);
  // kitten -> sitten (k->s), sittin (e->i), sitting (+g): 3, the textbook case
  CHECK(edit_distance(word("kitten"), word("sitting")) == 3);
  CHECK(edit_distance(word("sitting"), word("kitten")) == 3);
  // flaw -> lawn: delete f, insert n
  CHECK(edit_distance(word("flaw"), word("lawn")) == 2);
  // one substitution
  CHECK(edit_distance(word("ONE"), word("ONO")) == 1);
  // transposition costs 2 (no Damerau move)
  CHECK(edit_distance(word("ab"), word("ba")) == 2);
}

TEST_CASE("ctc decode: character error rate sums distances over reference lengths") {
  // "ONE" vs "ONO" (1 error of 3) and "" vs "TWO" (3 of 3): (1 + 3) / (3 + 3)
  LabelSequences hyp = {{15, 14, 15}, {}}, ref = {{15, 14, 5}, {20, 23, 15}};
  CHECK(character_error_rate(hyp, ref) == doctest::Approx(4.0 / 6.0).epsilon(1e-15));
  // a long hypothesis against a short reference: 3 insertions for 1 character -> CER 3
  CHECK(character_error_rate({{1, 2, 3, 4}}, {{1}}) == doctest::Approx(3.0).epsilon(1e-15));
  SL_CHECK_THROWS(character_error_rate({{1}}, {}), ValueError, "1 hypotheses for 0 references");
  SL_CHECK_THROWS(character_error_rate({{1}}, {{}}), ValueError, "every reference is empty");
}
