#pragma once
// cuda/normalization.cu itself, for the normalization experiments: they call its launchers
// (forward_rows, backward_rows) with other template arguments, and link against
// libminigrad.a, which defines the same entry points. The entry points are renamed here
// (experiment_normalization_*) so that both copies link; everything else lives in the file's
// anonymous namespace.
#define normalization_forward experiment_normalization_forward
#define normalization_backward experiment_normalization_backward
#include "../../cuda/normalization.cu"
#undef normalization_forward
#undef normalization_backward
