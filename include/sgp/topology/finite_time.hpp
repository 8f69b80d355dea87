#pragma once
// Time-varying topologies whose product over one period is exactly 11^T/N (finite-time exact
// averaging) for the generator's kinds "hyper-hypercube" and "base"; the schedules come without
// endpoints.
//
// k-peer hyper-hypercube H_k(N), for N whose prime factors are all <= k+1. Factor
// N = f_1 ... f_L with every f_l in 2..k+1 and L as small as possible. Write a rank in the mixed
// radix (f_1, ..., f_L); in round l every rank averages exactly (weight 1/f_l to itself and to each
// of the others) with the f_l - 1 ranks that differ from it only in digit l. After round l every
// rank holds the mean over all ranks that agree with it in digits l+1..L, so after L rounds every
// rank holds the mean of all: the product is 11^T/N. Degree f_l - 1 <= k.
//
// Base-(k+1) graph (after Takezawa et al., NeurIPS 2023), for every N >= 2. Two constructions,
// the one with the shorter period is kept (ties: fewer messages per period):
//  * Simple: write N = sum_l a_l (k+1)^(p_l) in base k+1 (p_0 > p_1 > ..., digits a_l in 1..k),
//    and split the ranks into consecutive blocks B_l of n_l = a_l (k+1)^(p_l) ranks (the largest
//    first). (1) Every block runs H_k(n_l) (n_l has prime factors <= k+1). (2) Merge, in round m
//    for m = 0..L-2: every rank of the smaller blocks B_(m+1..L-1) (S_(m+1) ranks in all) pairs
//    with one rank of each of the a_m sub-blocks of (k+1)^(p_m) ranks of B_m (S_(m+1) <
//    (k+1)^(p_m), so there are enough) and takes the weight c = (k+1)^(p_m) / S_m from each,
//    S_m = n_m + S_(m+1). The smaller blocks then all hold the size-weighted mean of B_m..B_(L-1)
//    and every sub-block of B_m holds, in sum, (k+1)^(p_m) times the global mean. (3) From round
//    m+1 every sub-block of B_m runs H_k((k+1)^(p_m)) to spread that mean inside it. Period:
//    (1) takes at most p_0 + 1 rounds and B_0's sub-blocks finish p_0 + 1 rounds after it (block
//    m's start m rounds later but take p_m <= p_0 - m rounds), so at most 2 p_0 + 2 <=
//    2 log_(k+1)(N) + 2.
//  * Split: N = n_pow * r with n_pow the largest divisor of N whose prime factors are <= k+1.
//    Groups of r consecutive ranks run Simple(r) side by side, then the n_pow ranks with the same
//    position in their group run H_k(n_pow).
// Every matrix is symmetric (so doubly stochastic) with at most k neighbours per rank.

#include <optional>
#include <vector>

#include "sgp/topology/schedule.hpp"

namespace sgp::topology {

// The fewest factors, each in 2..k+1, whose product is n (largest first); nullopt when n has a
// prime factor above k+1. Empty for n = 1.
std::optional<std::vector<int>> hyper_hypercube_factors(int n, int k);

// InvariantError when n does not factor (check hyper_hypercube_factors first).
Schedule hyper_hypercube_schedule(int n, int k);
Schedule base_schedule(int n, int k);

}  // namespace sgp::topology
