#!/usr/bin/env python3
"""Writes the flash-attention kernels as g++ can compile them against emu.h.

    rewrite.py OUT_DIR [--source-root DIR]

From the current cuda/flash_attention.cu and cuda/mma.cuh of the repository (or of
--source-root) it writes
    OUT_DIR/flash_attention.inc        the kernels and their host code
    OUT_DIR/softmax_dropout.inc, softmax.inc, cross_entropy.inc, normalization.inc
                                       the row kernels and their host code (./run-rows)
    OUT_DIR/minigrad/cuda/column_sums.cuh
                                       the column sums' kernel (the normalizations' second step)
    OUT_DIR/minigrad/cuda/mma.cuh      the warp-level building blocks; the driver puts OUT_DIR
                                       first on the include path, so this copy shadows the real one
changing only what a host compiler cannot take, each into a call of emu.h:
    asm volatile("ldmatrix...") / ("mma.sync...") / ("cp.async...") / asm("ex2.approx...") statements, parsed (the
        PTX instruction, its operands by constraint) and replaced by one call each, with the
        same operand expressions: the lane -> row pointers, swizzled offsets, shared_address(),
        pack() and a_from_c() around them stay the project's own code;
    __cvta_generic_to_shared(p)        -> ::emu::cvta_generic_to_shared(p)
    extern __shared__ T name[];        -> T* const name = ::emu::dynamic_shared<T>(alignment);
    __shared__ T name[N]...;           -> static T name[N]...;  (the row kernels' only kind)
    kernel<<<grid, block, shared, stream>>>(arg);  -> ::emu::launch(kernel, grid, block, shared, stream, arg);
    the first statement of every __global__ function: ::emu::enter_kernel(__PRETTY_FUNCTION__);
Everything else is copied unchanged, line numbers included (a rewritten statement keeps the
lines it spanned), after a header of its own.

It stops with a non-zero exit status and a message naming what it did not find, or could not
emulate, whenever the sources differ from what it knows: a kernel change then fails the
experiment instead of testing stale code.
"""
import argparse
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent


class RewriteError(Exception):
    pass


# ---- reading C++ just enough ----

def blank_comments_and_literals(text):
    """text with the inside of comments and string/char literals turned to spaces (newlines
    kept), so that searches and bracket matching only see code; offsets stay the same."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = ' '
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != '\n':
                    out[k] = ' '
            i = j
        elif c in '"\'':
            if c == "'" and i > 0 and (text[i - 1].isalnum() or text[i - 1] == '_'):
                i += 1  # a digit separator (1'000) or the like
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            for k in range(i + 1, min(j, n)):
                out[k] = ' '
            i = j + 1
        else:
            i += 1
    return ''.join(out)


def matching_close(code, open_at):
    """The offset just past the bracket that closes code[open_at] ('(', '[' or '{')."""
    pairs = {'(': ')', '[': ']', '{': '}'}
    stack = []
    for i in range(open_at, len(code)):
        c = code[i]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ')]}':
            if not stack or stack.pop() != c:
                raise RewriteError(f'unbalanced {c!r} at offset {i}')
            if not stack:
                return i + 1
    raise RewriteError(f'no closing bracket for the one at offset {open_at}')


def split_top_level(text, code, sep):
    """text split at the `sep` characters that are outside brackets (found in code, its blanked
    twin)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(code):
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        elif c == sep and depth == 0:
            parts.append((text[start:i], code[start:i]))
            start = i + 1
    parts.append((text[start:], code[start:]))
    return parts


def line_of(text, offset):
    return text.count('\n', 0, offset) + 1


def keep_lines(replacement, original):
    """replacement followed by as many newlines as keep the lines after it where they were."""
    return replacement + '\n' * max(0, original.count('\n') - replacement.count('\n'))


