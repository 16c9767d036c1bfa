#!/usr/bin/env python3
"""The check that the warp emulation catches bugs: plants one fault at a time in the files
rewrite.py generates (a missing __syncthreads(), a cp.async waited for too late, a wrong lane
-> row pointer, an off-by-one in a mask, a shared buffer too small, ...), builds and runs each
through ./run, and expects every one to fail, by a wrong number or an emulator error. With
--rows, the faults are planted in the row kernels (softmax_dropout, softmax, cross_entropy)
and run through ./run-rows.

    bench/experiments/warp_emulation/planted_faults.py [BUILD_DIR [CASE ...]] [--only TEXT] [--jobs N] [--rows]

BUILD_DIR as for ./run (default build); the planted copies go to BUILD_DIR/warp_emulation/planted/.
The unmodified files are built and run first: they must pass, or no fault can be judged.
Each fault names the text it replaces; if the kernels changed so that the text is no longer
there (exactly once), that fault is reported as stale and the check fails: update it.
Exit status 0 only when the unmodified kernels pass and every fault is caught.
Takes about half a minute of one core per fault (a compile and a run of every case): 5 minutes
on 2 cores.
"""
import argparse
import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]

INC = 'flash_attention.inc'
MMA = 'minigrad/cuda/mma.cuh'
SOFTMAX_DROPOUT = 'softmax_dropout.inc'
SOFTMAX = 'softmax.inc'
CROSS_ENTROPY = 'cross_entropy.inc'

