#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "sgp/error.hpp"
#include "sgp/topology/dot_file.hpp"
#include "sgp/topology/generator.hpp"
#include "support/input_error.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

using namespace sgp::topology;
using sgp::InputError;
using sgp::testing::contains;
using sgp::testing::slurp;

namespace {

const DotReadOptions kNeedEndpoints{.require_endpoints = true, .self_weight = std::nullopt};

// The message of the InputError that parsing `text` throws ("" when it does not throw).
std::string error_of(const std::string& text, const DotReadOptions& options = {}) {
  return sgp::testing::input_error_of([&] { parse_dot(text, "bad.dot", options); });
}

}  // namespace

TEST_CASE("round trip: every generator, with and without self weight and endpoints") {
  for (TopologyKind kind : all_topology_kinds()) {
    for (int n : {4, 6, 8, 16}) {
      for (std::optional<double> a : {std::optional<double>(), std::optional<double>(0.3)}) {
        GeneratorOptions o;
        o.num_peers = n;
        o.self_weight = a;
        o.seed = 3;
        o.hosts = {"10.0.0.1", "node-b"};
        Schedule s = [&] {
          try {
            return generate_topology(kind, o);
          } catch (const InputError&) {  // torus 6 is fine; hypercube 6 is not
            return Schedule(1, {{{}}}, {{1.0}});
          }
        }();
        if (s.num_peers() == 1) continue;
        CAPTURE(topology_kind_name(kind));
        CAPTURE(n);
        const std::string text = to_dot(s, "a comment\non two lines");
        CHECK(parse_dot(text, "rt.dot") == s);
        CHECK(parse_dot(text, "rt.dot", kNeedEndpoints) == s);
        s.set_endpoints({});
        CHECK(parse_dot(to_dot(s), "rt.dot") == s);
      }
    }
  }
}

TEST_CASE("round trip keeps awkward weights bit for bit") {
  // 1e-7 must be written quoted (Graphviz would read an unquoted 1e-7 as 1).
  const Schedule s(3, {{{{1, 1e-7}, {2, 0.1}}, {{0, 1.0 / 3.0}}, {}}},
                   {{1.0 - 1e-7 - 0.1, 2.0 / 3.0, 1.0}},
                   {"tcp://h:1", "ipc:///tmp/x", "tcp://h:2"});
  const std::string text = to_dot(s);
  CHECK(contains(text, "\"1e-07\""));
  CHECK(parse_dot(text, "rt.dot") == s);
}

TEST_CASE("the written file is plain Graphviz, with only the weights the reader cannot infer") {
  GeneratorOptions o;
  o.num_peers = 4;
  const std::string text = to_dot(generate_topology(TopologyKind::kOnePeerExponential, o), "hi");
  CHECK(text.rfind("// hi\ndigraph G {\nperiod=2;\n", 0) == 0);
  CHECK(contains(text, "0 [endpoint=\"tcp://127.0.0.1:29500\"];"));
  CHECK(contains(text, "0->1  [phase=0];"));
  CHECK(contains(text, "0->2  [phase=1];"));
  CHECK_FALSE(contains(text, "weight"));  // uniform
  const std::string ring = to_dot(generate_topology(TopologyKind::kRing, o));
  CHECK_FALSE(contains(ring, "phase"));
  CHECK_FALSE(contains(ring, "period"));
  o.self_weight = 0.3;  // only the self weight is needed
  const std::string mixed = to_dot(generate_topology(TopologyKind::kExponential, o));
  CHECK(contains(mixed, "2->2  [weight=0.3];"));
  CHECK(contains(mixed, "2->3 ;"));
  // Anything else: every weight.
  const Schedule odd(3, {{{{1, 0.25}, {2, 0.125}}, {{0, 0.5}}, {{0, 0.5}}}}, {{0.625, 0.5, 0.5}});
  const std::string explicit_weights = to_dot(odd);
  CHECK(contains(explicit_weights, "0->0  [weight=0.625];"));
  CHECK(contains(explicit_weights, "0->1  [weight=0.25];"));
  CHECK(contains(explicit_weights, "0->2  [weight=0.125];"));
  CHECK(contains(explicit_weights, "1->0 ;"));  // rank 1 is uniform
  CHECK(parse_dot(explicit_weights, "odd.dot") == odd);
}

