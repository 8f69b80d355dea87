#pragma once
// DeviceBuffer<T>: an owning, move-only array in a backend's memory.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "sgp/compute/backend.hpp"
#include "sgp/error.hpp"

namespace sgp::compute {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, std::size_t size)
      : backend_(&backend),
        data_(size ? static_cast<T*>(backend.allocate(size * sizeof(T))) : nullptr),
        size_(size) {}
  DeviceBuffer(Backend& backend, std::span<const T> host) : DeviceBuffer(backend, host.size()) {
    upload(host);
  }
  ~DeviceBuffer() { release(); }

  DeviceBuffer(DeviceBuffer&& other) noexcept
      : backend_(other.backend_),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      backend_ = other.backend_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  Backend& backend() const { return *backend_; }

  void upload(std::span<const T> host, std::size_t offset = 0) {
    SGP_ENFORCE(offset + host.size() <= size_, "upload of {} elements at {} into a buffer of {}",
                host.size(), offset, size_);
    if (!host.empty()) backend_->upload(data_ + offset, host.data(), host.size_bytes());
  }
  void download(std::span<T> host) const {
    SGP_ENFORCE(host.size() == size_, "download into {} elements from a buffer of {}", host.size(),
                size_);
    if (size_) backend_->download(host.data(), data_, bytes());
  }
  std::vector<T> to_host() const {
    std::vector<T> host(size_);
    download(host);
    return host;
  }

 private:
  void release() noexcept {
    if (data_) backend_->deallocate(data_);
    data_ = nullptr;
    size_ = 0;
  }

  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sgp::compute
