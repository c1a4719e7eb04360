// Device and dtype conversion ops.
#include "tensorplay/core/ops/conversion.h"

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/backend.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

Tensor copy_to_device(const Tensor& x, Device device) {
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = device});
  const Backend& b = backend_for(device.is_cuda() ? device : x.device());
  b.copy(out.raw_data(), device, x.raw_data(), x.device(), x.nbytes());
  return out;
}

Tensor convert(const Tensor& x, DType dtype) {
  Tensor out = empty(x.shape(), {.dtype = dtype, .device = x.device()});
  backend_for(x.device()).convert(x.raw_data(), x.dtype(), out.raw_data(), dtype, x.numel());
  return out;
}

struct ToDeviceBackward : autograd::Node {
  Device source;
  explicit ToDeviceBackward(Device d) : source(d) {}
  const char* name() const override { return "ToDeviceBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    return {copy_to_device(g, source)};
  }
};

struct ToDtypeBackward : autograd::Node {
  DType source;
  explicit ToDtypeBackward(DType d) : source(d) {}
  const char* name() const override { return "ToDtypeBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    return {convert(g, source)};
  }
};

}  // namespace

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor out = copy_to_device(x, device);
  out = autograd::attach(out, std::make_shared<ToDeviceBackward>(x.device()), {x});
  return trace::record("to_device", {x}, out, [device](const std::vector<Tensor>& in) {
    return to_device(in[0], device);
  });
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = convert(x, dtype);
  out = autograd::attach(out, std::make_shared<ToDtypeBackward>(x.dtype()), {x});
  return trace::record("to_dtype", {x}, out,
                       [dtype](const std::vector<Tensor>& in) { return to_dtype(in[0], dtype); });
}

// Tensor's methods that are these ops.

Tensor Tensor::to(Device target) const {
  if (device() == target) return *this;
  return tensorplay::to_device(*this, target);
}

Tensor Tensor::to(DType target) const {
  if (dtype() == target) return *this;
  return tensorplay::to_dtype(*this, target);
}

}  // namespace tensorplay
