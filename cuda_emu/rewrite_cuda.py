#!/usr/bin/env python3
"""Rewrites CUDA source into host C++ for minitrain's emulated GPU (cuda_emu/).

Only the two constructs that are not C++ change, and each keeps its line:
  kernel<<<grid, block, smem, stream>>>(args);
      -> kernel | ::mtemu::launch("kernel", __FILE__, __LINE__, MAX_THREADS, grid, block, smem, stream)(args);
     (MAX_THREADS from the kernel's __launch_bounds__ in the same file, 0 without)
  __shared__ T name[N];         -> static constexpr char name_mtemu_tag{}; auto& name = ::mtemu::shared_var<T[N], A>(&name_mtemu_tag, "name");
  extern __shared__ T name[];   -> T* name = ::mtemu::dynamic_shared_var<T>(A);
Everything else (__global__, threadIdx, __syncthreads, ...) is ordinary C++ once
cuda_emu/include is on the include path. A #line directive points diagnostics and __FILE__ at the
original file. Quoted includes of .cuh files are rewritten beside the output, under the same
relative path, so that a mirror include directory placed before the source tree finds them.

usage: rewrite_cuda.py SOURCE_ROOT RELATIVE_PATH OUTPUT_ROOT [DEPFILE OUTPUT_FILE]
"""
import os
import re
import sys


