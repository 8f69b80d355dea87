// sgp._native: the gossip engine of `sgp peer` for a training loop in Python (python/README.md).
// A thin layer over bridge::GossipSession: Python values in, C++ errors out as Python exceptions
// (InputError: ValueError, IoError: sgp._native.PeerError, an OSError; a bug: RuntimeError).
#include <memory>
#include <string>

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <nlohmann/json.hpp>

#include "buffer_view.hpp"
#include "gossip_session.hpp"
#include "sgp/config/settings.hpp"
#include "sgp/error.hpp"
#include "sgp/gossip/wire_format.hpp"
#include "sgp/log.hpp"

namespace py = pybind11;

namespace sgp::python {
namespace {

// The settings dict as the settings table reads config.json: every key a setting of `sgp peer`
// (ValueError listing them otherwise), every value checked by the table.
config::TrainConfig settings_from_dict(const py::object& settings) {
  if (settings.is_none()) return {};
  if (!py::isinstance<py::dict>(settings)) {
    throw py::type_error("settings: expected a dict of `sgp peer` settings (config.json keys)");
  }
  for (const auto& [key, value] : settings.cast<py::dict>()) {
    const std::string name = py::str(key).cast<std::string>();
    if (!config::find_setting(name)) {
      std::string keys;
      for (const config::Setting* s : config::training_settings())
        keys += fmt::format(" {}", s->key());
      throw py::value_error(fmt::format(
          "settings: '{}' is not a setting of `sgp peer`; the settings are:{}", name, keys));
    }
  }
  const std::string text = py::module_::import("json").attr("dumps")(settings).cast<std::string>();
  return config::settings_from_json(nlohmann::json::parse(text), "settings", {});
}

// The session's counters, with the names the C++ peer records them under.
py::dict metrics_of(const bridge::GossipSession& session) {
  const gossip::PushSumMetrics m = session.metrics();
  py::dict rejected;
  for (int i = 0; i < gossip::kNumRejectCauses; ++i) {
    const auto count = m.rejected[static_cast<std::size_t>(i)];
    if (count > 0) {
      rejected[py::str(
          std::string(gossip::reject_cause_name(static_cast<gossip::RejectCause>(i))))] = count;
    }
  }
  py::dict out;
  out["send_seconds"] = m.send_seconds;
  out["apply_seconds"] = m.apply_seconds;
  out["wait_seconds"] = m.wait_seconds;
  out["rounds"] = m.rounds;
  out["messages_sent"] = m.messages_sent;
  out["bytes_sent"] = m.bytes_sent;
  out["messages_received"] = m.messages_received;
  out["bytes_received"] = m.bytes_received;
  out["rejected"] = rejected;
  out["excluded_peers"] = session.excluded_peers();
  out["dropped_snapshots"] = session.dropped_snapshots();
  out["weight"] = session.weight();
  return out;
}

std::unique_ptr<bridge::GossipSession> make_session(config::TrainConfig config, int rank,
                                                    std::size_t numel) {
  configure_logging(rank, config.log_level);
  py::gil_scoped_release release;  // binding and connecting may take a moment
  return std::make_unique<bridge::GossipSession>(std::move(config), rank, numel);
}

// A path given as str or os.PathLike.
std::string path_text(const py::object& path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

std::unique_ptr<bridge::GossipSession> construct(const py::object& topology, int rank,
                                                 std::int64_t numel, const py::object& settings,
                                                 const py::object& run_dir,
                                                 const py::object& monitor,
                                                 const py::object& keys) {
  if (numel <= 0) throw py::value_error(fmt::format("numel: expected >= 1, got {}", numel));
  config::TrainConfig config = settings_from_dict(settings);
  config.topology = path_text(topology);
  if (!run_dir.is_none()) config.run_dir = path_text(run_dir);
  if (!monitor.is_none()) config.monitor = monitor.cast<std::string>();
  if (!keys.is_none()) config.keys_dir = path_text(keys);
  return make_session(std::move(config), rank, static_cast<std::size_t>(numel));
}

std::unique_ptr<bridge::GossipSession> from_env(std::int64_t numel) {
  if (numel <= 0) throw py::value_error(fmt::format("numel: expected >= 1, got {}", numel));
  bridge::SessionStart start = bridge::session_start_from_environment();
  return make_session(std::move(start.config), start.rank, static_cast<std::size_t>(numel));
}

bool step(bridge::GossipSession& session, const py::object& buffer) {
  const BufferView view(buffer, session.numel(), "Gossip.step(buffer)");
  py::gil_scoped_release release;
  return session.step(view.data(), view.place());
}

void attach(bridge::GossipSession& session, const py::object& buffer) {
  const BufferView view(buffer, session.numel(), "Gossip.attach(buffer)");
  py::gil_scoped_release release;
  session.attach(view.data(), view.place());
}

bool publish(bridge::GossipSession& session, const py::object& buffer, std::int64_t iteration) {
  const BufferView view(buffer, session.numel(), "Gossip.publish(buffer)");
  py::gil_scoped_release release;
  return session.publish(view.data(), view.place(), iteration);
}

void close(bridge::GossipSession& session, const py::object& buffer) {
  if (buffer.is_none()) {
    py::gil_scoped_release release;
    session.finish();
    return;
  }
  const BufferView view(buffer, session.numel(), "Gossip.close(buffer)");
  py::gil_scoped_release release;
  session.finish(view.data(), view.place());
}

void translate_errors(std::exception_ptr error, const py::object& peer_error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const InputError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const IoError& e) {
    PyErr_SetString(peer_error.ptr(), e.what());
  } catch (const InvariantError& e) {
    PyErr_SetString(PyExc_RuntimeError, fmt::format("sgp internal error: {}", e.what()).c_str());
  }
}

}  // namespace
}  // namespace sgp::python

