// Eigen for the CPU kernels, configured once: every file of the library that uses Eigen includes
// it through this header, never <Eigen/...> directly.
//
// Note [Eigen's fast math]
// EIGEN_FAST_MATH defaults to 1, under which a float packet's sqrt is an rsqrt estimate plus one
// Newton step: 1-2 bits off the correctly rounded root, denormal results flushed to zero, +inf
// wrong. A scalar (a chunk's tail) still gets std::sqrt, so Adam's update of an element depended
// on where it sat in its chunk: a ZeRO shard, a view or another thread count could move it
// between the two and change its last bits, and it differed from PyTorch's and the CUDA kernels'
// correctly rounded sqrt. With 0 the packets use the sqrtps / vsqrtps instructions: correctly
// rounded, and still vectorised. The setting changes inline functions, so it must be the same in
// every file that includes Eigen (one definition per program): hence this header.
#pragma once

#if defined(EIGEN_FAST_MATH) && EIGEN_FAST_MATH != 0
#error "core/cpu/eigen.h: Eigen was configured with EIGEN_FAST_MATH before this header"
#endif
#ifndef EIGEN_FAST_MATH
#define EIGEN_FAST_MATH 0
#endif
#include <Eigen/Core>