TEST_CASE("reading a uniform file with a self weight equals generating with that self weight") {
  for (TopologyKind kind : all_topology_kinds()) {
    // Their own weights make them exact, so they take no self weight.
    if (kind == TopologyKind::kBase || kind == TopologyKind::kHyperHypercube) continue;
    GeneratorOptions o;
    o.num_peers = 8;
    const std::string text = to_dot(generate_topology(kind, o));
    o.self_weight = 0.5;
    CAPTURE(topology_kind_name(kind));
    CHECK(parse_dot(text, "u.dot", {.require_endpoints = false, .self_weight = 0.5}) ==
          generate_topology(kind, o));
  }
}

TEST_CASE("defaults when reading: uniform weights, self-edges, self weight option, all phases") {
  const Schedule s = parse_dot(R"(
    /* a hand-written file */
    digraph ring {
      period = 2;
      0 -> 1;                          // every phase
      1 -> 0; 1 -> 2 [phase=1];
      2 -> 0 [phase=0];
      2 -> 2 [weight=0.25, phase=0];   // self weight given, out-edges share the rest
      0 -> 0 [color=red];              // no weight: the default applies
    })",
                               "hand.dot");
  REQUIRE(s.period() == 2);
  CHECK(s.out_edges(0, 0) == std::vector<Push>{{1, 0.5}});
  CHECK(s.out_edges(0, 1) == std::vector<Push>{{1, 0.5}});
  CHECK(s.out_edges(1, 0) == std::vector<Push>{{0, 0.5}});
  CHECK(s.out_edges(1, 1) == std::vector<Push>{{0, 1.0 / 3.0}, {2, 1.0 / 3.0}});
  CHECK(s.out_edges(2, 0) == std::vector<Push>{{0, 0.75}});
  CHECK(s.self_weight(2, 0) == 0.25);
  CHECK(s.out_edges(2, 1).empty());
  CHECK(s.self_weight(2, 1) == 1.0);
  CHECK_FALSE(s.has_endpoints());

  const Schedule a = parse_dot("digraph { 0 -> 1; 0 -> 2; 1 -> 0; 2 -> 0 [weight=0.125] }", "a.dot",
                               {.self_weight = 0.6});
  CHECK(a.self_weight(0, 0) == 0.6);
  CHECK(a.out_edges(0, 0)[0].weight == doctest::Approx(0.2));
  CHECK(a.self_weight(2, 0) == 0.875);  // explicit weights override the self weight option
}

namespace {

// A file with one problem, and what its error must say after "bad.dot: " ("": no error).
struct BadFile {
  std::string text;
  std::string expected;
};

void check_each_reported(const std::vector<BadFile>& cases) {
  for (const BadFile& c : cases) {
    CAPTURE(c.text);
    const std::string what = error_of(c.text);
    if (c.expected.empty()) {
      CHECK(what == "");
    } else {
      CHECK(contains(what, "topology file bad.dot has"));
      CHECK(contains(what, "bad.dot: " + c.expected));
    }
  }
}

}  // namespace