# (what the fault is, the generated file, the text replaced, its replacement)
FAULTS = [
    ('forward: no __syncthreads() at the end of a step (next stage loaded while read)', INC,
     '__syncthreads();  // every warp is done with this stage before step + 2 loads into it',
     ';  // every warp is done with this stage before step + 2 loads into it'),
    ('forward: waits for one cp.async group too few (this step\'s keys still in flight)', INC,
     'mma::wait_copies<1>();  // this step\'s keys', 'mma::wait_copies<2>();  // this step\'s keys'),
    ('forward: no __syncthreads() between the copies landing and the products', INC,
     '// this step\'s keys (and at step 0 the queries) have landed\n    __syncthreads();',
     '// this step\'s keys (and at step 0 the queries) have landed\n    ;'),
    ('forward: the running max never moves after its first value (its lag unbounded)', INC,
     'constexpr float kMaxLagLog2 = 8.0f;', 'constexpr float kMaxLagLog2 = 1e30f;'),
    ('forward: O and the sums not rescaled when a row\'s running max moves', INC,
     'if (__any_sync(0xffffffffu, moves)) {', 'if (__any_sync(0xffffffffu, false)) {'),
    ('forward: one clean step too many (a tile across the causal diagonal or the keys\' end)', INC,
     'return min(steps, (last_key + 1) / kKeys);', 'return min(steps, (last_key + 1) / kKeys + 1);'),
    ('forward: the clean steps\' exponents without the scale', INC,
     'const float factor = kMasking ? 1.0f : p.scale_log2;', 'const float factor = kMasking ? 1.0f : kLog2e;'),
    ('forward: the kept probabilities\' 1 / (1 - p) never applied', INC,
     'const float kept_scale = p.drop ? p.keep_scale : 1.0f;', 'const float kept_scale = 1.0f;'),
    ('warp_product: the second n-block multiplied by the first one\'s B fragment', INC,
     'mma::mma_16x8x16<T>(c[t][n0 / 8 + 1], a[t], b1);', 'mma::mma_16x8x16<T>(c[t][n0 / 8 + 1], a[t], b0);'),
    ('rows_times_rows: C not cleared before the sum', INC,
     'for (float& x : block) x = 0.0f;\n  warp_product', ';\n  warp_product'),
    ('pair_keep_bits: the dropout bit of the neighbouring score', INC,
     'return ((bits >> at) & 1u) | second << 1;', 'return ((bits >> (at ^ 1)) & 1u) | second << 1;'),
    ('pair_keep_bits: a pair straddling two blocks of bits reads the first score\'s bit twice', INC,
     ': p.dropout.keep(index + 1);', ': p.dropout.keep(index);'),
    ('keep_bits_query_rows: a lane takes its quad neighbour\'s two bits of each group', INC,
     '+ 2 * m)) & 3u)', '+ 2 * (m ^ 1))) & 3u)'),
    ('keep_bits_query_rows: the groups of a lane\'s second row drawn for its first', INC,
     'p.score_index(b, h, row0 + c_row(2 * half), col0 + (4 * k + m) * 8)',
     'p.score_index(b, h, row0 + c_row(0), col0 + (4 * k + m) * 8)'),
    ('keep_bits_key_rows: bits shuffled from the lane of the neighbouring quad position', INC,
     '(2 * nb + c) * 4 + m)', '(2 * nb + c) * 4 + (m ^ 1))'),
    ('keep_bits_key_rows: keys 8-15 given the group of keys 0-7', INC,
     'p.dropout.keep_bits(first + 1) << 8', 'p.dropout.keep_bits(first) << 8'),
    ('block_order: a last group of fewer heads numbered as if full', INC,
     'heads_here = min(heads_per_group, heads - first)', 'heads_here = heads_per_group'),
    ('grad_kv: the groups taken as shared out when Sk is even, not a multiple of 8', INC,
     'else if (p.k_len % 8 == 0)', 'else if (p.k_len % 2 == 0)'),
    ('key_rows_gradients: a score drawn alone takes the bit of its key 8 rows over', INC,
     'p.score_index(b, h, query0 + c, key0 + c_row(e))',
     'p.score_index(b, h, query0 + c, key0 + c_row(e ^ 2))'),
    ('masked_score: causal mask also hides the diagonal', INC,
     '(p.is_causal && j > i)) return -INFINITY', '(p.is_causal && j >= i)) return -INFINITY'),
    ('KeyBlock: under is_causal, skips one query tile too many', INC,
     'p.is_causal ? j0 / kQueries : 0', 'p.is_causal ? j0 / kQueries + 1 : 0'),
    ('grad_kv: no __syncthreads() at the end of a step', INC,
     'tile_times_columns<T, kQueriesPerStep, kD>(dp, queries, dk);  // dK += scale dS^T Q\n    __syncthreads();',
     'tile_times_columns<T, kQueriesPerStep, kD>(dp, queries, dk);  // dK += scale dS^T Q\n    ;'),
    ('KeyBlock::begin_step: waits for one cp.async group too few (this step\'s queries in flight)', INC,
     'mma::wait_copies<1>();\n    __syncthreads();\n  }\n};', 'mma::wait_copies<2>();\n    __syncthreads();\n  }\n};'),
    ('KeyBlock::begin_step: no barrier after the copies land', INC,
     'mma::wait_copies<1>();\n    __syncthreads();\n  }\n};', 'mma::wait_copies<1>();\n    ;\n  }\n};'),
    ('KeyBlock: each query\'s L and D copied from the next query\'s row', INC,
     'const int i = tile.q0 + threadIdx.x % kQueries;', 'const int i = tile.q0 + (threadIdx.x + 1) % kQueries;'),
    ('KeyBlock: L copied where D belongs and D where L belongs', INC,
     '(threadIdx.x < kQueries ? p.log_sum_exp : p.delta)', '(threadIdx.x < kQueries ? p.delta : p.log_sum_exp)'),
    ('KeyBlock: after a query head\'s last tile, the same head again (grouped-query attention)', INC,
     'if (t.q0 == q_end) t.q0 = q_first, ++t.h;', 'if (t.q0 == q_end) t.q0 = q_first;'),
    ('grad_kv: the next query head walked from query 0, not from the causal block\'s first', INC,
     'if (t.q0 == q_end) t.q0 = q_first, ++t.h;', 'if (t.q0 == q_end) t.q0 = 0, ++t.h;'),
    ('grad_kv: a warp decides its masking by the keys of the warp before it', INC,
     'tile_needs_masking(p, q0, kQueriesPerStep, j0 + warp_row0, kWarpRows)',
     'tile_needs_masking(p, q0, kQueriesPerStep, j0 + warp_row0 - kWarpRows, kWarpRows)'),
    ('grad_q: its shared memory 16 bytes too small', INC,
     'return (2 * kBlockRows + 2 * 2 * kKeysPerStep) * kD * 2;',
     'return (2 * kBlockRows + 2 * 2 * kKeysPerStep) * kD * 2 - 16;'),
    ('delta: the warp\'s sum reduced over 8 lanes only', INC,
     'for (int offset = 16; offset > 0; offset /= 2)', 'for (int offset = 4; offset > 0; offset /= 2)'),
    ('load_rows_async: copies one row past the end instead of zeros', INC,
     'const bool valid = row0 + r + pass * kRowsPerPass < end;',
     'const bool valid = row0 + r + pass * kRowsPerPass <= end;'),
    ('load_rows_async: takes a tile one row short of whole for whole (copies a row past the end)', INC,
     'if (row0 + kRows <= end) {', 'if (row0 + kRows <= end + 1) {'),
    ('forward: exits without waiting for the queries\' copies when there are no keys', INC,
     'mma::wait_copies<0>();  // with no step (no keys), the queries\' copies are still in flight',
     ';  // with no step (no keys), the queries\' copies are still in flight'),
    ('forward: lanes past the last query skip the row sum\'s shuffles (a divergent warp)', INC,
     'const float sum = quad_sum(l[t][half]);\n      if (i >= p.q_len) continue;',
     'if (i >= p.q_len) continue;\n      const float sum = quad_sum(l[t][half]);'),
    ('grad_kvq: no __syncthreads() between writing P^T and dS^T and reading them', INC,
     '__syncthreads();  // P^T and dS^T of every warp in shared memory', ';'),
    ('grad_kvq: no __syncthreads() at the end of a step (P^T overwritten while read)', INC,
     '__syncthreads();  // every warp is done with this stage, P^T and dS^T', ';'),
    ('grad_kvq: warps 4-7 add dQ into the columns of warps 2-3', INC,
     'const int dq_col0 = warp / 2 * (kD / 4);', 'const int dq_col0 = warp / 4 * (kD / 4);'),
    ('grad_kvq: dQ reads dS^T untransposed (load_a instead of load_a_from_columns)', INC,
     'mma::load_a_from_columns<kQueries>(ds_tile, k0, dq_row0 + t * kWarpRows, a);',
     'mma::load_a<kQueries>(ds_tile, dq_row0 + t * kWarpRows, k0 % kQueries, a);'),
    ('grad_kvq: the second mma tile\'s P^T stored over the first\'s', INC,
     'store_c_tile<T, kQueries, kQueriesPerStep>(s[t], p_tile, key_row0 + t * kWarpRows, query_col0);',
     'store_c_tile<T, kQueries, kQueriesPerStep>(s[t], p_tile, key_row0, query_col0);'),
    ('grad_kvq: dK and dV of the second half of the columns stored over the first', INC,
     'store_row<T, kD / 2>(dv[t], half, 1.0f, p.grad_v + row * kD + kv_col0);',
     'store_row<T, kD / 2>(dv[t], half, 1.0f, p.grad_v + row * kD);'),
    ('delta: dQ\'s float32 sums not cleared', INC,
     'for (int d = threadIdx.x % 32; d < dim; d += 32) p.grad_q_sum[row * dim + d] = 0.0f;', ';'),
    ('mma.cuh load_a_from_columns: tiles 1 and 2 swapped', MMA,
     'swizzled<kCols>(k0 + lane % 8 + i / 2 * 8, m0 + i % 2 * 8)',
     'swizzled<kCols>(k0 + lane % 8 + i % 2 * 8, m0 + i / 2 * 8)'),
    ('mma.cuh load_a: ignores the swizzle (reads rows as if stored plainly)', MMA,
     'tile + swizzled<kCols>(row0 + lane % 16, col0 + lane / 16 * 8)',
     'tile + (row0 + lane % 16) * kCols + col0 + lane / 16 * 8'),
    ('mma.cuh load_b_from_columns: tiles 1 and 2 swapped', MMA,
     'swizzled<kCols>(k0 + lane % 8 + i % 2 * 8, n0 + i / 2 * 8)',
     'swizzled<kCols>(k0 + lane % 8 + i / 2 * 8, n0 + i % 2 * 8)'),
    ('mma.cuh a_from_c: registers 1 and 2 swapped', MMA,
     'a[1] = pack<T>(left[2], left[3]);\n  a[2] = pack<T>(right[0], right[1]);',
     'a[1] = pack<T>(right[0], right[1]);\n  a[2] = pack<T>(left[2], left[3]);'),
]