def string_literal_value(text, where):
    """The value of adjacent string literals ("a" "b\\n"), with the escapes PTX uses."""
    pieces = re.findall(r'"((?:[^"\\]|\\.)*)"', text, re.S)
    rest = re.sub(r'"((?:[^"\\]|\\.)*)"', '', text, flags=re.S).strip()
    if not pieces or rest:
        raise RewriteError(f'{where}: the asm template is not a plain string literal: {text.strip()!r}')
    escapes = {'n': '\n', 't': '\t', '"': '"', '\\': '\\'}
    value = ''.join(re.sub(r'\\(.)', lambda m: escapes.get(m.group(1), m.group(1)), p) for p in pieces)
    return ' '.join(value.split())


# ---- asm statements ----

class Operand:
    def __init__(self, constraint, expr):
        self.constraint = constraint
        self.expr = expr.strip()


def parse_operands(text, code, where):
    operands = []
    if not code.strip():
        return operands
    for piece, piece_code in split_top_level(text, code, ','):
        m = re.fullmatch(r'\s*"([^"]*)"\s*\((.*)\)\s*', piece, re.S)
        if not m:
            raise RewriteError(f'{where}: cannot read the asm operand {piece.strip()!r}')
        operands.append(Operand(m.group(1), m.group(2)))
    return operands


def operand_list(group, operands, where, constraints):
    """The expressions of the operands named in group ("%0, %1"), each checked against the
    allowed constraints."""
    exprs = []
    for name in [g.strip() for g in group.split(',')]:
        m = re.fullmatch(r'%(\d+)', name)
        if not m or int(m.group(1)) >= len(operands):
            raise RewriteError(f'{where}: unknown operand {name!r}')
        op = operands[int(m.group(1))]
        if op.constraint not in constraints:
            raise RewriteError(f'{where}: operand {name} has constraint {op.constraint!r}, expected one of {constraints}')
        exprs.append(op.expr)
    return exprs


def immediate(token, operands, where):
    """A literal number, or an operand with an "n" constraint (a compile-time constant)."""
    token = token.strip()
    if re.fullmatch(r'\d+', token):
        return token
    [expr] = operand_list(token, operands, where, ('n',))
    return f'({expr})'