TEST_CASE("bad files: syntax, nodes and endpoints are reported with their place") {
  check_each_reported({
      {"digraph { 0 -> }", "syntax error"},
      {"graph { 0 -- 1 }", "the file holds an undirected `graph`; expected a `digraph`"},
      {"", "syntax error"},
      {"digraph { }", "the graph has no nodes"},
      {"digraph { 0 -> 1; 1 -> a }", "node 'a': its name must be its rank"},
      {"digraph { 0 -> 1; 1 -> a }", "rank 2 has no node"},
      {"digraph { 0 -> 01; 01 -> 0 }", "node '01'"},
      {"digraph { 0 -> 2; 2 -> 0 }", "node 2: rank 2 is outside 0..1"},
      {"digraph { 0 [endpoint=\"tcp://a:1\"]; 0 -> 1; 1 -> 0 }",
       "node 1: no endpoint; expected an attribute like endpoint=\"tcp://10.0.0.3:5600\" (other "
       "nodes have one)"},
      {"digraph { 0 [endpoint=\"a:1\"]; 1 [endpoint=\"tcp://a:2\"]; 0 -> 1; 1 -> 0 }",
       "node 0: endpoint 'a:1' is not a ZeroMQ address"},
      {"digraph { 0 [endpoint=\"tcp://a:1\"]; 1 [endpoint=\"tcp://a:1\"]; 0 -> 1; 1 -> 0 }",
       "node 1: endpoint tcp://a:1 is already node 0's"},
  });
  CHECK(contains(error_of("digraph { 0 -> 1; 1 -> 0 }", kNeedEndpoints), "node 0: no endpoint"));
  // Port 0 (or *) is not an address a peer has yet: every node may have it (sgp launch picks).
  const Schedule free = parse_dot(
      "digraph { 0 [endpoint=\"tcp://127.0.0.1:0\"]; 1 [endpoint=\"tcp://127.0.0.1:0\"]; "
      "2 [endpoint=\"tcp://127.0.0.1:*\"]; 3 [endpoint=\"tcp://127.0.0.1:*\"]; 0 -> 1; 1 -> 2; "
      "2 -> 3; 3 -> 0 }",
      "free.dot", kNeedEndpoints);
  CHECK(free.endpoint(1) == "tcp://127.0.0.1:0");
}

TEST_CASE("bad files: weights, self weights and phases are reported with what was expected") {
  check_each_reported({
      {"digraph { 0 -> 1 [weight=-0.5]; 1 -> 0 }",
       "edge 0 -> 1: weight -0.5 is negative; expected a weight >= 0"},
      {"digraph { 0 -> 1 [weight=\"inf\"]; 1 -> 0 }", "edge 0 -> 1: weight inf is not finite"},
      {"digraph { 0 -> 1 [weight=\"nan\"]; 1 -> 0 }", "edge 0 -> 1: weight nan is not finite"},
      {"digraph { 0 -> 1 [weight=half]; 1 -> 0 }", "edge 0 -> 1: weight 'half' is not a number"},
      {"digraph { 0 -> 1 [weight=1e-3]; 1 -> 0 }",
       "line 1: badly delimited number '1e-3': Graphviz reads it as '1' followed by 'e-3'"},
      {"digraph { 0 -> 1 [weight=0.75]; 0 -> 2 [weight=0.5]; 1 -> 0; 2 -> 0 }",
       "rank 0: the weights of its out-edges sum to 1.25, above 1"},
      {"digraph { 0 -> 1 [weight=0.5]; 0 -> 0 [weight=0.25]; 1 -> 0 }",
       "edge 0 -> 0: self-edge weight 0.25 conflicts with its out-edges, which leave it 1 - 0.5 = "
       "0.5"},
      {"digraph { 0 -> 1 [weight=0.5]; 0 -> 2; 1 -> 0; 2 -> 0 }",
       "rank 0: edge 0 -> 1 has a weight but edge 0 -> 2 has none"},
      {"digraph { 0 -> 1; 1 -> 0; 2 -> 2 [weight=0.5]; 2 -> 0 [phase=0] }", ""},  // fine
      {"digraph { 0 -> 1; 1 -> 0; 2 -> 2 [weight=0.5] }",
       "edge 2 -> 2: rank 2 pushes to nobody, so it keeps everything: its self weight must be 1"},
      {"digraph { 0 -> 1; 1 -> 0; 1 -> 1 [weight=1.5] }",
       "edge 1 -> 1: self weight 1.5 is above 1"},
      {"digraph { period=2; 0 -> 1 [phase=2]; 1 -> 0 }",
       "edge 0 -> 1 (phase 2): phase 2 is outside 0..1 (period 2)"},
      {"digraph { period=2; 0 -> 1 [phase=-1]; 1 -> 0 }",
       "edge 0 -> 1 (phase -1): phase -1 is outside 0..1"},
      {"digraph { period=2; 0 -> 1 [phase=one]; 1 -> 0 }",
       "edge 0 -> 1 (phase one): phase 'one' is not an integer"},
      {"digraph { 0 -> 1 [phase=1]; 1 -> 0 }",
       "edge 0 -> 1 (phase 1): phase 1 but the graph has no period attribute"},
      {"digraph { period=0; 0 -> 1; 1 -> 0 }", "graph attribute period='0': expected an integer"},
      {"digraph { 0 -> 1; 1 -> 0; 0 -> 1 }",
       "edge 0 -> 1 appears twice: also as edge 0 -> 1; each edge may appear once per phase"},
      {"digraph { period=2; 0 -> 1; 1 -> 0; 0 -> 1 [phase=1] }",
       "edge 0 -> 1 (phase 1) appears twice in phase 1: also as edge 0 -> 1"},
      {"digraph { 0 -> 1 [weight=0]; 1 -> 0 }",
       "edge 0 -> 1: weight 0 pushes nothing, yet its receiver would wait for it every round"},
      {"digraph { period=2; 0 -> 1 [phase=1, weight=\"0.0\"]; 1 -> 0 }",
       "edge 0 -> 1 (phase 1): weight 0.0 pushes nothing"},
      {"digraph { 0 -> 0 [weight=1]; 0 -> 1; 1 -> 0 }",
       "edge 0 -> 0: self weight 1 leaves nothing for the out-edges of rank 0"},
      {"digraph { 0 -> 0 [weight=0]; 0 -> 1 [weight=1]; 1 -> 0 }", ""},  // p_ii = 0 is fine
  });
}