PYBIND11_MODULE(_native, m) {
  using sgp::bridge::GossipSession;
  namespace sp = sgp::python;
  m.doc() = "sgp's gossip engine (push-sum over ZeroMQ) for training loops in Python";
  static py::exception<sgp::IoError> peer_error(m, "PeerError", PyExc_OSError);
  py::register_exception_translator(
      [](std::exception_ptr error) { sp::translate_errors(error, peer_error); });

  py::class_<GossipSession>(m, "Gossip")
      .def(py::init(&sp::construct), py::arg("topology"), py::arg("rank"), py::arg("numel"),
           py::arg("settings") = py::none(), py::kw_only(), py::arg("run_dir") = py::none(),
           py::arg("monitor") = py::none(), py::arg("keys") = py::none())
      .def_static("from_env", &sp::from_env, py::arg("numel"))
      .def_property_readonly("rank", &GossipSession::rank)
      .def_property_readonly("world_size", &GossipSession::world_size)
      .def_property_readonly("numel", &GossipSession::numel)
      .def_property_readonly(
          "algo", [](const GossipSession& s) { return std::string(sgp::name_of(s.config().algo)); })
      .def_property_readonly("iteration", &GossipSession::iteration)
      .def_property_readonly("weight", &GossipSession::weight)
      .def_property_readonly("bytes_sent",
                             [](const GossipSession& s) { return s.metrics().bytes_sent; })
      .def_property_readonly("closed", &GossipSession::finished)
      // keep_alive: the engine mixes the attached buffer until the Gossip goes.
      .def("attach", &sp::attach, py::arg("buffer"), py::keep_alive<1, 2>())
      .def("step", &sp::step, py::arg("buffer"))
      .def("publish", &sp::publish, py::arg("buffer"), py::arg("iteration"))
      .def("metrics", &sp::metrics_of)
      .def("pause", &GossipSession::pause, py::call_guard<py::gil_scoped_release>())
      .def("resume", &GossipSession::resume, py::call_guard<py::gil_scoped_release>())
      .def("stay_heard", &GossipSession::stay_heard, py::call_guard<py::gil_scoped_release>())
      .def("close", &sp::close, py::arg("buffer") = py::none())
      .def("__enter__", [](GossipSession& s) -> GossipSession& { return s; })
      // Leaving a `with` block normally finishes the gossip; leaving it by an exception does not
      // (a failed peer would only make finish() wait out its timeout again).
      .def("__exit__",
           [](GossipSession& s, const py::object& type, const py::object&, const py::object&) {
             if (!type.is_none()) return;
             py::gil_scoped_release release;
             s.finish();
           });
}
