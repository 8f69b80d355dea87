#include "sgp/gossip/push_sum_config.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "sgp/error.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::gossip {

std::span<const NamedValue<Mode>> names(Mode) {
  static constexpr std::array<NamedValue<Mode>, 4> table = {{
      {Mode::sync, "sync", "SGP: every round waits for every in-neighbour's message"},
      {Mode::overlap, "overlap", "OSGP: a communication thread mixes while the caller computes"},
      {Mode::async, "async",
       "asgp: nobody waits, lost messages cost nothing; peers may fail, join and leave"},
      {Mode::allreduce, "allreduce",
       "ring allreduce over ranks 0..N-1: the exact average every round (ignores the edges)"},
  }};
  return table;
}

std::span<const NamedValue<Compression>> names(Compression) {
  static constexpr std::array<NamedValue<Compression>, 3> table = {{
      {Compression::none, "none", "float32 payloads"},
      {Compression::fp16, "fp16", "IEEE float16 payloads (saturating at +-65504): half the bytes"},
      {Compression::bf16, "bf16", "bfloat16 payloads (float32's range, 8 significant bits)"},
  }};
  return table;
}

std::span<const NamedValue<Robust>> names(Robust) {
  static constexpr std::array<NamedValue<Robust>, 2> table = {{
      {Robust::none, "none", "mix every contribution as sent (suspects are still detected)"},
      {Robust::clip, "clip",
       "ClippedGossip: clip each in-neighbour's model to a radius around one's own (sgp on the "
       "CPU)"},
  }};
  return table;
}

PayloadCompression parse_payload_compression(std::string_view text, std::string_view flag) {
  for (const auto& named : names(Compression{})) {
    if (text == named.name) return PayloadCompression(named.value);
  }
  const auto kind = text.substr(0, text.find(':'));
  if (kind != "topk" && kind != "randk" && kind != "sign" && kind != "qsgd") {
    throw InputError(fmt::format(
        "{} '{}' is not one of none, fp16, bf16, topk:R, randk:R, sign, qsgd:L", flag, text));
  }
  return PayloadCompression(compress::parse_compressor(text, flag));
}

std::string name_of(const PayloadCompression& c) {
  return c.compressor ? compress::compressor_name(*c.compressor) : std::string(name_of(c.format));
}

std::uint16_t wire_dtype(Compression compression) {
  switch (compression) {
    case Compression::fp16:
      return kDtypeFloat16;
    case Compression::bf16:
      return kDtypeBfloat16;
    case Compression::none:
      break;
  }
  return kDtypeFloat32;
}

std::int64_t rounds_ahead_bound(const topology::Schedule& s, const PushSumConfig& config) {
  if (config.max_rounds_ahead > 0) return config.max_rounds_ahead;
  const std::int64_t lag = config.mode == Mode::overlap ? config.tau + 1 : 1;
  return std::max<std::int64_t>(s.num_peers() - 1, 1) * s.period() * lag + 1;
}

namespace {
// x keeps at least 2^-100 of its scale: 26 binary orders of magnitude above float32's smallest
// normal number for the values themselves.
constexpr double kMinScaleLog2 = -100.0;
}  // namespace

void check_tau(const topology::Schedule& s, int rank, const PushSumConfig& config) {
  if (config.mode != Mode::overlap) return;
  double smallest = 1.0;
  for (int phase = 0; phase < s.period(); ++phase) {
    smallest = std::min(smallest, s.self_weight(rank, phase));
  }
  if (!(smallest > 0.0)) return;  // a peer that keeps nothing is rescaled by what it receives
  const double per_round = std::log2(smallest);
  const double scale = per_round * (config.tau + 1);
  if (scale >= kMinScaleLog2) return;
  const int most = std::max(0, static_cast<int>(std::floor(kMinScaleLog2 / per_round)) - 1);
  throw InputError(fmt::format(
      "--tau {}: rank {} keeps a share of {:.3g} of its x per round in this topology, so {} "
      "rounds without its in-neighbours' messages would scale x by 2^{:.0f}, beyond float32's "
      "range; use --tau <= {} with this topology",
      config.tau, rank, smallest, config.tau + 1, scale, most));
}

}  // namespace sgp::gossip
