// sgp::Endpoint (sgp/endpoint.hpp): the one parser of ZeroMQ endpoints, on good and bad input.
#include "sgp/endpoint.hpp"

#include <doctest/doctest.h>

#include <string>

#include "support/input_error.hpp"

using sgp::Endpoint;

namespace {

// The InputError message of parsing `text` as flag --bind ("" when it parses).
std::string error_of(const std::string& text) {
  return sgp::testing::input_error_of([&] { Endpoint::parse(text, "--bind"); });
}

}  // namespace

TEST_CASE("endpoints: tcp hosts and ports, IPv6 in brackets, a source interface, other schemes") {
  const auto v4 = Endpoint::parse("tcp://10.0.0.3:5600", "here");
  CHECK(v4.scheme == "tcp");
  CHECK(v4.host == "10.0.0.3");
  CHECK(v4.port == "5600");
  CHECK(v4.source.empty());
  CHECK(v4.text() == "tcp://10.0.0.3:5600");
  CHECK(v4.has_port_number());

  const auto v6 = Endpoint::parse("tcp://[::1]:29500", "here");
  CHECK(v6.host == "::1");
  CHECK(v6.port == "29500");
  CHECK(v6.text() == "tcp://[::1]:29500");

  const auto wildcard = Endpoint::parse("tcp://*:*", "here");
  CHECK(wildcard.host == "*");
  CHECK(wildcard.port == "*");
  CHECK_FALSE(wildcard.has_port_number());
  CHECK_FALSE(Endpoint::parse("tcp://127.0.0.1:0", "here").has_port_number());  // any port

  const auto sourced = Endpoint::parse("tcp://eth0;node-7.cluster:1", "here");
  CHECK(sourced.source == "eth0");
  CHECK(sourced.host == "node-7.cluster");

  const auto ipc = Endpoint::parse("ipc:///tmp/sgp-0", "here");
  CHECK(ipc.scheme == "ipc");
  CHECK(ipc.address == "/tmp/sgp-0");
  CHECK(ipc.host.empty());
  CHECK_FALSE(ipc.has_port_number());
}

TEST_CASE("endpoints: only this host's addresses are loopback") {
  for (const char* local : {"tcp://127.0.0.1:1", "tcp://127.8.9.1:1", "tcp://localhost:1",
                            "tcp://[::1]:1", "ipc:///tmp/x", "inproc://a"}) {
    CAPTURE(local);
    CHECK(Endpoint::parse(local, "here").is_loopback());
  }
  // A source interface is judged conservatively: the host alone does not decide.
  for (const char* open : {"tcp://*:1", "tcp://0.0.0.0:1", "tcp://10.0.0.1:1",
                           "tcp://eth0;127.0.0.1:1", "tcp://[fe80::1]:1"}) {
    CAPTURE(open);
    CHECK_FALSE(Endpoint::parse(open, "here").is_loopback());
  }
}

TEST_CASE("endpoints: each kind of bad input is named with where it came from and why") {
  const auto expected = [](const std::string& text, const std::string& why) {
    CAPTURE(text);
    CHECK_FALSE(Endpoint::parse(text).has_value());
    CHECK(error_of(text) == "--bind: endpoint '" + text +
                                "' is not a ZeroMQ address like tcp://HOST:PORT (" + why + ")");
  };
  expected("10.0.0.3:5600", "no SCHEME://");
  expected("://host:1", "no SCHEME://");
  expected("tcp://", "nothing after ://");
  expected("tcp://host 1:5", "white space in it");
  expected("tcp://host", "no :PORT");
  expected("tcp://host:", "port '' is not a number in 0..65535 or *");
  expected("tcp://host:http", "port 'http' is not a number in 0..65535 or *");
  expected("tcp://host:65536", "port '65536' is not a number in 0..65535 or *");
  expected("tcp://host:-1", "port '-1' is not a number in 0..65535 or *");
  expected("tcp://:5600", "no HOST");
  expected("tcp://[::1:5600", "host '[::1' lacks its ]");
  expected("tcp://::1:5600", "an IPv6 host goes in brackets: [::1]");
  CHECK(error_of("tcp://127.0.0.1:5600").empty());
}