# The row kernels' faults (--rows).
ROW_FAULTS = [
    ('softmax_dropout forward: the zeros right of the causal diagonal not written', SOFTMAX_DROPOUT,
     '    } else {\n      result = zero_vector<T, kVec>();\n    }\n    out[held.column(j) / kVec] = result;\n  }\n}\n\n'
     '// Rows too long',
     '      out[held.column(j) / kVec] = result;\n    }\n  }\n}\n\n// Rows too long'),
    ('softmax_dropout: causality hides the diagonal too', SOFTMAX_DROPOUT,
     'o.causal_rows.divide_with_remainder(row).remainder + 1',
     'o.causal_rows.divide_with_remainder(row).remainder'),
    ('softmax_dropout: a bool mask read in vectors tests each element\'s neighbour', SOFTMAX_DROPOUT,
     '(0xffu << (8 * (e % 4)))', '(0xffu << (8 * ((e + 1) % 4)))'),
    ('softmax_dropout: the factor moved into the exponent for a negative scale too', SOFTMAX_DROPOUT,
     'factor > acc_t(0)', 'factor != acc_t(0)'),
    ('softmax_dropout: the mask read in vectors where it is not aligned', SOFTMAX_DROPOUT,
     'const bool mask_vectors = o.mask_vector_alignment >= kVec;', 'const bool mask_vectors = o.mask_step == 1;'),
    ('softmax_dropout: a mask vector with a false byte in its second word taken as kept whole', SOFTMAX_DROPOUT,
     'for (int i = 0; i < kWords; ++i) any_zero_byte |=', 'for (int i = 0; i < 1; ++i) any_zero_byte |='),
    ('softmax_dropout backward: dy read from the next vector', SOFTMAX_DROPOUT,
     'dy[j] = g_in[held.column(j) / kVec];', 'dy[j] = g_in[held.column(j) / kVec + (held.column(j) + kVec < n)];'),
    ('softmax backward: y read from dy', SOFTMAX,
     'convert_vector(y_in[k], yv[j]);', 'convert_vector(g_in[k], yv[j]);'),
    ('cross_entropy: a vector\'s last logit written as its first', CROSS_ENTROPY,
     '  convert_vector(vector_from_bits<T, kVec>(loaded), v);\n  AlignedVector<T, kVec> result;',
     '  convert_vector(vector_from_bits<T, kVec>(loaded), v);\n  v[kVec - 1] = v[0];\n  AlignedVector<T, kVec> result;'),
    ('cross_entropy, staged row: folded before the copies land', CROSS_ENTROPY,
     '    mma::wait_copies<0>();\n    s = fold_staged_row', '    s = fold_staged_row'),
    ('cross_entropy, staged row: a thread folds the vector another thread copied', CROSS_ENTROPY,
     'fold_vector<T>(s, staged[k], with_sum_x);', 'fold_vector<T>(s, staged[k ^ 1], with_sum_x);'),
    ('cross_entropy, staged row: the sum of x left out with label smoothing too', CROSS_ENTROPY,
     'me.threads_per_row, a.smoothing != acc_t(0));\n  } else {', 'me.threads_per_row, false);\n  } else {'),
    ('cross_entropy: a rescale keeps the sum when the maximum grows', CROSS_ENTROPY,
     'sum * (from == to ? 1.0f :', 'sum * (from <= to ? 1.0f :'),
    ('cross_entropy, staged row: the gradient written from the next vector\'s copy', CROSS_ENTROPY,
     'store_vector<T>(staged[k], dst, k,', 'store_vector<T>(staged[k + (k + 1 < split.vectors)], dst, k,'),
    ('cross_entropy: the target\'s element written again with no barrier after the row\'s writes', CROSS_ENTROPY,
     '  if constexpr (kWarpPerRow)\n    __syncwarp();\n  else\n    __syncthreads();\n  if (me.thread == 0 && target',
     '  if (me.thread == 0 && target'),
    ('cross_entropy: the target\'s term subtracted from the next column', CROSS_ENTROPY,
     '    grad[target] = convert_element<T>(gradient(picked, target) - on_target);',
     '    grad[target + (target + 1 < n)] = convert_element<T>(gradient(picked, target) - on_target);'),
]


