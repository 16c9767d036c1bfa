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
// metadata the gradients must match. backward returns one gradient per tensor argument of
// forward (Tensor() for arguments that need none: non-tensors, or needs_input_grad false).
//
// Higher-order gradients come for free when backward is written with differentiable ops:
// under create_graph the engine runs backward with grad mode on, saved inputs come back
// with their history and saved outputs with this node as grad_fn, so every op backward
// calls is recorded like any forward op. A backward that is a raw kernel instead declares
// `static constexpr bool is_once_differentiable = true;` (see Function below).
// docs/autograd.md walks through all of it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/autograd/node.h>
#include <minigrad/core/tensor.h>

namespace minigrad {
namespace autograd {

// A non-tensor value kept for backward: ctx.saved_data["p"] = 0.1; ... .toDouble().
class SavedValue {
 public:
  SavedValue() = default;
  SavedValue(double v) : v_(v) {}                    // NOLINT: implicit on purpose
  SavedValue(float v) : v_(static_cast<double>(v)) {}  // NOLINT
  SavedValue(bool v) : v_(v) {}                      // NOLINT
  template <typename I, IfInteger<I> = 0>
  SavedValue(I v) : v_(static_cast<int64_t>(v)) {}  // NOLINT
  SavedValue(Shape v) : v_(std::move(v)) {}          // NOLINT
  SavedValue(std::string v) : v_(std::move(v)) {}    // NOLINT
  SavedValue(const char* v) : v_(std::string(v)) {}  // NOLINT
  // Assigning keeps which entry of saved_data this is (for the error messages below).
  SavedValue(const SavedValue& other) : v_(other.v_) {}
  SavedValue& operator=(const SavedValue& other) {
    v_ = other.v_;
    return *this;
  }

  double toDouble() const;  // also accepts an integer
  int64_t toInt() const;
  bool toBool() const;
  const Shape& toShape() const;
  const std::string& toString() const;
  bool is_set() const { return v_.index() != 0; }

 private:
  friend class SavedData;
  [[noreturn]] void fail(const char* expected) const;
  std::variant<std::monostate, double, int64_t, bool, Shape, std::string> v_;
  // Set by SavedData for its entries: the key, and the name of the Function that owns it.
  const std::string* key_ = nullptr;
  const std::string* const* function_name_ = nullptr;
};

// ctx.saved_data: values by name, as in PyTorch's C++ custom functions. Reading a key that
// forward never set is an error naming the Function and the key. Unlike the saved
// tensors, saved_data survives backward: a node that keeps only values (a shape, a
// scalar) can be run again without retain_graph, as in PyTorch.
class SavedData {
 public:
  explicit SavedData(const std::string* const* function_name) : function_name_(function_name) {}
  SavedData(const SavedData&) = delete;
  SavedData& operator=(const SavedData&) = delete;
  SavedValue& operator[](const std::string& key);
  bool contains(const std::string& key) const { return values_.count(key) != 0; }
  size_t size() const { return values_.size(); }

 private:
  std::unordered_map<std::string, SavedValue> values_;
  const std::string* const* function_name_;
};

// A tensor saved for backward, as PyTorch's SavedVariable. An input of the op is kept with
// its history (its gradient edge), so a backward run with create_graph can differentiate
// through it. An output of the op is kept without history (output -> node -> saved output
// would be a reference cycle) and gets it back when unpacked: an alias whose grad_fn is the
// node itself.
struct SavedVariable {
  Tensor data;
  uint64_t saved_version = 0;
  bool is_output = false;
  uint32_t output_nr = 0;
};

namespace detail {
// A unique address per type: the runtime check behind Context::state<S>().
template <class S>
const void* type_tag() {
  static const char tag = 0;
  return &tag;
}
}  // namespace detail

class AutogradContext {
 public:
  AutogradContext() = default;
  AutogradContext(const AutogradContext&) = delete;
  AutogradContext& operator=(const AutogradContext&) = delete;

  // Keep tensors for backward. Saving an input or an output is equally fine.
  void save_for_backward(const tensor_list& tensors);
  // The saved tensors, checked: each must still be at the version it was saved at
  // (no in-place change since), the graph must not have been freed by an earlier
  // backward, and forward must have saved something at all (the "gradient leak" pitfall:
  // a backward that needs a tensor forward never saved fails here, loudly).
  tensor_list saved_tensors() const;
  tensor_list get_saved_variables() const { return saved_tensors(); }  // PyTorch's C++ name
  // Whether argument i of forward needs a gradient. Skip work for the ones that don't.
  // A tensor_list argument counts one per element, in order.
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }
  // Whether any argument needs a gradient, i.e. whether this forward is being recorded at all:
  // if not, nothing it saves is ever read, and it may skip what only the backward needs.
  bool needs_any_input_grad() const {
    for (bool needs : needs_input_grad_)
      if (needs) return true;
    return false;
  }