TEST_CASE("bad files: public keys are reported with what was expected") {
  check_each_reported({
      {"digraph { 0 [public_key=\"short\"]; 0 -> 1; 1 -> 0 }",
       "node 0: public_key 'short' is not a CURVE public key (40 Z85 characters"},
      {"digraph { 0 [public_key=\"" + std::string(40, '~') + "\"]; 1; 0 -> 1; 1 -> 0 }",
       "node 0: public_key '" + std::string(40, '~') + "' is not a CURVE public key"},
      // 5 Z85 characters above 2^32 - 1 do not decode.
      {"digraph { 0 [public_key=\"" + std::string(40, '#') + "\"]; 1; 0 -> 1; 1 -> 0 }",
       "node 0: public_key '" + std::string(40, '#') + "' is not a CURVE public key"},
      {"digraph { 0 [public_key=\"" + std::string(40, 'a') + "\"]; 0 -> 1; 1 -> 0 }",
       "node 1: no public_key; expected an attribute like public_key="},
      {"digraph { 0 [public_key=\"" + std::string(40, 'a') + "\"]; 1 [public_key=\"" +
           std::string(40, 'a') + "\"]; 0 -> 1; 1 -> 0 }",
       "node 1: public_key " + std::string(40, 'a') + " is already node 0's"},
      {"digraph { monitor_public_key=\"" + std::string(40, 'b') + "\"; 0 -> 1; 1 -> 0 }",
       "graph attribute monitor_public_key: the nodes have no public_key"},
  });
}

TEST_CASE("public keys: read, kept by with_self_weight, written back") {
  const std::string k0(40, 'a'), k1 = std::string(39, 'b') + "&", km(40, 'c');
  const std::string text = "digraph { monitor_public_key=\"" + km + "\"; 0 [public_key=\"" + k0 +
                           "\"]; 1 [public_key=\"" + k1 + "\"]; 0 -> 1; 1 -> 0 }";
  const Schedule s = parse_dot(text, "keys.dot");
  REQUIRE(s.has_public_keys());
  CHECK(s.public_key(0) == k0);
  CHECK(s.public_key(1) == k1);
  CHECK(s.monitor_public_key() == km);
  CHECK(s.with_self_weight(0.5).public_keys() == s.public_keys());
  CHECK(parse_dot(to_dot(s), "again.dot") == s);
  CHECK_FALSE(parse_dot("digraph { 0 -> 1; 1 -> 0 }", "plain.dot").has_public_keys());
}