def code_mask(text):
    """A copy of text with comments and string/char literals blanked (same length)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if text[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def match_forward(mask, i, open_c, close_c):
    """Index just past the bracket that closes the one at mask[i]."""
    depth = 0
    for j in range(i, len(mask)):
        if mask[j] == open_c:
            depth += 1
        elif mask[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    raise SyntaxError("unbalanced %s" % open_c)


def split_top_level(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def launch_bounds(text, mask):
    bounds = {}
    for m in re.finditer(r"__launch_bounds__\s*\(", mask):
        end = match_forward(mask, m.end() - 1, "(", ")")
        expr = split_top_level(text[m.end():end - 1])[0]
        name = re.match(r"\s*([A-Za-z_]\w*)\s*\(", mask[end:])
        if name:
            bounds[name.group(1)] = expr
    return bounds


def kernel_expression_start(mask, end):
    """Start of the kernel expression that ends at `end` (before <<<): a possibly qualified
    name with template arguments, e.g. ns::kernel<T, 4>."""
    i = end
    while True:
        while i > 0 and mask[i - 1].isspace():
            i -= 1
        if i > 0 and mask[i - 1] == ">":  # template arguments: back to the matching <
            depth = 0
            while i > 0:
                i -= 1
                if mask[i] == ">":
                    depth += 1
                elif mask[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
            while i > 0 and mask[i - 1].isspace():
                i -= 1
        j = i
        while j > 0 and (mask[j - 1].isalnum() or mask[j - 1] == "_"):
            j -= 1
        if j == i:
            raise SyntaxError("no kernel name before <<<")
        i = j
        k = i
        while k > 0 and mask[k - 1].isspace():
            k -= 1
        if k >= 2 and mask[k - 2:k] == "::":
            i = k - 2
            continue
        return i


def skip_blank_and_directives(mask, i):
    """Index of the first code character at or after i, past blanks and whole preprocessor lines
    (with their backslash continuations)."""
    n = len(mask)
    while i < n:
        if mask[i].isspace():
            i += 1
        elif mask[i] == "#" and mask[mask.rfind("\n", 0, i) + 1:i].strip() == "":
            end = mask.find("\n", i)
            while end > 0 and mask[max(i, end - 2):end].rstrip("\r").endswith("\\"):
                end = mask.find("\n", end + 1)
            i = n if end < 0 else end + 1
        else:
            break
    return i


def rewrite(text):
    mask = code_mask(text)
    bounds = launch_bounds(text, mask)
    edits = []  # (start, end, replacement)

    for m in re.finditer(r"<<<", mask):
        close = mask.find(">>>", m.end())
        if close < 0:
            raise SyntaxError("<<< without >>>")
        start = kernel_expression_start(mask, m.start())
        kernel = text[start:m.start()]
        name = re.sub(r"<.*", "", kernel, flags=re.S).split("::")[-1].strip()
        config = text[m.end():close]
        pretty = " ".join(kernel.split())
        replacement = '%s | ::mtemu::launch("%s", __FILE__, __LINE__, int(%s), %s)' % (
            kernel.rstrip(), pretty, bounds.get(name, "0"), " ".join(config.split()))
        original = text[start:close + 3]
        replacement += "\n" * original.count("\n")
        edits.append((start, close + 3, replacement))

    for m in re.finditer(r"\b__shared__\b", mask):
        stmt_start = max(mask.rfind(c, 0, m.start()) for c in ";{}") + 1
        # Comments are blank in the mask, and preprocessor lines (#if/#else/#endif around the
        # declaration, a #define before it) are not part of it: all stay as they are.
        stmt_start = skip_blank_and_directives(mask, stmt_start)
        stmt_end = mask.find(";", m.end())
        decl = mask[stmt_start:stmt_end]
        lead = ""
        body = " ".join(decl.split())
        align = "0"
        am = re.search(r"(?:__align__|alignas)\s*\(([^)]*)\)|__attribute__\s*\(\(\s*aligned\s*\(([^)]*)\)\s*\)\)", body)
        if am:
            align = am.group(1) or am.group(2)
            body = body[:am.start()] + body[am.end():]
        is_extern = re.search(r"\bextern\b", body) is not None
        body = re.sub(r"\b(extern|static|__shared__)\b", "", body).strip()
        dm = re.match(r"^(.*?)\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", body, flags=re.S)
        if not dm:
            raise SyntaxError("cannot read the __shared__ declaration: " + body)
        type_, name, dims = dm.group(1).strip(), dm.group(2), dm.group(3).strip()
        if is_extern:
            replacement = "%s%s* %s = ::mtemu::dynamic_shared_var<%s>(%s)" % (lead, type_, name, type_, align)
        else:
            replacement = ('%sstatic constexpr char %s_mtemu_tag{}; auto& %s = ::mtemu::shared_var<%s %s, %s>(&%s_mtemu_tag, "%s")'
                           % (lead, name, name, type_, dims, align, name, name))
        replacement += "\n" * decl.count("\n")
        edits.append((stmt_start, stmt_end, replacement))

    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def process(root, rel, out_root, seen):
    if rel in seen:
        return
    seen.add(rel)
    src = os.path.join(root, rel)
    with open(src, encoding="utf-8") as f:
        text = f.read()
    for inc in re.findall(r'^\s*#\s*include\s+"([^"]+\.cuh)"', text, flags=re.M):
        if os.path.exists(os.path.join(root, inc)):
            process(root, inc, out_root, seen)
    out = os.path.join(out_root, rel if rel.endswith(".cuh") else rel + ".cpp")
    new = '#line 1 "%s"\n' % os.path.abspath(src) + rewrite(text)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    try:
        with open(out, encoding="utf-8") as f:
            if f.read() == new:
                return  # unchanged: keep the timestamp, so nothing recompiles
    except FileNotFoundError:
        pass
    tmp = "%s.tmp.%d" % (out, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, out)


def main(argv):
    if len(argv) not in (4, 6):
        sys.exit(__doc__)
    root, rel, out_root = argv[1], argv[2], argv[3]
    seen = set()
    try:
        process(root, rel, out_root, seen)
    except SyntaxError as e:
        sys.exit("rewrite_cuda.py: %s: %s" % (rel, e))
    if len(argv) == 6:
        depfile, output = argv[4], argv[5]
        deps = " ".join(os.path.abspath(os.path.join(root, s)) for s in sorted(seen))
        with open(depfile, "w", encoding="utf-8") as f:
            f.write("%s: %s\n" % (output, deps))


if __name__ == "__main__":
    main(sys.argv)