  // Outputs that are not differentiable (indices, masks, statistics kept for backward):
  // they get no grad_fn and never require grad, and backward receives no gradient for them
  // (zeros, or an undefined tensor with set_materialize_grads(false)).
  void mark_non_differentiable(const tensor_list& outputs);
  // true (the default): backward sees zeros for outputs that got no gradient. false: it sees
  // Tensor() and must handle it, which saves a zero-filled tensor per unused output.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }

  SavedData saved_data{&function_name_};

  // Typed state for built-in ops: a Function that declares `struct State { ... };` gets one
  // State object per node, written in forward and read in backward, with no string lookups:
  //   auto& s = ctx.state<State>();  s.dim = dim;
  // It survives backward, like saved_data.
  template <class S>
  S& state() {
    MG_CHECK(state_tag_ == detail::type_tag<S>(),
             "{}: ctx.state<S>() asked for a type the Function does not declare as its State", *function_name_);
    return *static_cast<S*>(state_);
  }
  template <class S>
  const S& state() const {
    return const_cast<AutogradContext*>(this)->state<S>();
  }

  // ---- used by Function<T>::apply and the node, not by op authors ----
  void set_needs_input_grad(std::vector<bool> v) { needs_input_grad_ = std::move(v); }
  // `name` must outlive the context: Function<T> passes its static name.
  void set_function_name(const std::string* name) { function_name_ = name; }
  const std::string& function_name() const { return *function_name_; }
  template <class S>
  void bind_state(S* state) {
    state_ = state;
    state_tag_ = detail::type_tag<S>();
  }
  void set_node(Node* node) { node_ = node; }
  bool materialize_grads() const { return materialize_grads_; }
  bool is_non_differentiable(const Tensor& output) const;
  // After forward: which saved tensors are outputs (kept without history from then on).
  void mark_saved_outputs(const tensor_list& raw_outputs, const std::vector<const Tensor*>& inputs);
  const std::vector<SavedVariable>& saved_variables() const { return saved_; }
  void release();
  bool released() const { return released_; }

 private:
  std::vector<SavedVariable> saved_;
  std::vector<bool> needs_input_grad_;
  std::vector<const TensorImpl*> non_differentiable_;
  static inline const std::string kUnnamed = "Function";
  const std::string* function_name_ = &kUnnamed;
  void* state_ = nullptr;
  const void* state_tag_ = nullptr;
  Node* node_ = nullptr;  // the node that owns this context (null when nothing is recorded)
  bool save_called_ = false;
  bool released_ = false;
  bool materialize_grads_ = true;
};
using Context = AutogradContext;

std::string demangled_name(const char* mangled);

namespace detail {

// Metadata of one forward argument (a tensor_list argument gives one per element): whether
// it was a tensor, and what its gradient must be.
struct ArgInfo {
  bool is_tensor = false;
  bool needs_grad = false;
  TensorMeta meta;
};

// The node a Function<T> records. Its backward is T::backward, wrapped in the checks.
class FunctionNode : public Node {
 public:
  FunctionNode() { ctx_.set_node(this); }
  // A saved input holds its grad_fn: handed to release_nodes, so a chain of ops that save
  // their inputs (y = y * y, 100000 times) is freed iteratively too.
  ~FunctionNode() override;
  std::string name() const override { return ctx_.function_name(); }
  void release_variables() override { ctx_.release(); }
  std::vector<TensorMeta> saved_tensor_metas() const override;
  Context ctx_;
  std::vector<ArgInfo> args_;

 protected:
  // Fills in zeros for outputs that got no gradient (unless the Function turned that off),
  // and checks what backward returned.
  tensor_list prepare_grad_outputs(tensor_list&& grad_outputs) const;
  tensor_list check_grad_inputs(tensor_list&& grad_inputs) const;
  // For a once-differentiable Function run with create_graph: the gradients it returned get
  // a node that raises an error naming the Function if a second backward reaches it.
  void guard_once_differentiable(tensor_list& grad_inputs, const tensor_list& grad_outputs) const;
};

// Where a Function without `struct State` keeps its (absent) state.
struct NoState {};
template <class T, class = void>
struct state_of {
  using type = NoState;
};
template <class T>
struct state_of<T, std::void_t<typename T::State>> {
  using type = typename T::State;
};
template <class T>
using state_of_t = typename state_of<T>::type;

template <class T>
class CppNode final : public FunctionNode {
 public:
  CppNode() { ctx_.bind_state(&state_); }
  tensor_list apply(tensor_list&& grad_outputs) override {
    tensor_list grads_in = prepare_grad_outputs(std::move(grad_outputs));
    if constexpr (T::is_once_differentiable) {
      // A once-differentiable backward is a raw kernel: it runs without recording, and
      // what it returns is marked so that differentiating it again is a clear error.
      const bool create_graph = GradMode::is_enabled();
      tensor_list grads = [&] {
        NoGradGuard no_grad;
        return T::backward(ctx_, grads_in);
      }();
      grads = check_grad_inputs(std::move(grads));
      if (create_graph) guard_once_differentiable(grads, grads_in);
      return grads;
    } else {
      return check_grad_inputs(T::backward(ctx_, std::move(grads_in)));
    }
  }

