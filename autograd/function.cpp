#include <minigrad/autograd/function.h>

#include <cxxabi.h>

#include <cstdlib>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/shape.h>

namespace minigrad {
namespace autograd {

// ---- SavedValue and SavedData ----
void SavedValue::fail(const char* expected) const {
  if (!is_set() && key_ && function_name_)
    MG_CHECK(false, "{}.backward read ctx.saved_data[\"{}\"], which forward never set", **function_name_, *key_);
  if (key_ && function_name_)
    MG_CHECK(false, "{}: ctx.saved_data[\"{}\"] is not {}", **function_name_, *key_, expected);
  MG_CHECK(false, "saved_data: value is not {}", expected);
}
double SavedValue::toDouble() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  if (!std::holds_alternative<double>(v_)) fail("a number");
  return std::get<double>(v_);
}
int64_t SavedValue::toInt() const {
  if (!std::holds_alternative<int64_t>(v_)) fail("an integer");
  return std::get<int64_t>(v_);
}
bool SavedValue::toBool() const {
  if (!std::holds_alternative<bool>(v_)) fail("a bool");
  return std::get<bool>(v_);
}
const Shape& SavedValue::toShape() const {
  if (!std::holds_alternative<Shape>(v_)) fail("a shape");
  return std::get<Shape>(v_);
}
const std::string& SavedValue::toString() const {
  if (!std::holds_alternative<std::string>(v_)) fail("a string");
  return std::get<std::string>(v_);
}

SavedValue& SavedData::operator[](const std::string& key) {
  auto [it, inserted] = values_.try_emplace(key);
  if (inserted) {
    it->second.key_ = &it->first;  // map nodes do not move: the pointer stays valid
    it->second.function_name_ = function_name_;
  }
  return it->second;
}

// ---- AutogradContext ----
void AutogradContext::save_for_backward(const tensor_list& tensors) {
  save_called_ = true;
  saved_.clear();
  saved_.reserve(tensors.size());
  // Kept as they are (with history) for now; mark_saved_outputs strips the history of the
  // ones that turn out to be outputs once forward has returned.
  for (const Tensor& t : tensors) saved_.push_back(SavedVariable{t, t.defined() ? t.version() : 0});
}

tensor_list AutogradContext::saved_tensors() const {
  MG_CHECK(save_called_,
           "{}.backward asked for saved tensors, but forward never called ctx.save_for_backward(). A backward "
           "that needs an input must save it in forward (the gradient-leak pitfall).",
           *function_name_);
  MG_CHECK(!released_,
           "{}.backward: the saved tensors were freed by an earlier backward. Trying to backward through the "
           "graph a second time? Pass retain_graph=true to the first backward.",
           *function_name_);
  // An output regains its history only when the backward is itself recorded (create_graph):
  // an alias of the saved data whose grad_fn is this node.
  const bool with_history = GradMode::is_enabled() && node_ != nullptr;
  tensor_list out;
  out.reserve(saved_.size());
  for (size_t i = 0; i < saved_.size(); ++i) {
    const SavedVariable& s = saved_[i];
    if (!s.data.defined()) {
      out.emplace_back();
      continue;
    }
    MG_CHECK(s.data.version() == s.saved_version,
             "{}.backward: saved tensor {} was modified by an in-place op after it was saved (it is at "
             "version {}, saved at version {}); its gradient would be wrong. Clone it before changing it, or "
             "change it out of place.",
             *function_name_, i, s.data.version(), s.saved_version);
    if (s.is_output && with_history) {
      Tensor alias = as_strided(s.data, s.data.sizes(), s.data.strides(), s.data.storage_offset());
      alias.impl()->grad_fn = node_->shared_from_this();
      alias.impl()->output_nr = s.output_nr;
      out.push_back(std::move(alias));
    } else {
      out.push_back(s.data);
    }
  }
  return out;
}

void AutogradContext::mark_non_differentiable(const tensor_list& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.push_back(t.impl());
}

bool AutogradContext::is_non_differentiable(const Tensor& output) const {
  for (const TensorImpl* impl : non_differentiable_)
    if (impl == output.impl()) return true;
  return false;
}

void AutogradContext::mark_saved_outputs(const tensor_list& raw_outputs, const std::vector<const Tensor*>& inputs) {
  for (SavedVariable& s : saved_) {
    if (!s.data.defined()) continue;
    bool is_input = false;
    for (const Tensor* in : inputs) is_input = is_input || (in && in->is_same(s.data));
    if (is_input) continue;  // an input returned unchanged stays an input
    for (size_t i = 0; i < raw_outputs.size(); ++i) {
      if (!raw_outputs[i].is_same(s.data)) continue;
      s.is_output = true;
      s.output_nr = static_cast<uint32_t>(i);
      // An alias without history: the output's own impl is about to get grad_fn = this
      // node, and holding it here would make the cycle output -> node -> saved output.
      s.data = as_strided(s.data, s.data.sizes(), s.data.strides(), s.data.storage_offset());
      break;
    }
  }
}

// The saved tensors go; saved_data and the typed state stay (they hold no tensors), so a
// node that saved only values can run again, as in PyTorch.
void AutogradContext::release() {
  saved_.clear();
  saved_.shrink_to_fit();
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

FunctionNode::~FunctionNode() {
  std::vector<std::shared_ptr<Node>> held;
  for (const SavedVariable& s : ctx_.saved_variables()) {
    TensorImpl* impl = s.data.impl();
    if (impl && impl->grad_fn && s.data.impl_ptr().use_count() == 1) held.push_back(std::move(impl->grad_fn));
  }
  if (!held.empty()) release_nodes(std::move(held));
}

std::vector<TensorMeta> FunctionNode::saved_tensor_metas() const {
  std::vector<TensorMeta> metas;
  for (const SavedVariable& s : ctx_.saved_variables())
    if (s.data.defined()) metas.push_back(TensorMeta::of(s.data));
  return metas;
}

tensor_list FunctionNode::prepare_grad_outputs(tensor_list&& grad_outputs) const {
  // An output that no path used gets no gradient from the engine: backward sees zeros,
  // so a Function never has to test for undefined gradients (unless it asked to).
  if (!ctx_.materialize_grads()) return std::move(grad_outputs);
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

void FunctionNode::guard_once_differentiable(tensor_list& grad_inputs, const tensor_list& grad_outputs) const {
  // What the gradients may depend on: the incoming gradients, the saved tensors, and the
  // forward's inputs themselves. The inputs count even when nothing of them was saved: a
  // backward can read what its forward kept another way (cross_entropy on CUDA keeps the
  // gradient its forward computed, not the logits), and the engine cannot see whether its
  // result depends on them. Without their edges a second backward would report "does not
  // require grad", or treat the gradient as constant, where the truth is that no second
  // derivative was written. If none of these has history, a second backward cannot reach
  // this node anyway.
  std::vector<Edge> edges;
  auto add_edge = [&](const Tensor& t) {
    if (t.defined() && t.requires_grad()) edges.push_back(gradient_edge(t));
  };
  for (const Tensor& g : grad_outputs) add_edge(g);
  for (const Edge& e : next_edges())
    if (e.valid()) edges.push_back(e);
  // A saved output was stored without its history (it would point back at this node: a
  // cycle), but its history is this node, which a second backward does reach.
  for (const SavedVariable& s : ctx_.saved_variables()) {
    if (s.is_output)
      edges.push_back(Edge{std::const_pointer_cast<Node>(shared_from_this()), s.output_nr});
    else
      add_edge(s.data);
  }
  if (edges.empty()) return;
  auto error_node = std::make_shared<OnceDifferentiableError>(ctx_.function_name());
  error_node->set_next_edges(std::move(edges));
  for (size_t i = 0; i < grad_inputs.size(); ++i) {
    Tensor& g = grad_inputs[i];
    if (!g.defined()) continue;
    g = as_strided(g, g.sizes(), g.strides(), g.storage_offset());
    g.impl()->grad_fn = error_node;
    g.impl()->output_nr = static_cast<uint32_t>(error_node->num_outputs());
    error_node->add_output_meta(TensorMeta::of(g));
  }
}

void record_outputs(const std::shared_ptr<FunctionNode>& node, tensor_list& outputs,
                    const std::vector<const Tensor*>& inputs) {
  node->ctx_.mark_saved_outputs(outputs, inputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    MG_CHECK(out.defined(), "{}.forward returned an undefined tensor as output {}", node->name(), i);
    const bool differentiable = is_floating(out.dtype()) && !node->ctx_.is_non_differentiable(out);
    // An input returned unchanged becomes a fresh alias, so setting its grad_fn never
    // rewrites the input's history.
    for (const Tensor* in : inputs)
      if (in && in->is_same(out)) {
        out = as_strided(out, out.sizes(), out.strides(), out.storage_offset());
        break;
      }
    node->add_output_meta(TensorMeta::of(out));
    if (!differentiable) continue;  // integer, bool and marked outputs carry no gradient
    TensorImpl* impl = out.impl();
    impl->grad_fn = node;
    impl->output_nr = static_cast<uint32_t>(i);
  }
}

}  // namespace detail
}  // namespace autograd
}  // namespace minigrad