def slug(text):
    return re.sub(r'[^a-z0-9]+', '_', text.lower()).strip('_')[:60]


def run_driver(build, folder, cases, rows=False):
    """./run (./run-rows with rows) on the files in folder: (exit status, stdout, stderr, whether
    the driver was built). The driver (about 75 MB, the library's GPU code included) is deleted
    afterwards."""
    env = dict(os.environ, WARP_EMU_GENERATED=str(folder))
    command = [str(HERE / 'run-rows'), build] if rows else [str(HERE / 'run'), build, *cases]
    try:
        r = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        result = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        result = 'timeout', e.stdout or '', e.stderr or ''
    driver = folder / ('rows_driver' if rows else 'driver')
    built = driver.exists()
    driver.unlink(missing_ok=True)
    return (*result, built)


def how_caught_rows(rc, stdout, stderr):
    failed = [line[5:].split('  ')[0].strip() for line in stdout.splitlines() if line.startswith('FAIL')]
    runs = re.search(r'^(\d+) runs:', stdout, re.M)
    emu = next((line for line in stderr.splitlines() if line.startswith('[emu]')), '')
    if runs:
        parts = [f'{len(failed)} of {runs.group(1)} runs fail' + (f', first: {failed[0]}' if failed else '')]
    else:  # the driver died (a misaligned vector load faults on the host as on the GPU)
        done = sum(1 for line in stdout.splitlines() if line.startswith(('ok ', 'FAIL ')))
        crash = next((line.strip() for line in stderr.splitlines() if 'fault' in line.lower() or 'abort' in line.lower()),
                     f'exit {rc}')
        parts = [f'the driver stopped after {done} runs ({crash[-80:]})']
    if emu:
        parts.append('first emulator message: ' + emu[:200])
    return '; '.join(parts)


