#include "autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>

#include "core/shape.h"

namespace minigrad {
namespace autograd {

// ---- SavedValue ----
double SavedValue::toDouble() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  MG_CHECK(std::holds_alternative<double>(v_), "saved_data: value is not a number");
  return std::get<double>(v_);
}
int64_t SavedValue::toInt() const {
  MG_CHECK(std::holds_alternative<int64_t>(v_), "saved_data: value is not an integer");
  return std::get<int64_t>(v_);
}
bool SavedValue::toBool() const {
  MG_CHECK(std::holds_alternative<bool>(v_), "saved_data: value is not a bool");
  return std::get<bool>(v_);
}
const Shape& SavedValue::toShape() const {
  MG_CHECK(std::holds_alternative<Shape>(v_), "saved_data: value is not a shape");
  return std::get<Shape>(v_);
}
const std::string& SavedValue::toString() const {
  MG_CHECK(std::holds_alternative<std::string>(v_), "saved_data: value is not a string");
  return std::get<std::string>(v_);
}

// ---- AutogradContext ----
void AutogradContext::save_for_backward(const tensor_list& tensors) {
  save_called_ = true;
  saved_.clear();
  saved_.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    if (!t.defined()) {
      saved_.push_back(SavedVariable{});
      continue;
    }
    // An alias without history: saving an output would otherwise make a cycle
    // (output -> node -> saved output) and leak the whole graph.
    saved_.push_back(SavedVariable{as_strided(t, t.sizes(), t.strides(), t.storage_offset()), t.version()});
  }
}

tensor_list AutogradContext::saved_tensors() const {
  MG_CHECK(!released_,
           "{}.backward: the saved tensors were freed by an earlier backward. Trying to backward through the "
           "graph a second time? Pass retain_graph=true to the first backward.",
           *function_name_);
  MG_CHECK(save_called_,
           "{}.backward asked for saved tensors, but forward never called ctx.save_for_backward(). A backward "
           "that needs an input must save it in forward (the gradient-leak pitfall).",
           *function_name_);
  tensor_list out;
  out.reserve(saved_.size());
  for (size_t i = 0; i < saved_.size(); ++i) {
    const SavedVariable& s = saved_[i];
    if (s.data.defined())
      MG_CHECK(s.data.version() == s.saved_version,
               "{}.backward: saved tensor {} was modified by an in-place op after it was saved (it is at "
               "version {}, saved at version {}); its gradient would be wrong. Clone it before changing it, or "
               "change it out of place.",
               *function_name_, i, s.data.version(), s.saved_version);
    out.push_back(s.data);
  }
  return out;
}

void AutogradContext::release() {
  saved_.clear();
  saved_.shrink_to_fit();
  saved_data.clear();
  released_ = true;
}

std::string demangled_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = (status == 0 && d) ? d : mangled;
  std::free(d);
  // Keep the class name only: "minigrad::(anonymous namespace)::Mul" -> "Mul".
  const size_t colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

namespace detail {

tensor_list FunctionNode::prepare_grad_outputs(tensor_list&& grad_outputs) const {
  // An output that no path used gets no gradient from the engine: backward sees zeros,
  // so a Function never has to test for undefined gradients.
  for (size_t i = 0; i < grad_outputs.size(); ++i)
    if (!grad_outputs[i].defined()) {
      const TensorMeta& m = output_meta(i);
      grad_outputs[i] = zeros(m.sizes, TensorOptions(m.dtype).device(m.device));
    }
  return std::move(grad_outputs);
}

tensor_list FunctionNode::check_grad_inputs(tensor_list&& grads) const {
  const std::string& fn = ctx_.function_name();
  MG_CHECK(grads.size() == args_.size(),
           "{}.backward returned {} gradients, but forward took {} arguments: return one per argument "
           "(Tensor() for arguments that need none)",
           fn, grads.size(), args_.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const ArgInfo& arg = args_[i];
    Tensor& g = grads[i];
    if (!arg.needs_grad) {
      MG_CHECK(!g.defined() || arg.is_tensor,
               "{}.backward returned a gradient for argument {}, which is not a tensor; return Tensor() there", fn,
               i);
      g = Tensor();  // not wanted: drop it rather than carry it through the graph
      continue;
    }
    MG_CHECK(g.defined(),
             "{}.backward returned no gradient for argument {}, which requires grad. Returning nothing would "
             "silently leave its gradient at zero (the gradient-leak pitfall); return zeros explicitly if "
             "that is really meant.",
             fn, i);
    MG_CHECK(g.sizes() == arg.meta.sizes, "{}.backward returned a gradient of shape {} for argument {} of shape {}",
             fn, shape_str(g.sizes()), i, shape_str(arg.meta.sizes));
    MG_CHECK(g.dtype() == arg.meta.dtype, "{}.backward returned a {} gradient for argument {}, which is {}", fn,
             g.dtype(), i, arg.meta.dtype);
    MG_CHECK(g.device() == arg.meta.device, "{}.backward returned a gradient on {} for argument {}, which is on {}",
             fn, g.device(), i, arg.meta.device);
  }
  return std::move(grads);
}

Tensor fresh_output(const Tensor& out, const std::vector<const Tensor*>& inputs) {
  for (const Tensor* in : inputs)
    if (in->is_same(out)) return as_strided(out, out.sizes(), out.strides(), out.storage_offset());
  return out;
}

void record_outputs(const std::shared_ptr<FunctionNode>& node, tensor_list& outputs,
                    const std::vector<const Tensor*>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    MG_CHECK(out.defined(), "{}.forward returned an undefined tensor as output {}", node->name(), i);
    out = fresh_output(out, inputs);
    if (!is_floating(out.dtype())) {  // integer and bool outputs carry no gradient
      node->add_output_meta(TensorMeta::of(out));
      continue;
    }
    TensorImpl* impl = out.impl();
    impl->grad_fn = node;
    impl->output_nr = static_cast<uint32_t>(i);
    node->add_output_meta(TensorMeta::of(out));
  }
}

}  // namespace detail
}  // namespace autograd
}  // namespace minigrad
