#pragma once
// Function<T>: how every op in minigrad, and every op a user writes, joins the tape.
//
//   struct MyReLU : Function<MyReLU> {
//     static Tensor forward(Context& ctx, const Tensor& x) {
//       ctx.save_for_backward({x});
//       return clamp_min(x, 0.0);
//     }
//     static tensor_list backward(Context& ctx, tensor_list grad_outputs) {
//       Tensor x = ctx.saved_tensors()[0];
//       return {grad_outputs[0] * (x > 0.0).to(x.dtype())};
//     }
//   };
//   Tensor y = MyReLU::apply(x);
//
// apply() runs forward with grad mode off and, when an input requires grad, records a
// node (CppNode<T>) holding the Context, the edges to the inputs' gradients and the
// metadata the gradients must match. backward returns one gradient per argument of
// forward (Tensor() for arguments that need none: non-tensors, or needs_input_grad false).
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/tensor.h"

namespace minigrad {
namespace autograd {

// A non-tensor value kept for backward: ctx.saved_data["p"] = 0.1; ... .toDouble().
class SavedValue {
 public:
  SavedValue() = default;
  SavedValue(double v) : v_(v) {}                    // NOLINT: implicit on purpose
  SavedValue(float v) : v_(static_cast<double>(v)) {}  // NOLINT
  SavedValue(bool v) : v_(v) {}                      // NOLINT
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>>>
  SavedValue(I v) : v_(static_cast<int64_t>(v)) {}  // NOLINT
  SavedValue(Shape v) : v_(std::move(v)) {}          // NOLINT
  SavedValue(std::string v) : v_(std::move(v)) {}    // NOLINT
  SavedValue(const char* v) : v_(std::string(v)) {}  // NOLINT

  double toDouble() const;  // also accepts an integer
  int64_t toInt() const;
  bool toBool() const;
  const Shape& toShape() const;
  const std::string& toString() const;

 private:
  std::variant<std::monostate, double, int64_t, bool, Shape, std::string> v_;
};

// A tensor saved for backward: a history-free alias (same storage and version counter,
// so no reference cycle through the graph) and the version it had when saved.
struct SavedVariable {
  Tensor data;
  uint64_t saved_version = 0;
};

class AutogradContext {
 public:
  // Keep tensors for backward. Saving an input or an output is equally fine.
  void save_for_backward(const tensor_list& tensors);
  // The saved tensors, checked: each must still be at the version it was saved at
  // (no in-place change since), the graph must not have been freed by an earlier
  // backward, and forward must have saved something at all (the "gradient leak" pitfall:
  // a backward that needs a tensor forward never saved fails here, loudly).
  tensor_list saved_tensors() const;
  tensor_list get_saved_variables() const { return saved_tensors(); }  // PyTorch's C++ name
  // Whether argument i of forward needs a gradient. Skip work for the ones that don't.
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }

  std::unordered_map<std::string, SavedValue> saved_data;

  // ---- used by Function<T>::apply and the node, not by op authors ----
  void set_needs_input_grad(std::vector<bool> v) { needs_input_grad_ = std::move(v); }
  // `name` must outlive the context: Function<T> passes its static name.
  void set_function_name(const std::string* name) { function_name_ = name; }
  const std::string& function_name() const { return *function_name_; }
  void release();

 private:
  std::vector<SavedVariable> saved_;
  std::vector<bool> needs_input_grad_;
  static inline const std::string kUnnamed = "Function";
  const std::string* function_name_ = &kUnnamed;
  bool save_called_ = false;
  bool released_ = false;
};
using Context = AutogradContext;

std::string demangled_name(const char* mangled);

namespace detail {

// Metadata of one forward argument: whether it was a tensor, and what its gradient must be.
struct ArgInfo {
  bool is_tensor = false;
  bool needs_grad = false;
  TensorMeta meta;
};

// The node a Function<T> records. Its backward is T::backward, wrapped in the checks.
class FunctionNode : public Node {
 public:
  std::string name() const override { return ctx_.function_name(); }
  void release_variables() override { ctx_.release(); }
  Context ctx_;
  std::vector<ArgInfo> args_;