def rewrite_asm(instruction, operands, where, found):
    """The C++ statement that does what the PTX instruction does, through emu.h."""
    m = re.fullmatch(r'ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared(?:::cta)?\.b16 '
                     r'\{([^}]*)\}, ?\[(%\d+)\];?', instruction)
    if m:
        count, trans = int(m.group(1)), bool(m.group(2))
        dst = operand_list(m.group(3), operands, where, ('=r',))
        [address] = operand_list(m.group(4), operands, where, ('r', 'l'))
        if len(dst) != count:
            raise RewriteError(f'{where}: ldmatrix .x{count} with {len(dst)} destination registers')
        found.add(f'ldmatrix.x{count}' + ('.trans' if trans else ''))
        stores = ' '.join(f'{d} = emu_d[{i}];' for i, d in enumerate(dst))
        return (f'{{ uint32_t emu_d[{count}]; ::emu::ldmatrix({count}, {str(trans).lower()}, ({address}), emu_d); '
                f'{stores} }}')

    m = re.fullmatch(r'mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(bf16|f16)\.(bf16|f16)\.f32 '
                     r'\{([^}]*)\}, ?\{([^}]*)\}, ?\{([^}]*)\}, ?\{([^}]*)\};?', instruction)
    if m:
        if m.group(1) != m.group(2):
            raise RewriteError(f'{where}: mma with A in {m.group(1)} and B in {m.group(2)}')
        d = operand_list(m.group(3), operands, where, ('=f', '+f'))
        a = operand_list(m.group(4), operands, where, ('r',))
        b = operand_list(m.group(5), operands, where, ('r',))
        c = operand_list(m.group(6), operands, where, ('f', '+f'))
        if (len(d), len(a), len(b), len(c)) != (4, 4, 2, 4):
            raise RewriteError(f'{where}: mma.m16n8k16 with {len(d)}, {len(a)}, {len(b)}, {len(c)} registers')
        found.add(f'mma.{m.group(1)}')
        kind = '::emu::Type::BF16' if m.group(1) == 'bf16' else '::emu::Type::F16'
        stores = ' '.join(f'{x} = emu_d[{i}];' for i, x in enumerate(d))
        return (f'{{ const float emu_c[4] = {{{", ".join(c)}}}; const uint32_t emu_a[4] = {{{", ".join(a)}}}; '
                f'const uint32_t emu_b[2] = {{{", ".join(b)}}}; float emu_d[4]; '
                f'::emu::mma_m16n8k16<{kind}>(emu_d, emu_a, emu_b, emu_c); {stores} }}')

    m = re.fullmatch(r'cp\.async\.(ca|cg)\.shared(?:::cta)?\.global(?:\.L2::\w+)? '
                     r'\[(%\d+)\], ?\[(%\d+)\], ?(\w+|%\d+)(?:, ?(%\d+))?;?', instruction)
    if m:
        [dst] = operand_list(m.group(2), operands, where, ('r', 'l'))
        [src] = operand_list(m.group(3), operands, where, ('l',))
        cp_size = immediate(m.group(4), operands, where)
        src_size = operand_list(m.group(5), operands, where, ('r', 'n'))[0] if m.group(5) else cp_size
        found.add('cp.async')
        return f'::emu::cp_async("{m.group(1)}", ({dst}), ({src}), {cp_size}, ({src_size}));'

    if re.fullmatch(r'cp\.async\.commit_group;?', instruction):
        found.add('cp.async.commit_group')
        return '::emu::cp_async_commit_group();'

    m = re.fullmatch(r'cp\.async\.wait_group (\w+|%\d+);?', instruction)
    if m:
        found.add('cp.async.wait_group')
        return f'::emu::cp_async_wait_group({immediate(m.group(1), operands, where)});'
    if re.fullmatch(r'cp\.async\.wait_all;?', instruction):
        found.add('cp.async.wait_group')
        return '::emu::cp_async_wait_group(0);'

    m = re.fullmatch(r'ex2\.approx\.ftz\.f32 (%\d+), ?(%\d+);?', instruction)
    if m:
        [y] = operand_list(m.group(1), operands, where, ('=f',))
        [x] = operand_list(m.group(2), operands, where, ('f',))
        found.add('ex2.approx.ftz')
        return f'{y} = ::emu::ex2_approx_ftz({x});'

    raise RewriteError(f'{where}: no emulation of the PTX instruction {instruction!r} (add it to emu.h and rewrite.py)')


def rewrite_asm_statements(text, name, found):
    code = blank_comments_and_literals(text)
    out, last = [], 0
    for m in re.finditer(r'\b(?:asm|__asm__)\b(?:\s+(?:volatile|__volatile__))?\s*\(', code):
        where = f'{name}:{line_of(text, m.start())}'
        open_at = m.end() - 1
        close = matching_close(code, open_at)
        semicolon = re.match(r'\s*;', code[close:])
        if not semicolon:
            raise RewriteError(f'{where}: an asm that is not a statement of its own')
        end = close + semicolon.end()
        inner, inner_code = text[open_at + 1:close - 1], code[open_at + 1:close - 1]
        parts = split_top_level(inner, inner_code, ':')
        if len(parts) > 4:
            raise RewriteError(f'{where}: asm goto or an unexpected number of colons')
        parts += [('', '')] * (4 - len(parts))
        instruction = string_literal_value(parts[0][0], where)
        operands = parse_operands(*parts[1], where) + parse_operands(*parts[2], where)
        for out_op in parse_operands(*parts[1], where):
            if not out_op.constraint.startswith(('=', '+')):
                raise RewriteError(f'{where}: output operand with constraint {out_op.constraint!r}')
        if parts[3][1].strip() and parts[3][0].strip() != '"memory"':
            raise RewriteError(f'{where}: asm clobbers {parts[3][0].strip()} are not emulated')
        out.append(text[last:m.start()])
        out.append(keep_lines(rewrite_asm(instruction, operands, where, found), text[m.start():end]))
        last = end
    out.append(text[last:])
    return ''.join(out)


# ---- everything else a host compiler cannot take ----

