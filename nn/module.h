#pragma once
// nn::Module: what a layer is besides its forward. A module owns named tensors, its
// parameters (trained: they require grad) and its buffers (state that is not trained), and
// named child modules; through them it answers for the whole tree: every parameter with a
// dotted name ("0.weight", "fc1.bias"), the train/eval switch, moving to a device or dtype,
// clearing gradients. The names and meanings are those of PyTorch's C++ frontend.
//
// A parameter lives in a Tensor member of the module that declares it; registering it also
// records where that member is, so that to() can replace the member itself (a tensor moved
// to another device is a new tensor) and every later forward sees the moved one:
//
//   class Scale : public nn::Module {
//    public:
//     explicit Scale(int64_t n) { register_parameter("weight", weight, ones({n})); }
//     Tensor forward(const Tensor& x) override { return x * weight; }
//     Tensor weight;
//   };
//
// Modules are held by std::shared_ptr (register_module keeps children so), and are not
// copyable: the registry points into the object.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace nn {

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // The one-tensor forward of the layers that have one (Sequential calls it). A module with
  // another signature defines its own forward and leaves this one, which raises.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // The module's type, for messages and printing ("Linear").
  virtual std::string name() const { return "Module"; }

  // Every parameter of this module and, with recurse, of its children, depth first in the
  // order of registration, named by its path.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // The number of elements of all parameters.
  int64_t num_parameters() const;

  // Training mode (the default) or evaluation mode, for this module and its children:
  // Dropout drops only in training.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer to `device` and/or casts the floating ones to `dtype`.
  // A moved parameter is a new leaf that requires grad (its gradient is not carried over).
  void to(Device device);
  void to(DType dtype);
  void to(Device device, DType dtype);

  // Forgets every parameter's gradient (PyTorch's set_to_none = true): the next backward
  // writes them afresh.
  void zero_grad();

 protected:
  // Stores value in `slot` (a Tensor member of this module), requiring grad, under `name`.
  Tensor& register_parameter(const std::string& name, Tensor& slot, Tensor value, bool requires_grad = true);
  // The same for state that is not trained (running statistics, masks): no gradient.
  Tensor& register_buffer(const std::string& name, Tensor& slot, Tensor value);
  // Adds a child module under `name`, and returns it.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  void check_new_name(const std::string& name) const;
  void apply_to_tensors(std::optional<Device> device, std::optional<DType> dtype);
  void collect(std::vector<std::pair<std::string, Tensor>>& out, const std::string& prefix, bool buffers,
               bool recurse) const;

  std::vector<std::pair<std::string, Tensor*>> parameters_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace nn
}  // namespace minigrad
