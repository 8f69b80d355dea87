#pragma once
// SGP_VECTOR_CLONES: a hot loop also compiled for AVX-512 and AVX2 and chosen when the program
// loads (GCC's target_clones). The build targets baseline x86-64 (two doubles per vector, no
// unsigned 32-bit max, no 64-bit compare), so that one binary runs on any x86-64 machine; the
// clones give the loops that decide a round's cost the vectors of the machine they run on.
// Elsewhere (another architecture or compiler) it is nothing.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SGP_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SGP_VECTOR_CLONES
#endif