def rewrite_cvta(text, name, found):
    code = blank_comments_and_literals(text)
    hits = [m.start() for m in re.finditer(r'\b__cvta_generic_to_shared\b', code)]
    for start in reversed(hits):
        text = text[:start] + '::emu::cvta_generic_to_shared' + text[start + len('__cvta_generic_to_shared'):]
    if hits:
        found.add('__cvta_generic_to_shared')
    return text


def rewrite_static_shared(text, name, found):
    """`__shared__ T name[N]...;` -> `static T name[N]...;`: the blocks run one after the other on one
    OS thread, so a function's static array is the block's shared array (not checked for reads
    of unwritten elements, as dynamic shared memory is)."""
    code = blank_comments_and_literals(text)
    pattern = re.compile(r'(?<!extern )\b__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\]]+\]\s*)+);')
    out, last = [], 0
    for m in pattern.finditer(code):
        out.append(text[last:m.start()])
        out.append(f'static {text[m.start(1):m.end(1)]} {m.group(2)}{text[m.start(3):m.end(3)]};')
        last = m.end()
        found.add('static __shared__')
    out.append(text[last:])
    return ''.join(out)


def rewrite_shared_declarations(text, name, found):
    code = blank_comments_and_literals(text)
    pattern = re.compile(r'extern\s+__shared__\s+(?:__align__\s*\(\s*(\d+)\s*\)\s+)?([\w:]+(?:\s+[\w:]+)*?)\s+(\w+)\s*\[\s*\]\s*;')
    out, last = [], 0
    for m in pattern.finditer(code):
        alignment = m.group(1) or '16'
        out.append(text[last:m.start()])
        out.append(f'{m.group(2)}* const {m.group(3)} = ::emu::dynamic_shared<{m.group(2)}>({alignment});')
        last = m.end()
        found.add('extern __shared__')
    out.append(text[last:])
    text = ''.join(out)
    code = blank_comments_and_literals(text)
    other = re.search(r'\b__shared__\b', code)
    if other:
        raise RewriteError(f'{name}:{line_of(text, other.start())}: a __shared__ declaration other than '
                           f'`extern __shared__ [__align__(n)] T name[];` (static shared arrays are not emulated)')
    return text


def rewrite_launches(text, name, found):
    code = blank_comments_and_literals(text)
    out, last = [], 0
    for m in re.finditer(r'([\w:]+(?:\s*<[^<>;]*>)?)\s*<<<', code):
        where = f'{name}:{line_of(text, m.start())}'
        close = code.find('>>>', m.end())
        if close < 0:
            raise RewriteError(f'{where}: <<< without >>>')
        config = [c.strip() for c, _ in split_top_level(text[m.end():close], code[m.end():close], ',')]
        if not 2 <= len(config) <= 4:
            raise RewriteError(f'{where}: a launch configuration of {len(config)} values')
        config += ['0', 'nullptr'][len(config) - 2:]
        args_open = close + 3 + (len(code[close + 3:]) - len(code[close + 3:].lstrip()))
        if code[args_open] != '(':
            raise RewriteError(f'{where}: no argument list after >>>')
        args_close = matching_close(code, args_open)
        semicolon = re.match(r'\s*;', code[args_close:])
        if not semicolon:
            raise RewriteError(f'{where}: a kernel launch that is not a statement of its own')
        end = args_close + semicolon.end()
        args = text[args_open + 1:args_close - 1].strip()
        out.append(text[last:m.start()])
        call = f'::emu::launch({text[m.start():m.end() - 3].strip()}, {", ".join(config)}, {args});'
        out.append(keep_lines(call, text[m.start():end]))
        last = end
        found.add('<<<>>>')
    out.append(text[last:])
    return ''.join(out)


