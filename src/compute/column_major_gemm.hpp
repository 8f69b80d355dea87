#pragma once
// A row-major GEMM restated for a column-major BLAS (cuBLAS). A row-major matrix read
// column-major is its transpose, so the row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T: the operands swap places, m and n swap, and the transpose flags and
// leading dimensions carry over unchanged. Kept apart (no CUDA types) so that a CPU test can check
// it through OpenBLAS's column-major interface on machines without a GPU.
#include "sgp/compute/backend.hpp"

namespace sgp::compute {

struct ColumnMajorGemm {
  Transpose op_first, op_second;  // applied to `first` and `second`
  int m, n, k;                    // column-major C is m x n
  const float* first;
  int ld_first;
  const float* second;
  int ld_second;

  static ColumnMajorGemm from_row_major(Transpose trans_a, Transpose trans_b, int m, int n, int k,
                                        const float* a, int lda, const float* b, int ldb) {
    return {trans_b, trans_a, n, m, k, b, ldb, a, lda};
  }
};

}  // namespace sgp::compute
