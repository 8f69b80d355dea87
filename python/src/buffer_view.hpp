#pragma once
// The caller's parameters as the engine needs them: a writable, C-contiguous float32 vector in
// host memory or on a CUDA device, taken without a copy from any object that offers the buffer
// protocol (numpy arrays, bytearray-backed memoryviews) or DLPack's __dlpack__ (torch tensors).
// Everything else, and every buffer of the wrong kind, is refused with TypeError / ValueError
// naming what was expected.
#include <cstddef>
#include <memory>
#include <string_view>

#include <pybind11/pybind11.h>

#include "gossip_session.hpp"

namespace sgp::python {

class BufferView {
 public:
  // `what` names the argument in messages ("step(buffer)"); `numel`: the elements it must hold.
  BufferView(const pybind11::object& object, std::size_t numel, std::string_view what);
  ~BufferView();
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;

  float* data() const { return data_; }
  const bridge::BufferPlace& place() const { return place_; }

 private:
  void from_buffer_protocol(const pybind11::object& object, std::size_t numel,
                            std::string_view what);
  void from_dlpack(const pybind11::object& object, std::size_t numel, std::string_view what);

  float* data_ = nullptr;
  bridge::BufferPlace place_;
  std::unique_ptr<pybind11::buffer_info> buffer_;  // holds the exporter's buffer while we use it
  pybind11::object capsule_;                       // holds the DLPack tensor while we use it
};

}  // namespace sgp::python