 protected:
  // Fills in zeros for outputs that got no gradient, and checks what backward returned.
  tensor_list prepare_grad_outputs(tensor_list&& grad_outputs) const;
  tensor_list check_grad_inputs(tensor_list&& grad_inputs) const;
};

template <class T>
class CppNode final : public FunctionNode {
 public:
  tensor_list apply(tensor_list&& grad_outputs) override {
    tensor_list grads = T::backward(ctx_, prepare_grad_outputs(std::move(grad_outputs)));
    return check_grad_inputs(std::move(grads));
  }
};

template <typename A>
constexpr bool is_tensor_arg = std::is_same_v<std::decay_t<A>, Tensor>;

template <typename A>
void collect_arg(std::vector<ArgInfo>& args, std::vector<Edge>& edges, bool& any_requires_grad, const A& a) {
  ArgInfo info;
  Edge edge;
  if constexpr (is_tensor_arg<A>) {
    info.is_tensor = a.defined();
    if (a.defined() && a.requires_grad()) {
      info.needs_grad = true;
      any_requires_grad = true;
      edge = gradient_edge(a);
    }
  }
  args.push_back(std::move(info));
  edges.push_back(std::move(edge));
}

// Makes `out` a fresh alias when forward returned one of its inputs unchanged, so setting
// its grad_fn never rewrites the input's history.
Tensor fresh_output(const Tensor& out, const std::vector<const Tensor*>& inputs);
void record_outputs(const std::shared_ptr<FunctionNode>& node, tensor_list& outputs,
                    const std::vector<const Tensor*>& inputs);

template <typename A>
void push_tensor_ptr(std::vector<const Tensor*>& v, const A& a) {
  if constexpr (is_tensor_arg<A>) v.push_back(&a);
}

}  // namespace detail

template <class T>
struct Function {
  // Runs T::forward and, if anything needs a gradient, records T's node on the tape.
  // Returns what forward returns: a Tensor or a tensor_list.
  template <typename... Args>
  static auto apply(Args&&... args) {
    using Out = decltype(T::forward(std::declval<Context&>(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, tensor_list>,
                  "Function<T>::forward must return a Tensor or a tensor_list");

    std::vector<detail::ArgInfo> arg_info;
    std::vector<Edge> edges;
    bool any_requires_grad = false;
    const bool grad_mode = GradMode::is_enabled();
    if (grad_mode) {
      arg_info.reserve(sizeof...(Args));
      edges.reserve(sizeof...(Args));
      (detail::collect_arg(arg_info, edges, any_requires_grad, args), ...);
    }
    const bool record = grad_mode && any_requires_grad;

    std::shared_ptr<detail::CppNode<T>> node;
    Context local_ctx;  // used when nothing is recorded: saved tensors die with it
    Context* ctx = &local_ctx;
    if (record) {
      node = std::make_shared<detail::CppNode<T>>();
      ctx = &node->ctx_;
      std::vector<bool> needs(arg_info.size());
      for (size_t i = 0; i < arg_info.size(); ++i) needs[i] = arg_info[i].needs_grad;
      ctx->set_needs_input_grad(std::move(needs));
      ctx->set_function_name(&function_name());
    }

    Out out = [&] {
      NoGradGuard no_grad;
      return T::forward(*ctx, args...);
    }();

    if (record) {
      for (size_t i = 0; i < arg_info.size(); ++i)
        if (arg_info[i].needs_grad) arg_info[i].meta = TensorMeta::of(*detail_arg_tensor(i, args...));
      node->args_ = std::move(arg_info);
      node->set_next_edges(std::move(edges));
      std::vector<const Tensor*> inputs;
      (detail::push_tensor_ptr(inputs, args), ...);
      if constexpr (std::is_same_v<Out, Tensor>) {
        tensor_list outs{std::move(out)};
        detail::record_outputs(node, outs, inputs);
        return std::move(outs[0]);
      } else {
        detail::record_outputs(node, out, inputs);
        return out;
      }
    } else {
      return out;
    }
  }

  static const std::string& function_name() {
    static const std::string name = demangled_name(typeid(T).name());
    return name;
  }

 private:
  // The i-th argument as a Tensor (only called for tensor arguments).
  template <typename... Args>
  static const Tensor* detail_arg_tensor(size_t i, const Args&... args) {
    const Tensor* found = nullptr;
    size_t k = 0;
    auto visit = [&](const auto& a) {
      if constexpr (detail::is_tensor_arg<decltype(a)>) {
        if (k == i) found = &a;
      }
      ++k;
    };
    (visit(args), ...);
    return found;
  }
};

}  // namespace autograd

using autograd::AutogradContext;
using autograd::Context;
using autograd::Function;

}  // namespace minigrad
