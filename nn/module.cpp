// nn::Module's bookkeeping: the registry of parameters, buffers and children, and what is
// done through it to a whole tree of modules.
#include <minigrad/nn/module.h>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/error.h>

namespace minigrad {
namespace nn {

Tensor Module::forward(const Tensor&) {
  MG_CHECK(false, "{} has no forward of one tensor", name());
  return Tensor();
}

// A name must be new among the module's own parameters, buffers and children: a second
// registration under one name would make named_parameters() ambiguous.
void Module::check_new_name(const std::string& name) const {
  MG_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "{}: \"{}\" cannot name a parameter, buffer or child (empty, or with a '.')", this->name(), name);
  bool taken = false;
  for (const auto& p : parameters_) taken = taken || p.first == name;
  for (const auto& b : buffers_) taken = taken || b.first == name;
  for (const auto& c : children_) taken = taken || c.first == name;
  MG_CHECK(!taken, "{}: the name \"{}\" is already registered", this->name(), name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor& slot, Tensor value, bool requires_grad) {
  check_new_name(name);
  MG_CHECK(value.defined(), "{}: register_parameter(\"{}\") got an undefined tensor", this->name(), name);
  MG_CHECK(is_floating(value.dtype()), "{}: parameter \"{}\" must be floating, got {}", this->name(), name,
           value.dtype());
  slot = value.detach().requires_grad_(requires_grad);
  parameters_.emplace_back(name, &slot);
  return slot;
}

Tensor& Module::register_buffer(const std::string& name, Tensor& slot, Tensor value) {
  check_new_name(name);
  MG_CHECK(value.defined(), "{}: register_buffer(\"{}\") got an undefined tensor", this->name(), name);
  slot = value.detach();
  buffers_.emplace_back(name, &slot);
  return slot;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  MG_CHECK(module != nullptr, "{}: register_module(\"{}\") got a null module", this->name(), name);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(std::vector<std::pair<std::string, Tensor>>& out, const std::string& prefix, bool buffers,
                     bool recurse) const {
  for (const auto& [name, slot] : buffers ? buffers_ : parameters_) out.emplace_back(prefix + name, *slot);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(out, prefix + name + ".", buffers, true);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(out, "", /*buffers=*/false, recurse);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& named : named_parameters(recurse)) out.push_back(std::move(named.second));
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(out, "", /*buffers=*/true, recurse);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& child : children_) child.second->train(on);
}

// Each parameter becomes a new leaf, moved to `device` and cast to `dtype` where given (a
// cast touches floating tensors only), keeping whether it requires grad; each buffer is
// moved and cast the same way.
void Module::apply_to_tensors(std::optional<Device> device, std::optional<DType> dtype) {
  NoGradGuard no_grad;
  auto moved = [&](const Tensor& t) {
    Tensor out = device ? t.to(*device) : t;
    return dtype && is_floating(t.dtype()) ? out.to(*dtype) : out;
  };
  for (auto& [name, slot] : parameters_) *slot = moved(*slot).detach().requires_grad_(slot->requires_grad());
  for (auto& [name, slot] : buffers_) *slot = moved(*slot).detach();
  for (auto& child : children_) child.second->apply_to_tensors(device, dtype);
}

void Module::to(Device device) { apply_to_tensors(device, std::nullopt); }

void Module::to(DType dtype) {
  MG_CHECK(is_floating(dtype), "{}.to: parameters are floating, got {}", name(), dtype);
  apply_to_tensors(std::nullopt, dtype);
}

void Module::to(Device device, DType dtype) {
  MG_CHECK(is_floating(dtype), "{}.to: parameters are floating, got {}", name(), dtype);
  apply_to_tensors(device, dtype);
}

void Module::zero_grad() {
  for (Tensor p : parameters()) p.mutable_grad() = Tensor();
}

}  // namespace nn
}  // namespace minigrad
