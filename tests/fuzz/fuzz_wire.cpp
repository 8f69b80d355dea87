// Fuzz target: the gossip wire decoder (decode_message), as every peer runs it on each message a
// neighbour, or anyone who can reach its port, sends.
//
// Input layout: byte 0 picks the mode and the authenticated rank; then frames. Mode bit 0x80
// set: the header is re-encoded with valid magic, version and hash from the input's fields
// (payload hash too when bit 0x40 is set; dtype 7, a compressed difference, when bit 0x10 is
// set), so the fuzzer also reaches the checks behind the hashes; otherwise the bytes go to the
// decoder as they are. Mode bit 0x20 (without 0x80): frame 0 is re-encoded as a valid control
// notice (asgp's membership and pace notices) from the input's fields instead. A message whose
// first frame carries the control magic goes to decode_control and then, as it arrives from the
// rank the mode's low bits authenticate, to an asgp engine (rank 1 of four on a one-peer
// exponential schedule), whose rules on who may exclude, admit, leave or hand over mass it
// exercises; every other message goes to decode_message. Frames: byte 1 is the frame count (0..3);
// each frame but the last is preceded by a one-byte length; the last takes the rest. A message of
// dtype 7 that decode_message accepts goes on to the compress decoder's checks and, if they pass,
// to decode_add (topk:0.25 of 16 values, as CompressedPushSum receives it).
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_target.hpp"
#include "sgp/compress/compressor.hpp"
#include "sgp/compute/cpu_backend.hpp"
#include "sgp/gossip/async_push_sum.hpp"
#include "sgp/gossip/control_message.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/transport/inproc_network.hpp"
#include "sgp/transport/inproc_transport.hpp"
#include "support/gossip_test_support.hpp"

