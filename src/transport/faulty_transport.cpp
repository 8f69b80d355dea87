#include "sgp/transport/faulty_transport.hpp"

#include <algorithm>
#include <charconv>
#include <memory>

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp::transport {

namespace {

[[noreturn]] void bad_spec(std::string_view part, std::string_view what) {
  throw InputError(fmt::format(
      "--inject: '{}': {} (expected e.g. drop=0.05,dup=0.01,reorder=0.05,delay=20ms,seed=1)", part,
      what));
}

double probability(std::string_view part, std::string_view value) {
  double p = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), p);
  if (ec != std::errc() || end != value.data() + value.size() || !(p >= 0.0 && p < 1.0)) {
    bad_spec(part, "a probability in [0, 1) is needed");
  }
  return p;
}

std::uint64_t unsigned_value(std::string_view part, std::string_view value) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    bad_spec(part, "a non-negative integer is needed");
  }
  return v;
}

void set_field(FaultSpec& spec, std::string_view part) {
  const auto eq = part.find('=');
  if (eq == std::string_view::npos) bad_spec(part, "no '='");
  const auto key = part.substr(0, eq), value = part.substr(eq + 1);
  if (key == "drop") {
    spec.drop = probability(part, value);
  } else if (key == "dup") {
    spec.duplicate = probability(part, value);
  } else if (key == "reorder") {
    spec.reorder = probability(part, value);
  } else if (key == "delay") {
    if (!value.ends_with("ms")) bad_spec(part, "the delay needs a unit: e.g. delay=20ms");
    const auto ms = unsigned_value(part, value.substr(0, value.size() - 2));
    if (ms > 60000) bad_spec(part, "at most 60000ms");
    spec.delay = std::chrono::milliseconds(ms);
  } else if (key == "seed") {
    spec.seed = unsigned_value(part, value);
  } else {
    bad_spec(part, "unknown fault (drop, dup, reorder, delay, seed)");
  }
}

}  // namespace

FaultSpec parse_fault_spec(std::string_view text) {
  FaultSpec spec;
  if (text.empty() || text == "none") return spec;
  for (std::size_t start = 0;;) {
    const auto comma = text.find(',', start);
    set_field(spec, text.substr(start, comma - start));
    if (comma == std::string_view::npos) return spec;
    start = comma + 1;
  }
}

std::string format_fault_spec(const FaultSpec& s) {
  if (!s.any()) return "none";
  return fmt::format("drop={},dup={},reorder={},delay={}ms,seed={}", s.drop, s.duplicate, s.reorder,
                     s.delay.count(), s.seed);
}

FaultyTransport::FaultyTransport(Transport& inner, FaultSpec spec)
    : inner_(inner),
      spec_(spec),
      rng_(spec.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(inner.rank()) + 1) {}

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
  auto remaining = std::make_shared<int>(copies);
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
