#pragma once
// One ZeroMQ endpoint, as topology files, flags (--bind, --monitor) and sockets name it:
// SCHEME://ADDRESS, where a tcp ADDRESS is [SOURCE;]HOST:PORT (HOST a name, an IPv4 address, *
// or a bracketed IPv6 address; PORT a number, or * or 0 to bind where the system picks; SOURCE:
// ZeroMQ's source interface). Every module that needs an endpoint's host or port parses it here,
// with one set of rules; like error.hpp it belongs to every module.
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "sgp/error.hpp"

namespace sgp {

struct Endpoint {
  std::string scheme;   // "tcp", "ipc", "inproc", ...
  std::string address;  // everything after "://"
  std::string source;   // tcp: the SOURCE of SOURCE;HOST:PORT, else empty
  std::string host;     // tcp: HOST, an IPv6 address without its brackets; else empty
  std::string port;     // tcp: the digits of PORT (0: any), or "*"; else empty

  // The endpoint `text` names, or nothing when it is not one (problem() says why).
  static std::optional<Endpoint> parse(std::string_view text) {
    Endpoint e;
    if (!problem(text, e).empty()) return std::nullopt;
    return e;
  }
  // The same, or InputError "WHERE: endpoint 'TEXT' is not a ZeroMQ address like
  // tcp://HOST:PORT (WHY)"; `where` names the flag or the file's node it came from.
  static Endpoint parse(std::string_view text, std::string_view where) {
    Endpoint e;
    if (const std::string why = problem(text, e); !why.empty()) {
      throw InputError(
          fmt::format("{}: endpoint '{}' is not a ZeroMQ address like "
                      "tcp://HOST:PORT ({})",
                      where, text, why));
    }
    return e;
  }
  // Why `text` is not an endpoint ("" when it is one, then parsed into `out`).
  static std::string problem(std::string_view text, Endpoint& out);

  std::string text() const { return scheme + "://" + address; }
  // tcp with a port number (not * or 0): what a peer can connect to.
  bool has_port_number() const { return scheme == "tcp" && port != "*" && port != "0"; }
  // tcp with port * or 0: no address yet (sgp launch picks the port for the ranks it starts).
  bool leaves_port_open() const { return scheme == "tcp" && !has_port_number(); }
  // Whether only this host can reach it: ipc, inproc, or a tcp HOST localhost, ::1 or 127.x (a
  // SOURCE interface, judged conservatively, makes it not).
  bool is_loopback() const {
    if (scheme == "ipc" || scheme == "inproc") return true;
    return scheme == "tcp" && source.empty() &&
           (host == "localhost" || host == "::1" || host.starts_with("127."));
  }
};

inline std::string Endpoint::problem(std::string_view text, Endpoint& out) {
  const auto separator = text.find("://");
  if (separator == std::string_view::npos || separator == 0) return "no SCHEME://";
  if (text.find_first_of(" \t\r\n") != std::string_view::npos) return "white space in it";
  out.scheme = std::string(text.substr(0, separator));
  out.address = std::string(text.substr(separator + 3));
  if (out.address.empty()) return "nothing after ://";
  if (out.scheme != "tcp") return "";
  const auto colon = out.address.rfind(':');
  if (colon == std::string::npos) return "no :PORT";
  out.port = out.address.substr(colon + 1);
  int number = 0;
  const auto [end, error] =
      std::from_chars(out.port.data(), out.port.data() + out.port.size(), number);
  if (out.port != "*" && (error != std::errc() || end != out.port.data() + out.port.size() ||
                          number < 0 || number > 65535)) {
    return fmt::format("port '{}' is not a number in 0..65535 or *", out.port);
  }
  std::string host = out.address.substr(0, colon);
  if (const auto semicolon = host.find(';'); semicolon != std::string::npos) {
    out.source = host.substr(0, semicolon);
    host = host.substr(semicolon + 1);
  }
  if (host.starts_with('[')) {
    if (host.size() < 3 || !host.ends_with(']')) return fmt::format("host '{}' lacks its ]", host);
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return fmt::format("an IPv6 host goes in brackets: [{}]", host);
  }
  if (host.empty()) return "no HOST";
  out.host = std::move(host);
  return "";
}

}  // namespace sgp
