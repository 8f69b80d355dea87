#include "sgp/transport/faulty_transport.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sgp/error.hpp"

namespace sgp::transport {

namespace {

// How the spec's delay is counted: wall-clock time (peers) or rounds (sgp simulate).
enum class Clock { wall, rounds };

[[noreturn]] void bad_spec(std::string_view part, std::string_view what, Clock clock) {
  throw InputError(fmt::format("'{}': {} (expected e.g. {})", part, what,
                               clock == Clock::wall
                                   ? "drop=0.05,dup=0.01,reorder=0.05,delay=20ms,seed=1"
                                   : "drop=0.05,dup=0.01,delay=2,seed=1"));
}

double probability(std::string_view part, std::string_view value, Clock clock) {
  double p = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), p);
  if (ec != std::errc() || end != value.data() + value.size() || !(p >= 0.0 && p < 1.0)) {
    bad_spec(part, "a probability in [0, 1) is needed", clock);
  }
  return p;
}

std::uint64_t unsigned_value(std::string_view part, std::string_view value, Clock clock) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    bad_spec(part, "a non-negative integer is needed", clock);
  }
  return v;
}

void set_delay(FaultSpec& spec, std::string_view part, std::string_view value, Clock clock) {
  if (clock == Clock::rounds) {
    const auto rounds = unsigned_value(part, value, clock);
    if (rounds > 1000) bad_spec(part, "at most 1000 rounds", clock);
    spec.delay_rounds = static_cast<int>(rounds);
    return;
  }
  if (!value.ends_with("ms")) bad_spec(part, "the delay needs a unit: e.g. delay=20ms", clock);
  const auto ms = unsigned_value(part, value.substr(0, value.size() - 2), clock);
  if (ms > 60000) bad_spec(part, "at most 60000ms", clock);
  spec.delay = std::chrono::milliseconds(ms);
}

void set_field(FaultSpec& spec, std::string_view part, Clock clock) {
  const auto eq = part.find('=');
  if (eq == std::string_view::npos) bad_spec(part, "no '='", clock);
  const auto key = part.substr(0, eq), value = part.substr(eq + 1);
  if (key == "drop") {
    spec.drop = probability(part, value, clock);
  } else if (key == "dup") {
    spec.duplicate = probability(part, value, clock);
  } else if (key == "reorder" && clock == Clock::wall) {
    spec.reorder = probability(part, value, clock);
  } else if (key == "delay") {
    set_delay(spec, part, value, clock);
  } else if (key == "seed") {
    spec.seed = unsigned_value(part, value, clock);
  } else {
    bad_spec(part,
             clock == Clock::wall ? "unknown fault (drop, dup, reorder, delay, seed)"
                                  : "unknown fault (drop, dup, delay, seed; delays reorder)",
             clock);
  }
}

FaultSpec parse_spec(std::string_view text, Clock clock) {
  FaultSpec spec;
  if (text.empty() || text == "none") return spec;
  for (std::size_t start = 0;;) {
    const auto comma = text.find(',', start);
    set_field(spec, text.substr(start, comma - start), clock);
    if (comma == std::string_view::npos) return spec;
    start = comma + 1;
  }
}

}  // namespace

FaultSpec parse_fault_spec(std::string_view text) { return parse_spec(text, Clock::wall); }

FaultSpec parse_round_fault_spec(std::string_view text) { return parse_spec(text, Clock::rounds); }

std::string format_round_fault_spec(const FaultSpec& s) {
  std::vector<std::string> parts;
  if (s.drop > 0) parts.push_back(fmt::format("drop={}", s.drop));
  if (s.duplicate > 0) parts.push_back(fmt::format("dup={}", s.duplicate));
  if (s.delay_rounds > 0) parts.push_back(fmt::format("delay={}", s.delay_rounds));
  if (s.seed > 0) parts.push_back(fmt::format("seed={}", s.seed));
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ","));
}

std::string format_fault_spec(const FaultSpec& s) {
  if (!s.any()) return "none";
  return fmt::format("drop={},dup={},reorder={},delay={}ms,seed={}", s.drop, s.duplicate, s.reorder,
                     s.delay.count(), s.seed);
}

FaultyTransport::FaultyTransport(Transport& inner, FaultSpec spec, Spare spare)
    : inner_(inner),
      spec_(spec),
      spare_(spare),
      rng_(spec.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(inner.rank()) + 1) {
  SGP_ENFORCE(spec.delay_rounds == 0, "a transport delays by time (parse_fault_spec), not rounds");
}

FaultyTransport::~FaultyTransport() {
  for (auto& h : held_) h.release();
}

bool FaultyTransport::draw(double p) {
  return p > 0.0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
}

void FaultyTransport::hold(Clock::time_point due, int dest, std::span<const std::byte> header,
                           std::span<const std::byte> payload, ReleaseFn release) {
  Held h{due, dest, std::vector<std::byte>(header.begin(), header.end()), payload,
         std::move(release)};
  const auto at = std::upper_bound(held_.begin(), held_.end(), due,
                                   [](Clock::time_point t, const Held& x) { return t < x.due; });
  held_.insert(at, std::move(h));
}

void FaultyTransport::send_due(Clock::time_point now) {
  while (!held_.empty() && held_.front().due <= now) {
    Held h = std::move(held_.front());
    held_.pop_front();
    inner_.send(h.dest, h.header, h.payload, std::move(h.release));
  }
}

void FaultyTransport::send(int dest, std::span<const std::byte> header,
                           std::span<const std::byte> payload, ReleaseFn on_release) {
  const auto now = Clock::now();
  send_due(now);
  if (spare_ && spare_(header)) {
    inner_.send(dest, header, payload, std::move(on_release));
    return;
  }
  if (draw(spec_.drop)) {
    ++counts_.dropped;
    on_release();
    return;
  }
  int copies = 1;
  if (draw(spec_.duplicate)) {
    ++counts_.duplicated;
    copies = 2;
  }
  // Both copies read the caller's payload: release it once both are done with it.
  auto remaining = std::make_shared<std::atomic<int>>(copies);  // released on any thread
  auto shared_release = std::make_shared<ReleaseFn>(std::move(on_release));
  auto release_one = [remaining, shared_release] {
    if (--*remaining == 0) (*shared_release)();
  };
  for (int c = 0; c < copies; ++c) {
    auto due = now + spec_.delay;
    if (draw(spec_.reorder)) {
      ++counts_.reordered;
      due += std::max(spec_.delay, std::chrono::milliseconds(5));  // later messages overtake it
    }
    if (due > now) {
      counts_.delayed += spec_.delay.count() > 0;
      hold(due, dest, header, payload, release_one);
    } else {
      inner_.send(dest, header, payload, release_one);
    }
  }
}

std::optional<Message> FaultyTransport::receive(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto now = Clock::now();
    send_due(now);
    const bool waiting_for_due = !held_.empty() && held_.front().due < deadline;
    const auto until = waiting_for_due ? held_.front().due : deadline;
    auto message = inner_.receive(std::max(
        std::chrono::ceil<std::chrono::milliseconds>(until - now), std::chrono::milliseconds(0)));
    const auto after = Clock::now();
    if (message || after >= deadline) return message;
    // Woken (wake()) before anything fell due: return as the inner transport would.
    if (!waiting_for_due || after < until) return std::nullopt;
  }
}

void FaultyTransport::discard_pending(int dest) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->dest == dest) {
      it->release();
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  inner_.discard_pending(dest);
}

}  // namespace sgp::transport
