// Anomaly mode: the creation site of every recorded op, and a NaN/Inf check of every
// gradient backward computes (autograd/anomaly_mode.h).
#include <minigrad/autograd/anomaly_mode.h>

#include <cxxabi.h>
#include <execinfo.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include <minigrad/autograd/function.h>
#include <minigrad/core/shape.h>

namespace minigrad {
namespace autograd {
namespace {

thread_local bool anomaly_enabled = false;

// How deep a creation site's stack is kept, and how many of its frames a report shows.
constexpr int kMaxFrames = 48;
constexpr size_t kFramesShown = 4;

// One frame of a backtrace, from a backtrace_symbols line such as
//   ./test_anomaly(_Z9plant_nanRKN8minigrad6TensorE+0x2c) [0x55d0c2a1b2cc]
//   ./test_anomaly(+0x1b2cc) [0x55d0c2a1b2cc]          (no symbol: a static function)
struct Frame {
  std::string function;  // demangled; empty when the symbol table has no name for it
  std::string module;    // the executable or shared library
  std::string offset;    // "+0x1b2cc": from the symbol, or from the module's start when unnamed
};

std::string demangle(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string name = (status == 0 && d) ? d : mangled;  // C names ("main") are not mangled
  std::free(d);
  return name;
}

Frame parse_frame(const std::string& line) {
  Frame f;
  const size_t slash = line.rfind('/', line.find(" ["));
  const size_t open = line.find('(', slash == std::string::npos ? 0 : slash);
  const size_t close = open == std::string::npos ? std::string::npos : line.find(')', open);
  if (close == std::string::npos) {
    f.module = line;
    return f;
  }
  f.module = line.substr(0, open);
  const std::string inside = line.substr(open + 1, close - open - 1);  // "symbol+0x2c", "+0x1b2cc" or ""
  const size_t plus = inside.rfind('+');
  const std::string symbol = inside.substr(0, plus);
  if (plus != std::string::npos) f.offset = inside.substr(plus);
  if (!symbol.empty()) f.function = demangle(symbol);
  return f;
}

// The qualified name a demangled signature declares, without template arguments or a
// return type: "auto minigrad::autograd::Function<X>::apply<Y>(Y&&)" ->
// "minigrad::autograd::Function::apply".
std::string qualified_head(std::string sig) {
  const std::string anon = "(anonymous namespace)";
  for (size_t p; (p = sig.find(anon)) != std::string::npos;) sig.replace(p, anon.size(), "{anonymous}");
  sig = sig.substr(0, sig.find('('));
  // Template arguments, up to an operator name ("operator<" would confuse the nesting).
  const size_t op = sig.find("operator");
  std::string head;
  int depth = 0;
  for (size_t i = 0; i < sig.size(); ++i) {
    const char c = sig[i];
    if (i < op && c == '<') ++depth;
    if (depth == 0) head += c;
    if (i < op && c == '>') --depth;
  }
  const size_t space = head.rfind(' ', head.find("operator"));
  return space == std::string::npos ? head : head.substr(space + 1);
}

// Frames of minigrad's own machinery: Function<T>::apply, the public ops, this file. Code
// of the user's that lives in namespace minigrad counts as minigrad's too.
bool is_minigrad_frame(const Frame& f) {
  return !f.function.empty() && qualified_head(f.function).rfind("minigrad::", 0) == 0;
}

std::string format_frame(const Frame& f) {
  if (!f.function.empty()) return f.function;
  return fmt::format("{}{} (no symbol name: a static function, or a program linked without -rdynamic)", f.module,
                     f.offset);
}

std::string meta_str(const TensorMeta& m) {
  std::string s = fmt::format("{} {}", shape_str(m.sizes), m.dtype);
  if (!m.device.is_cpu()) s += fmt::format(" on {}", m.device);
  return s;
}

}  // namespace

bool AnomalyMode::is_enabled() { return anomaly_enabled; }
void AnomalyMode::set_enabled(bool enabled) { anomaly_enabled = enabled; }

DetectAnomalyGuard::DetectAnomalyGuard() : prev_(anomaly_enabled) { anomaly_enabled = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { anomaly_enabled = prev_; }

std::string AnomalyMetadata::creation_site() const {
  if (creation_frames.empty()) return "  (no backtrace was recorded)";
  std::unique_ptr<char*, decltype(&std::free)> lines(
      backtrace_symbols(creation_frames.data(), static_cast<int>(creation_frames.size())), &std::free);
  if (!lines) return "  (the backtrace could not be symbolized)";
  std::vector<Frame> frames;
  for (size_t i = 0; i < creation_frames.size(); ++i) frames.push_back(parse_frame(lines.get()[i]));

  // What lies above our own first frame is the backtrace machinery: libc's backtrace, or a
  // sanitizer's interceptor of it (ThreadSanitizer adds one). Skip it, if our frame is named.
  size_t origin = 0;
  while (origin < frames.size() && !is_minigrad_frame(frames[origin])) ++origin;
  if (origin == frames.size()) origin = 0;
  // Start after the last minigrad frame that comes before the first named frame of the
  // caller's. Unnamed frames in between are kept: they may be the caller's static functions.
  size_t first_user = frames.size();
  for (size_t i = origin; i < frames.size() && first_user == frames.size(); ++i)
    if (!frames[i].function.empty() && !is_minigrad_frame(frames[i])) first_user = i;
  size_t start = origin;
  for (size_t i = origin; i < first_user && i < frames.size(); ++i)
    if (is_minigrad_frame(frames[i])) start = i + 1;
  if (first_user == frames.size()) start = std::min<size_t>(origin + 1, frames.size());  // all minigrad: skip only us

  std::string out;
  for (size_t i = start; i < frames.size() && i < start + kFramesShown; ++i) {
    if (!out.empty()) out += '\n';
    out += "  " + format_frame(frames[i]);
    if (frames[i].function == "main") break;  // what lies below main is the C runtime
  }
  return out;
}

void check_backward_anomaly(const Node& node, const tensor_list& grad_inputs) {
  for (size_t i = 0; i < grad_inputs.size(); ++i) {
    const Tensor& g = grad_inputs[i];
    if (!g.defined() || !is_floating(g.dtype())) continue;
    // Debugging mode: a copy to the host in float64 per gradient is the price of the check.
    const std::vector<double> values = g.to_vector<double>();
    int64_t nans = 0, infs = 0;
    for (double v : values) {
      nans += std::isnan(v) ? 1 : 0;
      infs += std::isinf(v) ? 1 : 0;
    }
    if (nans == 0 && infs == 0) continue;

    const std::string bad = nans > 0 && infs > 0 ? "NaN and Inf" : nans > 0 ? "NaN" : "Inf";
    const std::shared_ptr<const AnomalyMetadata>& meta = node.anomaly_metadata();
    std::string inputs = "(not recorded: the op ran while anomaly mode was off)";
    std::string site = "  (not recorded: the op ran while anomaly mode was off)";
    if (meta) {
      inputs.clear();
      for (const TensorMeta& m : meta->inputs) inputs += (inputs.empty() ? "" : ", ") + meta_str(m);
      if (inputs.empty()) inputs = "(none)";
      site = meta->creation_site();
    }
    MG_CHECK(false,
             "anomaly mode: the backward of {} (sequence number {}) returned {} in the gradient for its input {} "
             "({} NaN and {} Inf among {} elements of a {} gradient).\n"
             "The forward op {} had the tensor inputs {}, and was created at:\n{}",
             node.name(), node.sequence_nr(), bad, i, nans, infs, values.size(), meta_str(TensorMeta::of(g)),
             node.name(), inputs, site);
  }
}

namespace detail {

void record_anomaly_metadata(Node& node, const std::vector<const Tensor*>& inputs) {
  if (!anomaly_enabled) return;  // every op comes through here: off costs this branch only
  auto meta = std::make_shared<AnomalyMetadata>();
  meta->inputs.reserve(inputs.size());
  for (const Tensor* t : inputs)  // null for an argument that is not a tensor
    if (t && t->defined()) meta->inputs.push_back(TensorMeta::of(*t));
  void* frames[kMaxFrames];
  const int n = backtrace(frames, kMaxFrames);
  meta->creation_frames.assign(frames, frames + (n > 0 ? n : 0));
  node.set_anomaly_metadata(std::move(meta));
}

}  // namespace detail
}  // namespace autograd
}  // namespace minigrad