 private:
  state_of_t<T> state_;
};

template <typename A>
constexpr bool is_tensor_arg = std::is_same_v<std::decay_t<A>, Tensor>;
template <typename A>
constexpr bool is_tensor_list_arg = std::is_same_v<std::decay_t<A>, tensor_list>;
template <typename A>
constexpr bool is_optional_tensor_arg = std::is_same_v<std::decay_t<A>, std::optional<Tensor>>;

// Calls f(const Tensor*) for every tensor in a forward argument: a Tensor is one, a
// tensor_list one per element, an optional<Tensor> one (an undefined Tensor when empty),
// anything else null.
template <typename A, typename F>
void for_each_tensor_in(const A& a, F&& f) {
  if constexpr (is_tensor_arg<A>) {
    f(&a);
  } else if constexpr (is_tensor_list_arg<A>) {
    for (const Tensor& t : a) f(&t);
  } else if constexpr (is_optional_tensor_arg<A>) {
    static const Tensor kEmpty;
    f(a.has_value() ? &*a : &kEmpty);
  } else {
    f(static_cast<const Tensor*>(nullptr));
  }
}

// One ArgInfo and one edge per gradient backward returns.
struct RecordedArgs {
  std::vector<ArgInfo> args;
  std::vector<Edge> edges;
  std::vector<const Tensor*> tensors;  // the arguments' tensors, null for non-tensors

  explicit RecordedArgs(size_t expected) {
    args.reserve(expected);
    edges.reserve(expected);
    tensors.reserve(expected);
  }

  void add(const Tensor* t) {
    ArgInfo info;
    Edge edge;
    info.is_tensor = t != nullptr;  // a tensor argument, perhaps undefined: its gradient may be returned
    if (t && t->defined()) {
      if (t->requires_grad()) {
        info.needs_grad = true;
        edge = gradient_edge(*t);
      }
    }
    args.push_back(std::move(info));
    edges.push_back(std::move(edge));
    tensors.push_back(t);
  }
};

// `inputs`: the forward's tensor arguments, null for the arguments that are not tensors
// (RecordedArgs::tensors); an entry may also be an undefined tensor.
void record_outputs(const std::shared_ptr<FunctionNode>& node, tensor_list& outputs,
                    const std::vector<const Tensor*>& inputs);
void record_anomaly_metadata(Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace detail

template <class T>
struct Function {
  // A Function whose backward is a raw kernel that the tape cannot differentiate sets this
  // to true: a second backward through it then fails with its name, instead of silently
  // returning a wrong (zero) second derivative.
  static constexpr bool is_once_differentiable = false;

  // Runs T::forward and, if anything needs a gradient, records T's node on the tape.
  // Returns what forward returns: a Tensor or a tensor_list. Tensor, tensor_list and
  // std::optional<Tensor> arguments are inputs (one gradient per tensor in backward).
  template <typename... Args>
  static auto apply(Args&&... args) {
    using Out = decltype(T::forward(std::declval<Context&>(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, tensor_list>,
                  "Function<T>::forward must return a Tensor or a tensor_list");

    // A first pass that allocates nothing: most ops in a forward without trainable inputs
    // record nothing, and should cost nothing for it.
    bool record = false;
    auto note_requires_grad = [&](const Tensor* t) { record = record || (t && t->defined() && t->requires_grad()); };
    if (GradMode::is_enabled()) (detail::for_each_tensor_in(args, note_requires_grad), ...);

    if (!record) {
      Context ctx;  // saved tensors die with it
      detail::state_of_t<T> state;
      ctx.bind_state(&state);
      NoGradGuard no_grad;
      return T::forward(ctx, args...);
    }

    detail::RecordedArgs rec(sizeof...(Args));
    (detail::for_each_tensor_in(args, [&](const Tensor* t) { rec.add(t); }), ...);
    auto node = std::make_shared<detail::CppNode<T>>();
    Context& ctx = node->ctx_;
    std::vector<bool> needs(rec.args.size());
    for (size_t i = 0; i < rec.args.size(); ++i) needs[i] = rec.args[i].needs_grad;
    ctx.set_needs_input_grad(std::move(needs));
    ctx.set_function_name(&function_name());

    Out out = [&] {
      NoGradGuard no_grad;
      return T::forward(ctx, args...);
    }();

    for (size_t i = 0; i < rec.args.size(); ++i)
      if (rec.args[i].needs_grad) rec.args[i].meta = TensorMeta::of(*rec.tensors[i]);
    node->args_ = std::move(rec.args);
    node->set_next_edges(std::move(rec.edges));
    detail::record_anomaly_metadata(*node, rec.tensors);
    if constexpr (std::is_same_v<Out, Tensor>) {
      tensor_list outs{std::move(out)};
      detail::record_outputs(node, outs, rec.tensors);
      return std::move(outs[0]);
    } else {
      detail::record_outputs(node, out, rec.tensors);
      return out;
    }
  }

  static const std::string& function_name() {
    static const std::string name = demangled_name(typeid(T).name());
    return name;
  }
};

}  // namespace autograd

using autograd::AutogradContext;
using autograd::Context;
using autograd::Function;

}  // namespace minigrad