def rewrite_kernel_entries(text, name, found):
    code = blank_comments_and_literals(text)
    inserts = []
    for m in re.finditer(r'\b__global__\b', code):
        i, depth = m.end(), 0
        while i < len(code):
            c = code[i]
            if c in '([':
                depth += 1
            elif c in ')]':
                depth -= 1
            elif depth == 0 and c == ';':
                break  # a declaration
            elif depth == 0 and c == '{':
                inserts.append(i + 1)
                break
            i += 1
    for at in reversed(inserts):
        text = text[:at] + ' ::emu::enter_kernel(__PRETTY_FUNCTION__);' + text[at:]
    if inserts:
        found.add('__global__')
    return text


def header(source, root):
    rel = source.relative_to(root)
    return (f'// Generated by bench/experiments/warp_emulation/rewrite.py from {rel}: do not edit.\n'
            f'// The same code with its PTX (asm statements), dynamic shared memory and launches turned\n'
            f'// into calls of emu.h, so that g++ compiles it and it runs on the host.\n'
            f'#include "emu.h"\n')


def require(found, wanted, name):
    missing = [w for w in wanted if w not in found]
    if missing:
        raise RewriteError(f'{name}: found no {", ".join(missing)}; the kernels changed in a way rewrite.py '
                           f'does not know: update rewrite.py (and emu.h) before trusting the experiment')


def rewrite_file(source, root, wanted):
    name = str(source.relative_to(root))
    text = source.read_text()
    found = set()
    steps = (rewrite_asm_statements, rewrite_cvta, rewrite_shared_declarations, rewrite_launches,
             rewrite_kernel_entries)
    if 'static __shared__' in wanted:  # the row kernels: static shared arrays, no dynamic ones
        steps = (rewrite_static_shared,) + steps
    for step in steps:
        text = step(text, name, found)
    require(found, wanted, name)
    # Nothing a host compiler would misread may be left.
    code = blank_comments_and_literals(text)
    for pattern, what in ((r'\b(?:asm|__asm__)\b', 'an asm statement'), (r'<<<', 'a kernel launch'),
                          (r'\b__cvta_\w+', 'an address-space conversion')):
        left = re.search(pattern, code)
        if left:
            raise RewriteError(f'{name}:{line_of(text, left.start())}: {what} rewrite.py did not rewrite')
    return header(source, root) + text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out_dir', type=pathlib.Path)
    parser.add_argument('--source-root', type=pathlib.Path, default=HERE.parents[2],
                        help='the repository whose cuda/ is read (default: this one)')
    args = parser.parse_args()
    root = args.source_root.resolve()
    jobs = [
        (root / 'cuda/mma.cuh', args.out_dir / 'minigrad/cuda/mma.cuh',
         ['ldmatrix.x4', 'ldmatrix.x4.trans', 'mma.bf16', 'mma.f16', 'cp.async', 'cp.async.commit_group',
          'cp.async.wait_group', '__cvta_generic_to_shared']),
        (root / 'cuda/flash_attention.cu', args.out_dir / 'flash_attention.inc',
         ['extern __shared__', '<<<>>>', '__global__', 'ex2.approx.ftz']),
        (root / 'cuda/softmax_dropout.cu', args.out_dir / 'softmax_dropout.inc',
         ['static __shared__', '<<<>>>', '__global__']),
        (root / 'cuda/softmax.cu', args.out_dir / 'softmax.inc', ['static __shared__', '<<<>>>', '__global__']),
        (root / 'cuda/cross_entropy.cu', args.out_dir / 'cross_entropy.inc',
         ['static __shared__', '<<<>>>', '__global__']),
        (root / 'cuda/normalization.cu', args.out_dir / 'normalization.inc',
         ['static __shared__', 'extern __shared__', '<<<>>>', '__global__']),
        (root / 'cuda/column_sums.cuh', args.out_dir / 'minigrad/cuda/column_sums.cuh',
         ['static __shared__', '<<<>>>', '__global__']),
    ]
    try:
        results = []
        for source, target, wanted in jobs:
            if not source.is_file():
                raise RewriteError(f'{source}: no such file')
            results.append((target, rewrite_file(source, root, wanted)))
    except RewriteError as e:
        print(f'rewrite.py: {e}', file=sys.stderr)
        return 1
    for target, text in results:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
