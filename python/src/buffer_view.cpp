#include "buffer_view.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace py = pybind11;

namespace sgp::python {

namespace {

// The DLPack ABI (v0.x, dlpack.h): only the fields read here. Declared here rather than taken
// from a header: Debian ships none, and the layout is frozen by the standard.
namespace dlpack {
constexpr std::int32_t kCpu = 1, kCuda = 2, kCudaHost = 3, kCudaManaged = 13;
constexpr std::uint8_t kFloat = 2;
struct Device {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  std::int32_t ndim;
  DataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null: compact row-major
  std::uint64_t byte_offset;
};
// DLManagedTensor starts with its DLTensor: the capsule's pointer is read as a Tensor.
}  // namespace dlpack

// Whether `strides` (in units of `unit`) describe a C-contiguous layout of `shape`.
bool c_contiguous(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                  std::int64_t unit) {
  std::int64_t expected = unit;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (const auto extent : shape) count *= extent;
  return count;
}

void check_size(std::int64_t count, std::size_t numel, std::string_view what) {
  if (count != static_cast<std::int64_t>(numel)) {
    throw py::value_error(fmt::format(
        "{}: the buffer holds {} elements, but this Gossip mixes {} (numel): every peer's buffer "
        "must have the size given to Gossip",
        what, count, numel));
  }
}

void refuse_non_contiguous(std::string_view what) {
  throw py::value_error(fmt::format(
      "{}: the buffer is not C-contiguous: pass one flat contiguous buffer (numpy: "
      "np.ascontiguousarray; torch: a contiguous tensor, e.g. a flat parameter buffer), since "
      "the engine mixes it in place",
      what));
}

}  // namespace

BufferView::BufferView(const py::object& object, std::size_t numel, std::string_view what) {
  if (PyObject_CheckBuffer(object.ptr())) {
    from_buffer_protocol(object, numel, what);
  } else if (py::hasattr(object, "__dlpack__")) {
    from_dlpack(object, numel, what);
  } else {
    throw py::type_error(fmt::format(
        "{}: expected a float32 buffer (a numpy array, or a torch tensor through __dlpack__), "
        "got {}",
        what, py::str(py::type::of(object)).cast<std::string>()));
  }
}

BufferView::~BufferView() = default;

void BufferView::from_buffer_protocol(const py::object& object, std::size_t numel,
                                      std::string_view what) {
  buffer_ = std::make_unique<py::buffer_info>(py::reinterpret_borrow<py::buffer>(object).request());
  const py::buffer_info& b = *buffer_;
  const std::string& format = b.format;
  const bool float32 =
      b.itemsize == 4 && (format == "f" || format == "<f" || format == "=f" || format == "@f");
  if (!float32) {
    throw py::type_error(
        fmt::format("{}: expected float32 elements, got format '{}' with {} bytes each (numpy: "
                    "astype(np.float32) makes a float32 copy; mix that one)",
                    what, format, b.itemsize));
  }
  if (b.readonly) {
    throw py::value_error(fmt::format(
        "{}: the buffer is read-only; the engine mixes it in place, so pass a writable one", what));
  }
  if (!c_contiguous(b.shape, b.strides, b.itemsize)) refuse_non_contiguous(what);
  check_size(element_count(b.shape), numel, what);
  data_ = static_cast<float*>(b.ptr);
}

void BufferView::from_dlpack(const py::object& object, std::size_t numel, std::string_view what) {
  capsule_ = object.attr("__dlpack__")();
  const char* name = "dltensor";
  if (!PyCapsule_IsValid(capsule_.ptr(), name)) {
    throw py::type_error(
        fmt::format("{}: __dlpack__ did not return a DLPack capsule (named 'dltensor')", what));
  }
  // The capsule keeps its name, so it frees the tensor when it goes (after we are done).
  const auto* t = static_cast<const dlpack::Tensor*>(PyCapsule_GetPointer(capsule_.ptr(), name));
  if (t->dtype.code != dlpack::kFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    throw py::type_error(
        fmt::format("{}: expected float32 elements, got DLPack dtype code {} with {} bits (torch: "
                    "tensor.float() makes a float32 copy; mix that one)",
                    what, t->dtype.code, t->dtype.bits));
  }
  const std::vector<std::int64_t> shape(t->shape, t->shape + t->ndim);
  if (t->strides && !c_contiguous(shape, {t->strides, t->strides + t->ndim}, 1)) {
    refuse_non_contiguous(what);
  }
  check_size(element_count(shape), numel, what);
  switch (t->device.device_type) {
    case dlpack::kCpu:
    case dlpack::kCudaHost:
      place_ = {compute::DeviceKind::cpu, 0};
      break;
    case dlpack::kCuda:
    case dlpack::kCudaManaged:
      place_ = {compute::DeviceKind::cuda, t->device.device_id};
      break;
    default:
      throw py::value_error(fmt::format(
          "{}: the tensor is on DLPack device type {}; sgp mixes buffers in host memory or on a "
          "CUDA GPU",
          what, t->device.device_type));
  }
  data_ = reinterpret_cast<float*>(static_cast<char*>(t->data) + t->byte_offset);
}

}  // namespace sgp::python
