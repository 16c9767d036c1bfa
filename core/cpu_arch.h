#pragma once
// MG_CPU_CLONES, on the few hot CPU loops: the compiler builds the function three times, for
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2) and the x86-64 baseline (SSE2), and the program
// picks one when it loads, by the CPU it runs on (GCC's function multiversioning, through
// an ifunc resolver). So one binary is portable (it is built here and run on other hosts)
// and still uses the wide vectors where they exist: without it, -march=x86-64 leaves the
// loops 4 floats wide, a third to a quarter of what this machine's cores do (measured in
// docs/perf-notes.md). -march=native would be faster still on the build machine only, and
// would crash with an illegal instruction on an older one.
//
// The clones compute bit for bit what the baseline does: the library is compiled with
// -ffp-contract=off (no fused multiply-adds that AVX2 has and SSE2 lacks), and every loop's
// order of operations is fixed by its source (the reductions keep explicit accumulator
// lanes; nothing is reassociated).
//
// Only GCC on x86-64, and not in the sanitizer builds (they check the code, not its speed,
// and one copy of each loop keeps their reports simple); elsewhere the macro is empty and
// the loops compile once.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__) && \
    !defined(MINIGRAD_NO_CPU_CLONES)
#define MG_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MG_CPU_CLONES
#endif

// MG_INLINE_IN_CLONES, on a helper with a loop that a cloned function calls: the helper is
// inlined into each clone and so compiled for that clone's instruction set. Left to itself,
// GCC may keep such a helper out of line, compiled once for the baseline, and every clone
// then calls the 4-floats-wide copy.
#if defined(__GNUC__) || defined(__clang__)
#define MG_INLINE_IN_CLONES __attribute__((always_inline)) inline
#else
#define MG_INLINE_IN_CLONES inline
#endif
