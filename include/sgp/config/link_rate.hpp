#pragma once
// `--link-rate` (sgp launch): run every peer on its own emulated host (a network namespace on
// this machine, src/launch/emulated_hosts.cpp) whose egress is limited to this rate.
#include <string>
#include <string_view>

namespace sgp::config {

struct LinkRate {
  bool emulated = false;        // false: no emulation, the peers share this host's loopback
  double bits_per_second = 0;   // 0: emulated hosts without a limit
  std::string tc_rate() const;  // the rate as tc takes it, e.g. "1000000000bit"
};

// "" or "none": no emulation; "unlimited": emulated hosts, no limit; else NUMBER UNIT with
// UNIT one of bit, kbit, mbit, gbit (decimal, as tc reads them: 1gbit = 1e9 bit/s), between
// 1 kbit and 100 gbit. InputError "'TEXT': what" otherwise (the caller says where).
LinkRate parse_link_rate(std::string_view text);

}  // namespace sgp::config