TEST_CASE("hostile files: deep nesting and huge schedules are refused before they cost memory") {
  SUBCASE("20,000 nested braces (crashed Boost's recursive parser)") {
    const std::string text =
        "digraph {\n0 -> 1;\n" + std::string(20000, '{') + std::string(20000, '}') + "\n}";
    const std::string what = error_of(text);
    CHECK(contains(what, "bad.dot: line 3: braces or brackets nested more than 100 deep"));
  }
  SUBCASE("braces inside strings and comments do not count") {
    const std::string deep = std::string(500, '{');
    CHECK(error_of("digraph { /* " + deep + " */ 0 [label=\"" + deep + "\"]; 0 -> 1; 1 -> 0 }")
              .empty());
    CHECK(error_of("digraph { subgraph a { subgraph b { 0 -> 1 } } 1 -> 0 }").empty());
  }
  SUBCASE("3000 nodes and period 1024 (took 1.5 GB)") {
    std::string text = "digraph { period=1024;\n";
    for (int i = 0; i < 3000; ++i) text += fmt::format("{} -> {};\n", i, (i + 1) % 3000);
    text += "}";
    const std::string what = error_of(text);
    CHECK(contains(what, "bad.dot: too large: 3000 peers x period 1024 = 3072000"));
  }
  SUBCASE("few nodes, but each edge expanded over every phase") {
    std::string text = "digraph { period=1024;\n";
    for (int i = 0; i < 250; ++i)
      for (int j = 0; j < 250; ++j)
        if (i != j) text += fmt::format("{}->{};", i, j);
    text += "}";
    CHECK(contains(error_of(text), "63744000 (edge, phase) pairs"));
  }
}

TEST_CASE("every problem in a file is reported, not only the first") {
  const std::string what = error_of(R"(digraph {
    period=3;
    0 [endpoint="tcp://h:1"]; 1; 2 [endpoint="tcp://h:1"];
    0 -> 1 [weight=-1];
    1 -> 2 [phase=5];
    2 -> 0 [weight=2e-1];
    2 -> 0;
  })");
  CHECK(contains(what, "has 6 problems:"));
  CHECK(contains(what, "bad.dot: line 6: badly delimited number '2e-1'"));
  CHECK(contains(what, "bad.dot: node 1: no endpoint"));
  CHECK(contains(what, "bad.dot: node 2: endpoint tcp://h:1 is already node 0's"));
  CHECK(contains(what, "bad.dot: edge 0 -> 1: weight -1 is negative"));
  CHECK(contains(what, "bad.dot: edge 1 -> 2 (phase 5): phase 5 is outside 0..2"));
  CHECK(
      contains(what, "bad.dot: edge 2 -> 0 appears twice in phases 0, 1, 2: also as edge 2 -> 0"));
}

TEST_CASE("files: read what was written, clear errors for missing or unwritable paths") {
  sgp::testing::TempDir dir;
  GeneratorOptions o;
  o.num_peers = 8;
  const Schedule s = generate_topology(TopologyKind::kTorus, o);
  write_dot_file(s, dir / "torus.dot", "torus");
  CHECK(read_dot_file(dir / "torus.dot", kNeedEndpoints) == s);
  CHECK_THROWS_WITH_AS(read_dot_file(dir / "missing.dot"), doctest::Contains("missing.dot"),
                       InputError);
  CHECK_THROWS_AS(write_dot_file(s, dir / "no-such-dir" / "x.dot"), sgp::IoError);
}

TEST_CASE("shipped topologies/*.dot equal what the generator makes now") {
  const char* source_dir = std::getenv("SGP_SOURCE_DIR");
  REQUIRE_MESSAGE(source_dir != nullptr, "SGP_SOURCE_DIR is set by tests/meson.build");
  const std::filesystem::path dir = std::filesystem::path(source_dir) / "topologies";
  int files = 0;
  for (TopologyKind kind : all_topology_kinds()) {
    for (int n : {4, 8, 16}) {
      GeneratorOptions o;
      o.num_peers = n;
      const Schedule s = generate_topology(kind, o);
      const auto path = dir / fmt::format("{}-{}.dot", topology_kind_name(kind), n);
      CAPTURE(path.string());
      REQUIRE_MESSAGE(std::filesystem::exists(path),
                      "run scripts/generate-topologies to create it");
      CHECK(slurp(path) == to_dot(s, generator_command_line(kind, o)));
      CHECK(read_dot_file(path, kNeedEndpoints) == s);
      ++files;
    }
  }
  int on_disk = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    on_disk += entry.path().extension() == ".dot" ? 1 : 0;
  CHECK(on_disk == files);  // nothing stale is shipped beside them
}
