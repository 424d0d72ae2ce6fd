// The ranges by which the CUDA upsample backward gathers (core/ops/upsample_index.h), on the host
// so they run on every machine: for many sizes and scales, the outputs that nearest_readers /
// linear_readers / cubic_readers / aa_readers give for each input position hold every output whose
// taps include it (by brute force over all outputs), and (nearest, antialias) no output outside
// the range reads it; antialias windows lie inside the input and their weights sum to 1.
#include <vector>

#include "core/ops/upsample_index.h"
#include "support/testing.h"

using namespace sl;

namespace {
struct Dim {
  int64_t in, out;
  double scale;  // 0: none given
};

std::vector<Dim> dims() {
  std::vector<Dim> d;
  for (int64_t in = 1; in <= 9; ++in) {
    for (int64_t out = 1; out <= 23; ++out) d.push_back({in, out, 0.0});
    for (double s : {0.3, 0.5, 0.7, 1.0, 1.1, 1.7, 2.0, 2.05, 2.5, 3.0}) {
      const auto out = static_cast<int64_t>(static_cast<double>(in) * s);
      if (out >= 1) d.push_back({in, out, s});
    }
  }
  return d;
}
}  // namespace

template <class A>
void check_nearest_readers(bool exact) {
  for (const Dim& d : dims()) {
    CAPTURE(d.in);
    CAPTURE(d.out);
    CAPTURE(d.scale);
    for (int64_t i = 0; i < d.in; ++i) {
      int64_t lo = 0, hi = 0;
      upsample::nearest_readers<A>(i, d.in, d.out, d.scale, exact, lo, hi);
      for (int64_t o = 0; o < d.out; ++o) {
        const bool reads = upsample::nearest_source<A>(o, d.in, d.out, d.scale, exact) == i;
        CHECK(reads == (o >= lo && o < hi));
      }
    }
  }
}

TEST_CASE("upsample gather ranges: nearest readers are exactly the outputs that read i") {
  for (bool exact : {false, true}) {
    CAPTURE(exact);
    check_nearest_readers<float>(exact);
    check_nearest_readers<double>(exact);
  }
}

TEST_CASE("upsample gather ranges: linear readers hold every output with a tap at i") {
  for (bool align_corners : {false, true}) {
    for (const Dim& d : dims()) {
      CAPTURE(align_corners);
      CAPTURE(d.in);
      CAPTURE(d.out);
      CAPTURE(d.scale);
      const float r = upsample::linear_ratio<float>(d.in, d.out, align_corners, d.scale);
      for (int64_t i = 0; i < d.in; ++i) {
        int64_t lo = 0, hi = 0;
        upsample::linear_readers<float>(i, d.in, d.out, r, align_corners, lo, hi);
        for (int64_t o = 0; o < d.out; ++o) {
          const auto t = upsample::linear_source<float>(o, d.in, d.out, r, align_corners);
          CHECK(t.i0 >= 0);
          CHECK(t.i1 < d.in);
          if (t.i0 == i || t.i1 == i) CHECK((o >= lo && o < hi));
        }
      }
    }
  }
}

TEST_CASE("upsample gather ranges: cubic readers hold every output with a (clamped) tap at i") {
  for (bool align_corners : {false, true}) {
    for (const Dim& d : dims()) {
      CAPTURE(align_corners);
      CAPTURE(d.in);
      CAPTURE(d.out);
      CAPTURE(d.scale);
      const float r = upsample::linear_ratio<float>(d.in, d.out, align_corners, d.scale);
      for (int64_t i = 0; i < d.in; ++i) {
        int64_t lo = 0, hi = 0;
        upsample::cubic_readers<float>(i, d.in, d.out, r, align_corners, lo, hi);
        for (int64_t o = 0; o < d.out; ++o) {
          const auto t = upsample::cubic_source<float>(o, d.in, r, align_corners);
          bool reads = false;
          for (int k = 0; k < 4; ++k) {
            CHECK((t.i[k] >= 0 && t.i[k] < d.in));
            reads = reads || t.i[k] == i;
          }
          if (reads) CHECK((o >= lo && o < hi));
        }
      }
    }
  }
}

template <class A>
void check_aa_readers(bool cubic, bool align_corners) {
  for (const Dim& d : dims()) {
    CAPTURE(d.in);
    CAPTURE(d.out);
    CAPTURE(d.scale);
    const A r = upsample::linear_ratio<A>(d.in, d.out, align_corners, d.scale);
    for (int64_t o = 0; o < d.out; ++o) {
      const auto w = upsample::aa_window<A>(o, d.in, r, cubic);
      CHECK(w.lo >= 0);
      CHECK(w.size >= 1);
      CHECK(w.lo + w.size <= d.in);
      A sum = 0;
      for (int64_t j = 0; j < w.size; ++j) sum += w.weight(j);
      CHECK(static_cast<double>(sum) == doctest::Approx(1.0).epsilon(1e-5));
    }
    for (int64_t i = 0; i < d.in; ++i) {
      int64_t lo = 0, hi = 0;
      upsample::aa_readers<A>(i, d.in, d.out, r, cubic, lo, hi);
      for (int64_t o = 0; o < d.out; ++o) {
        const auto w = upsample::aa_window<A>(o, d.in, r, cubic);
        CHECK((i >= w.lo && i < w.lo + w.size) == (o >= lo && o < hi));
      }
    }
  }
}

TEST_CASE("upsample gather ranges: antialias readers are exactly the windows holding i") {
  for (bool cubic : {false, true}) {
    for (bool align_corners : {false, true}) {
      CAPTURE(cubic);
      CAPTURE(align_corners);
      check_aa_readers<float>(cubic, align_corners);
      check_aa_readers<double>(cubic, align_corners);
    }
  }
}