def how_caught(stdout, stderr):
    failing = sorted({m.group(1) for m in re.finditer(r'^\s+(\w+)\s+FAIL ', stdout, re.M)})
    cases = sorted({m.group(1) for m in re.finditer(r'^case (\S+)', stdout, re.M)})
    failed_cases = []
    current = None
    for line in stdout.splitlines():
        m = re.match(r'case (\S+) \[(\w+)\]', line)
        if m:
            current = f'{m.group(1)}[{m.group(2)}]'
        elif 'FAIL' in line and current and current not in failed_cases:
            failed_cases.append(current)
    emu = next((line for line in stderr.splitlines() if line.startswith('[emu]')), '')
    parts = []
    if failing:
        parts.append('wrong ' + ', '.join(failing))
    if failed_cases:
        parts.append(f'{len(failed_cases)} of {2 * len(cases)} case runs fail')
    if emu:
        parts.append('first emulator message: ' + emu[:200])
    return '; '.join(parts) or 'non-zero exit'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('build', nargs='?', default='build')
    parser.add_argument('--only', help='only the faults whose description contains this text')
    parser.add_argument('--jobs', type=int, default=os.cpu_count() or 1)
    parser.add_argument('--rows', action='store_true', help='the row kernels\' faults, through ./run-rows')
    parser.add_argument('cases', nargs='*', help='the driver\'s cases to run (default all; not with --rows)')
    args = parser.parse_args()

    base = ROOT / args.build / 'warp_emulation' / ('planted_rows' if args.rows else 'planted')
    shutil.rmtree(base, ignore_errors=True)
    unmodified = base / 'unmodified'
    r = subprocess.run([sys.executable, str(HERE / 'rewrite.py'), str(unmodified)], cwd=ROOT)
    if r.returncode:
        print('planted_faults.py: rewrite.py failed', file=sys.stderr)
        return 1

    faults = [f for f in (ROW_FAULTS if args.rows else FAULTS) if not args.only or args.only in f[0]]
    jobs, stale = [], []
    for description, name, old, new in faults:
        text = (unmodified / name).read_text()
        if text.count(old) != 1:
            stale.append((description, f'the text it replaces occurs {text.count(old)} times in {name}, not once'))
            continue
        folder = base / slug(description)
        shutil.copytree(unmodified, folder, ignore=shutil.ignore_patterns('driver', 'rows_driver'))
        (folder / name).write_text(text.replace(old, new))
        jobs.append((description, folder))

    ok = True
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        control = pool.submit(run_driver, args.build, unmodified, args.cases, args.rows)
        futures = [(d, pool.submit(run_driver, args.build, f, args.cases, args.rows)) for d, f in jobs]
        rc, out, err, _ = control.result()
        summary = out.strip().splitlines()[-1] if out.strip() else err.strip()[-300:]
        print(f'unmodified kernels: {"PASS" if rc == 0 else "FAIL"} ({summary})')
        if rc != 0:
            print('planted_faults.py: the unmodified kernels fail, so no planted fault can be judged', file=sys.stderr)
            ok = False
        for description, future in futures:
            rc, out, err, built = future.result()
            ran = re.search(r'^(ok|FAIL) ', out, re.M) if args.rows else re.search(r'^case ', out, re.M)
            if not built or not ran:  # the build failed, or no case ran
                ok = False
                print(f'NOT RUN  {description}\n         exit {rc}: {err.strip()[-400:]}')
            elif rc == 0:
                ok = False
                print(f'MISSED   {description}')
            else:
                caught = how_caught_rows(rc, out, err) if args.rows else how_caught(out, err)
                print(f'caught   {description}\n         {caught}')
    for description, why in stale:
        ok = False
        print(f'STALE    {description}\n         {why}')
    print('every planted fault caught' if ok else 'planted_faults.py: FAILED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