namespace {

using sgp::gossip::WireHeader;

constexpr int kPeers = 4;
constexpr int kSelf = 1;

std::vector<std::vector<std::byte>> split_frames(std::span<const std::uint8_t> in) {
  std::vector<std::vector<std::byte>> frames;
  if (in.empty()) return frames;
  const int count = in[0] % 4;
  std::size_t at = 1;
  for (int f = 0; f < count; ++f) {
    std::size_t length = in.size() - at;  // the last frame: the rest
    if (f + 1 < count) {
      length = 0;
      if (at < in.size()) {
        length = std::min<std::size_t>(in[at], in.size() - at - 1);
        ++at;
      }
    }
    const auto* begin = reinterpret_cast<const std::byte*>(in.data() + at);
    frames.emplace_back(begin, begin + length);
    at += length;
  }
  return frames;
}

// Rebuilds frame 0 as a valid header carrying the fields the input's frame 0 holds.
void reencode_header(std::vector<std::vector<std::byte>>& frames, bool hash_payload,
                     bool compressed) {
  if (frames.empty()) return;
  auto& head = frames[0];
  head.resize(sgp::gossip::kHeaderBytes);
  WireHeader h;
  auto field = [&](std::size_t offset, auto& value) {
    std::memcpy(&value, head.data() + offset, sizeof value);
  };
  field(8, h.sender);
  field(12, h.chunk);
  field(16, h.round);
  field(24, h.weight);
  field(32, h.coefficient);
  field(40, h.total);
  field(48, h.offset);
  field(56, h.count);
  field(64, h.payload_hash);
  if (compressed) h.dtype = sgp::gossip::kDtypeCompressed;
  if (hash_payload && frames.size() > 1) h.payload_hash = sgp::gossip::payload_hash(frames[1]);
  const auto encoded = sgp::gossip::encode_header(h);
  head.assign(encoded.begin(), encoded.end());
}

// Rebuilds frame 0 as a control notice with a valid magic, version and hash (any kind number).
void reencode_control(std::vector<std::vector<std::byte>>& frames) {
  if (frames.empty()) return;
  auto& head = frames[0];
  head.resize(sgp::gossip::kControlBytes);
  sgp::gossip::ControlMessage c;
  std::uint16_t kind = 0;
  std::memcpy(&kind, head.data() + 6, sizeof kind);
  c.kind = static_cast<sgp::gossip::ControlKind>(kind);
  std::memcpy(&c.sender, head.data() + 8, sizeof c.sender);
  std::memcpy(&c.subject, head.data() + 12, sizeof c.subject);
  std::memcpy(&c.incarnation, head.data() + 16, sizeof c.incarnation);
  std::memcpy(&c.round, head.data() + 24, sizeof c.round);
  const auto encoded = sgp::gossip::encode_control(c);
  head.assign(encoded.begin(), encoded.end());
}

// Hands a control notice to a fresh asgp engine of rank kSelf (16 values) and lets it act on
// it: refuse it, or change membership, take mass, sponsor a joiner, tell the others (whose
// inboxes are dropped with the network).
void drive_engine(const sgp::transport::Message& message) {
  static sgp::compute::CpuBackend backend(1);
  sgp::transport::InProcNetwork network(kPeers);
  sgp::transport::InProcTransport transport(network, kSelf);
  auto x = sgp::testing::initial_vector(kSelf, kPeers, 16);
  sgp::gossip::PushSumConfig config;
  config.mode = sgp::gossip::Mode::async;
  sgp::gossip::AsyncPushSum engine(
      backend, sgp::testing::make_schedule(sgp::testing::Graph::exponential, kPeers), transport,
      x.data(), x.size(), config);
  network.deliver(message.authenticated_rank().value_or(0), kSelf, message);
  engine.idle(std::chrono::milliseconds(0));
}

// A dtype-6 message as CompressedPushSum takes it: frames and fields, then the payload's own
// checks, then the copy update.
void decode_compressed(sgp::transport::Message message, const sgp::gossip::Chunking& chunking) {
  auto result = sgp::gossip::decode_message(std::move(message), chunking, kPeers, kSelf,
                                            sgp::gossip::kDtypeCompressed);
  const auto* decoded = std::get_if<sgp::gossip::DecodedMessage>(&result);
  if (decoded == nullptr) return;
  sgp::compress::Compressor topk;
  topk.ratio = 0.25;
  const std::span<const std::uint8_t> payload(
      reinterpret_cast<const std::uint8_t*>(decoded->payload.data()), decoded->payload.size());
  sgp::compress::check_payload(topk, payload, chunking.total);  // PayloadError: a refusal
  std::vector<float> copy(chunking.total, 0.0f);
  sgp::compress::decode_add(topk, payload, std::span<float>(copy));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return sgp::fuzz::run_target(data, size, [](std::span<const std::uint8_t> in) {
    if (in.empty()) return;
    const std::uint8_t mode = in[0];
    auto frames =
        std::make_shared<std::vector<std::vector<std::byte>>>(split_frames(in.subspan(1)));
    if (mode & 0x80) {
      reencode_header(*frames, (mode & 0x40) != 0, (mode & 0x10) != 0);
    } else if (mode & 0x20) {
      reencode_control(*frames);
    }
    std::vector<std::span<const std::byte>> spans(frames->begin(), frames->end());
    // Low bits: no authentication (0..3 -> none when 3), or the rank CURVE vouched for.
    const int auth = mode & 0x03;
    const std::optional<int> rank = auth == 3 ? std::nullopt : std::optional<int>(auth);
    sgp::transport::Message message(std::move(spans), frames, rank);
    if (sgp::gossip::is_control(message)) {
      const auto control = sgp::gossip::decode_control(message, kPeers, kSelf);
      if (const auto* decoded = std::get_if<sgp::gossip::DecodedControl>(&control)) {
        std::size_t sum = 0;  // what the engine then reads: the payload, inside the frame
        for (const std::byte b : decoded->payload) sum += static_cast<std::size_t>(b);
        (void)sum;
      }
      drive_engine(message);
      return;
    }
    // 16 floats in chunks of 5: 4 chunks, the last one 1 float.
    const sgp::gossip::Chunking chunking(16, 5);
    if ((mode & 0x90) == 0x90) {
      decode_compressed(std::move(message), chunking);
      return;
    }
    auto result = sgp::gossip::decode_message(std::move(message), chunking, kPeers, kSelf);
    if (const auto* decoded = std::get_if<sgp::gossip::DecodedMessage>(&result)) {
      // What the engine then reads: every payload float must be inside the frame.
      float sum = 0.0f;
      const auto* p = reinterpret_cast<const unsigned char*>(decoded->payload.data());
      for (std::size_t i = 0; i < decoded->header.count * sizeof(float); ++i) sum += p[i];
      (void)sum;
    }
  });
}
