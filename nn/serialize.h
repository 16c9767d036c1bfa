#pragma once
// Saving and loading tensors in the safetensors format, the one PyTorch's ecosystem shares
// (safetensors.torch.save_file / load_file), so that a file written here loads there and
// back:
//   8 bytes    N, the header's length, little-endian
//   N bytes    a JSON object: for each tensor its name -> {"dtype", "shape", "data_offsets":
//              [begin, end]} (offsets into the data that follows), and an optional
//              "__metadata__" of strings; padded with spaces to a multiple of 8 bytes
//   the data   each tensor's elements, row-major, little-endian, at its offsets
// dtypes: F64, F32, F16, BF16, I64, BOOL. Tensors are written in the order given, back to
// back; a loaded tensor is a contiguous CPU tensor.
#include <string>
#include <utility>
#include <vector>

#include <minigrad/core/tensor.h>
#include <minigrad/nn/module.h>

namespace minigrad {
namespace nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

void save_safetensors(const NamedTensors& tensors, const std::string& path);
NamedTensors load_safetensors(const std::string& path);

// A module's parameters and buffers, under their dotted names (Module::named_parameters).
void save(const Module& module, const std::string& path);
// Copies each of the module's parameters and buffers from the tensor of the same name in the
// file (cast to the member's dtype, onto its device). A name missing from the file, or a
// shape that differs, is an error naming it; tensors in the file that the module does not
// have are ignored.
void load(Module& module, const std::string& path);

}  // namespace nn
}  // namespace minigrad
