// Which CPU BLAS the matmul family calls, and which kernels it runs (core/cpu/blas_select.cpp).
#pragma once

#include <string>

namespace sl {

/// What the library found out about its CPU BLAS when it loaded.
struct BlasInfo {
  /// The BLAS's own description ("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... Cooperlake"), or
  /// "cblas" for a BLAS that does not describe itself, or "none" (Eigen only).
  std::string config;
  /// Kernel set in use ("Cooperlake", "Haswell", ...); empty when the BLAS does not say.
  std::string core;
  /// Kernel set the BLAS chose for itself at load; differs from `core` only when
  /// Note [BLAS kernel selection] replaced it.
  std::string detected_core;
  /// One line on how `core` was arrived at (chosen by the BLAS, forced by OPENBLAS_CORETYPE,
  /// or replaced, and why).
  std::string note;
};

/// The CPU BLAS description above; computed once, when the library loads (before any BLAS call).
const BlasInfo& blas_info();

}  // namespace sl
