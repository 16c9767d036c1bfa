// safetensors (nn/serialize.h): the header is JSON, read and written by nlohmann::json (a
// well-kept library, rather than a parser by hand); the data is the tensors' bytes.
#include <minigrad/nn/serialize.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include <minigrad/autograd/grad_mode.h>
#include <minigrad/core/error.h>
#include <minigrad/core/shape.h>

namespace minigrad {
namespace nn {
namespace {

// minigrad's dtypes and safetensors' names for them.
const std::pair<DType, const char*> kDTypeNames[] = {{kFloat64, "F64"}, {kFloat32, "F32"}, {kFloat16, "F16"},
                                                     {kBFloat16, "BF16"}, {kInt64, "I64"}, {kBool, "BOOL"}};

const char* name_of(DType dtype) {
  for (const auto& [d, name] : kDTypeNames)
    if (d == dtype) return name;
  MG_CHECK(false, "safetensors: no name for dtype {}", dtype);
  return "";
}

DType dtype_named(const std::string& name, const std::string& tensor) {
  for (const auto& [d, n] : kDTypeNames)
    if (name == n) return d;
  MG_CHECK(false, "safetensors: tensor \"{}\" has dtype {}, which minigrad does not have", tensor, name);
  return kFloat32;
}

// Every host minigrad builds for is little-endian, as the format is: the bytes are copied
// as they are.
static_assert(sizeof(uint64_t) == 8, "");
bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

}  // namespace

void save_safetensors(const NamedTensors& tensors, const std::string& path) {
  MG_CHECK(host_is_little_endian(), "safetensors: this host is big-endian; the format is little-endian");
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::vector<Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    MG_CHECK(t.defined(), "safetensors: tensor \"{}\" is undefined", name);
    MG_CHECK(!header.contains(name), "safetensors: two tensors are named \"{}\"", name);
    MG_CHECK(name != "__metadata__", "safetensors: \"__metadata__\" is the format's own key, not a tensor name");
    const Tensor c = t.detach().to(kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * element_size(c.dtype());
    header[name] = {{"dtype", name_of(c.dtype())}, {"shape", c.sizes()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  MG_CHECK(out.good(), "safetensors: cannot open {} for writing", path);
  const uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), sizeof length);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Tensor& c : contiguous)
    out.write(static_cast<const char*>(c.raw_data()),
              static_cast<std::streamsize>(static_cast<uint64_t>(c.numel()) * element_size(c.dtype())));
  MG_CHECK(out.good(), "safetensors: writing {} failed", path);
}

NamedTensors load_safetensors(const std::string& path) {
  MG_CHECK(host_is_little_endian(), "safetensors: this host is big-endian; the format is little-endian");
  std::ifstream in(path, std::ios::binary);
  MG_CHECK(in.good(), "safetensors: cannot open {}", path);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MG_CHECK(file.size() >= 8, "safetensors: {} is {} bytes, shorter than the header's length", path, file.size());
  uint64_t length = 0;
  std::memcpy(&length, file.data(), sizeof length);
  MG_CHECK(length <= file.size() - 8, "safetensors: {} announces a header of {} bytes, more than the file holds", path,
           length);
  const nlohmann::ordered_json header = nlohmann::ordered_json::parse(file.begin() + 8, file.begin() + 8 + length);
  MG_CHECK(header.is_object(), "safetensors: the header of {} is not a JSON object", path);
  const char* data = file.data() + 8 + length;
  const uint64_t data_size = file.size() - 8 - length;
  NamedTensors out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const DType dtype = dtype_named(entry.at("dtype").get<std::string>(), name);
    const Shape shape = entry.at("shape").get<Shape>();
    const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    MG_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1] && offsets[1] <= data_size,
             "safetensors: tensor \"{}\" has data_offsets outside the file's data", name);
    Tensor t = empty(shape, TensorOptions(dtype));
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * element_size(dtype);
    MG_CHECK(offsets[1] - offsets[0] == bytes, "safetensors: tensor \"{}\" of shape {} and dtype {} needs {} bytes, "
                                               "its data_offsets give {}",
             name, shape_str(shape), dtype, bytes, offsets[1] - offsets[0]);
    if (bytes > 0) std::memcpy(t.raw_data(), data + offsets[0], bytes);
    out.emplace_back(name, t);
  }
  return out;
}

namespace {

// What save writes and load fills: the parameters, then the buffers, by dotted name.
NamedTensors state_of(const Module& module) {
  NamedTensors tensors = module.named_parameters();
  for (auto& named : module.named_buffers()) tensors.push_back(std::move(named));
  return tensors;
}

}  // namespace

void save(const Module& module, const std::string& path) { save_safetensors(state_of(module), path); }

void load(Module& module, const std::string& path) {
  const NamedTensors file = load_safetensors(path);
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const auto& [n, t] : file)
      if (n == name) return &t;
    return nullptr;
  };
  NoGradGuard no_grad;
  for (auto& [name, target] : state_of(module)) {
    const Tensor* source = find(name);
    MG_CHECK(source != nullptr, "load: {} has no tensor named \"{}\"", path, name);
    MG_CHECK(source->sizes() == target.sizes(), "load: \"{}\" has shape {} in {}, the module's is {}", name,
             shape_str(source->sizes()), path, shape_str(target.sizes()));
    target.copy_(*source);  // the member's own storage: dtype and device converted by copy_
  }
}

}  // namespace nn
}  // namespace minigrad
