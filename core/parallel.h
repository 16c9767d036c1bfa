#pragma once
// parallel_for: the CPU kernels' one way to use more than one core.
//
//   parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
//     for (int64_t r = begin; r < end; ++r) ...;  // rows [begin, end) of the work
//   });
//
// The range is cut into at most get_num_threads() contiguous chunks of at least `grain`
// indices each; the calling thread runs the first chunk and the pool's threads the others,
// and parallel_for returns when all of them are done. A kernel must give the same result
// whatever the cut (the reductions do: they sum fixed-size blocks whose boundaries never
// depend on the thread count, and combine them in a fixed order).
//
// When it runs inline, on the calling thread alone, with no locking and no waiting:
// - the range has at most `grain` indices (tiny tensors cost what they did before),
// - one thread is configured,
// - it is called from inside another parallel_for (nested calls do not fan out again),
// - another thread of the program is using the pool at that moment (two threads that
//   backpropagate at once each run their kernels serially instead of queueing).
// An exception thrown by fn in any chunk is rethrown in the caller (the first one, when
// several chunks throw), after every chunk has finished.
//
// Thread count: the environment variable MINIGRAD_NUM_THREADS when it is set to a positive
// integer, else std::thread::hardware_concurrency(); set_num_threads(n) changes it at run
// time (n >= 1, the calling thread included: n = 2 starts one pool thread). The pool's
// threads start on the first parallel_for that needs them.
#include <cstdint>

namespace minigrad {

int get_num_threads();
void set_num_threads(int n);

namespace detail {
using ChunkFn = void (*)(const void* fn, int64_t begin, int64_t end);
bool should_run_inline(int64_t begin, int64_t end, int64_t grain);
void parallel_run(int64_t begin, int64_t end, int64_t grain, ChunkFn chunk, const void* fn);
}  // namespace detail

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& fn) {
  if (begin >= end) return;
  if (detail::should_run_inline(begin, end, grain)) {
    fn(begin, end);
    return;
  }
  // fn by address, called through a plain function pointer: no std::function allocation.
  detail::parallel_run(begin, end, grain,
                       [](const void* f, int64_t b, int64_t e) { (*static_cast<const F*>(f))(b, e); }, &fn);
}

}  // namespace minigrad
