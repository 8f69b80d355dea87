// The row-major -> column-major GEMM restatement the CUDA backend hands to cuBLAS, checked on the
// CPU through OpenBLAS's column-major interface, so it is tested on machines without a GPU too.
#include <cblas.h>

#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "sgp/compute/cpu_backend.hpp"
#include "src/compute/column_major_gemm.hpp"

using namespace sgp::compute;

TEST_CASE("a row-major GEMM restated column-major gives the same C (every transpose, padding)") {
  CpuBackend cpu;
  std::mt19937 rng(7);
  // Small integers: every product and sum is exact in float, so the results must be identical.
  std::uniform_int_distribution<int> small(-4, 4);
  struct Shape {
    int m, n, k, pad;
  };
  for (const Shape s : {Shape{7, 5, 13, 0}, Shape{3, 9, 4, 2}, Shape{1, 6, 1, 1}}) {
    for (Transpose ta : {Transpose::no, Transpose::yes}) {
      for (Transpose tb : {Transpose::no, Transpose::yes}) {
        const bool ta_yes = ta == Transpose::yes, tb_yes = tb == Transpose::yes;
        const int lda = (ta_yes ? s.m : s.k) + s.pad, ldb = (tb_yes ? s.k : s.n) + s.pad;
        const int ldc = s.n + s.pad;
        std::vector<float> a(static_cast<std::size_t>(ta_yes ? s.k : s.m) * lda);
        std::vector<float> b(static_cast<std::size_t>(tb_yes ? s.n : s.k) * ldb);
        std::vector<float> c0(static_cast<std::size_t>(s.m) * ldc);
        for (auto* v : {&a, &b, &c0})
          for (float& x : *v) x = static_cast<float>(small(rng));

        std::vector<float> expected = c0, actual = c0;
        cpu.gemm(ta, tb, s.m, s.n, s.k, 2.0f, a.data(), lda, b.data(), ldb, -1.0f, expected.data(),
                 ldc);
        const auto g =
            ColumnMajorGemm::from_row_major(ta, tb, s.m, s.n, s.k, a.data(), lda, b.data(), ldb);
        auto op = [](Transpose t) { return t == Transpose::yes ? CblasTrans : CblasNoTrans; };
        cblas_sgemm(CblasColMajor, op(g.op_first), op(g.op_second), g.m, g.n, g.k, 2.0f, g.first,
                    g.ld_first, g.second, g.ld_second, -1.0f, actual.data(), ldc);
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(s.k);
        CAPTURE(ta_yes);
        CAPTURE(tb_yes);
        CHECK(actual == expected);
      }
    }
  }
}
