#!/usr/bin/env python3
"""check_layers.py [SRC_DIR] [--graph]: fails when an include in src/ points up a layer or closes a cycle,
or when the llm/ component beside src/ includes anything but public headers and its own, or one of its
parts includes a part above it (LLM_RANKS) or closes a cycle, or when a file of tools/ (the nuvec
command) includes anything but public headers (nuvec's and libnuvec_llm's) and tools/' own.
(bench/ is not checked: its benchmarks compare nuvec with hand-written Vulkan through src/'s device.)

src/ is layered; a file may include headers of its own layer and of the layers below it, and the
public headers (nuvec.h, nuvec/*.h). Layers of one rank (kernel, debug) may not include each other.
Every internal include names its layer ("memory/buffer.h"). core/ never includes Vulkan. A module is
a .c and its .h together; modules must not form a cycle, within a layer either.

It prints the graph's counts (files, include arrows, arrows up a layer, the largest cycle), and
with --graph every arrow.
"""
import os
import re
import sys

# Lowest first: what each layer is, in README's "Where things are".
LAYERS = {
    "core": 0,     # host allocation, errors and statuses, clocks; no Vulkan
    "vk": 1,       # the loader and function tables, instance, physical devices, memory types, blocks, queues
    "memory": 2,   # the allocator's policy, buffers and their backings, guards, mapped files, staged copies
    "kernel": 3,   # SPIR-V, pipelines and their caches, the builtin kernels
    "debug": 3,    # timelines and captures
    "exec": 4,     # recording, hazard tracking, submission and completion
    "io": 5,       # file formats (safetensors) and moves of files to the device
    "ops": 5,      # tensors as views, and the kernel library's operations on them
    "runtime": 6,  # opening and closing a device: starts and stops every module
}
# llm/'s parts, lowest first (a file may include headers of its own part, of parts of a lower rank,
# and public headers): keyed by the module's path under llm/ without extension, or its folder.
LLM_RANKS = {
    "common": 0,      # failure messages, host allocation
    "source": 1,      # file formats: GGUF files, Hugging Face folders
    "tokenizer": 1,   # the tokenizers behind one opaque type, their vocabulary readers
    "sampler": 1,
    "chat": 2,        # chat templates
    "arch/arch": 3,   # what an architecture is (roles, hyperparameters), the registry
    "weights": 4,     # the roster's tensors on the device
    "kv_cache": 4,    # sequence slots
    "blocks": 5,      # the shared blocks of a layer
    "arch": 6,        # the architectures, each written from the blocks
    "runner": 6,      # prefill passes, decode graphs, batched steps
    "shares": 7,      # a model's devices in order: the shares of a layer split
    "model": 8,       # the public calls
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^">]+)[">]')
SYSTEM_VULKAN = re.compile(r'^\s*#\s*include\s+<vulkan/')
INTERNAL_NAME = re.compile(r'\bnu__[a-z]\w*')  # src/'s internal non-static names (nu__fail)


def module(path):
    """A module: x.c with x.h, and with x_int.h, its private header shared by the module's files."""
    base = os.path.splitext(path)[0]
    return base[:-4] if base.endswith("_int") else base


def llm_part(rel):
    """The part (LLM_RANKS key) of a file at llm/-relative path rel, or None."""
    mod = module(rel).replace(os.sep, "/")
    if mod in LLM_RANKS:
        return mod
    top = mod.split("/")[0]
    if top in LLM_RANKS:
        return top
    # A part's further files beside its module at llm/'s top (runner_batch.c is the runner's).
    parts = [p for p in LLM_RANKS if "/" not in p and top.startswith(p + "_")]
    return max(parts, key=len) if parts else None


def check_component(src, comp):
    """The llm/ component is written against nuvec's public API: its files may include nuvec.h,
    nuvec/*.h, system headers and its own headers (beside them or under its include/), never a
    header of src/. Returns (files, errors)."""
    errors = []
    files = source_files(comp)
    arrows = []
    for path in files:
        rel = os.path.relpath(path, os.path.dirname(comp))
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = ANY_INCLUDE.match(line)
                if not m:
                    continue
                quoted, target = m.group(1) == '"', m.group(2)
                if target == "nuvec.h" or target.startswith("nuvec/"):
                    continue  # the public API
                if ".." in target.split("/") or os.path.exists(os.path.join(src, target)):
                    errors.append(f"{rel}:{n}: includes \"{target}\" from src/: llm/ sees public headers only")
                    continue
                own = [os.path.join(os.path.dirname(path), target), os.path.join(comp, target),
                       os.path.join(comp, "include", target)]
                found = [o for o in own if os.path.exists(o)]
                if quoted and not found:
                    errors.append(f"{rel}:{n}: \"{target}\" is neither a public header nor one of llm/'s")
                    continue
                if not quoted or "include" in os.path.relpath(found[0], comp).split(os.sep)[:1]:
                    continue  # a system header, or the component's public one
                inner = os.path.relpath(path, comp)
                tgt = os.path.relpath(os.path.normpath(found[0]), comp)
                a, b = llm_part(inner), llm_part(tgt)
                if a is None or b is None:
                    errors.append(f"{rel}:{n}: {inner if a is None else tgt} is in no part of llm/ (check_layers.py's "
                                  f"LLM_RANKS)")
                elif LLM_RANKS[b] > LLM_RANKS[a] or (LLM_RANKS[b] == LLM_RANKS[a] and a != b):
                    errors.append(f"{rel}:{n}: includes \"{target}\": llm/'s {b} is not below {a}")
                else:
                    arrows.append((inner, tgt))
    errors += [f"llm/: cycle between modules: {' -> '.join(c)}" for c in cycles(arrows)]
    return files, errors


def source_files(top):
    """The .c and .h files under top, sorted."""
    files = []
    for root, _, names in os.walk(top):
        files += [os.path.join(root, n) for n in names if n.endswith((".c", ".h"))]
    return sorted(files)


def check_tools(src, tools, llm):
    """tools/ is written against the public API: its files may include system headers, nuvec.h,
    nuvec/*.h, libnuvec_llm's public headers (llm/include: nuvec_llm.h, nuvec_llm/*.h) and tools/'
    own headers (beside the file, or from tools/: "serve/prompt.h"), never a header of src/ or an
    internal one of llm/. Returns (files, errors)."""
    errors = []
    files = source_files(tools)
    for path in files:
        rel = os.path.relpath(path, os.path.dirname(tools))
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                code = line.split("//")[0]
                if INTERNAL_NAME.search(code) and not code.lstrip().startswith(("/*", "*")):
                    errors.append(f"{rel}:{n}: names {INTERNAL_NAME.search(code).group(0)}, an internal of src/: "
                                  f"tools/ calls the public API only")
                m = ANY_INCLUDE.match(line)
                if not m or m.group(1) != '"':
                    continue  # not an include, or a system header
                target = m.group(2)
                if target == "nuvec.h" or target.startswith("nuvec/"):
                    continue  # nuvec's public API
                if ".." in target.split("/") or os.path.exists(os.path.join(src, target)):
                    errors.append(f"{rel}:{n}: includes \"{target}\", a header of src/: tools/ sees public headers "
                                  f"only (nuvec.h, nuvec/*.h, nuvec_llm.h); use the public API or a helper in tools/")
                    continue
                own = [os.path.join(os.path.dirname(path), target), os.path.join(tools, target)]
                if any(os.path.exists(o) for o in own) or os.path.exists(os.path.join(llm, "include", target)):
                    continue  # tools/' own, or libnuvec_llm's public header
                if os.path.exists(os.path.join(llm, target)):
                    errors.append(f"{rel}:{n}: includes \"{target}\", an internal header of llm/: tools/ sees "
                                  f"libnuvec_llm's public headers only (llm/include)")
                else:
                    errors.append(f"{rel}:{n}: \"{target}\" is neither a public header nor one of tools/'")
    return files, errors


def cycles(arrows):
    """The strongly connected components of more than one module (a .c with its .h) of the include
    arrows, by Tarjan's algorithm."""
    graph = {}
    for a, b in arrows:
        ma, mb = module(a), module(b)
        if ma != mb:
            graph.setdefault(ma, set()).add(mb)
            graph.setdefault(mb, set())
    index, low, stack, on, comps = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main(argv):
    src = argv[1] if len(argv) > 1 and not argv[1].startswith("--") else os.path.join(os.path.dirname(__file__), "..", "src")
    show = "--graph" in argv
    errors = []
    files = []
    arrows = []  # (from file, to file)
    for root, _, names in os.walk(src):
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                files.append(os.path.relpath(os.path.join(root, name), src))
    for f in sorted(files):
        layer = f.split(os.sep)[0]
        if layer not in LAYERS:
            errors.append(f"{f}: not in a layer folder ({', '.join(LAYERS)})")
            continue
        with open(os.path.join(src, f), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if layer == "core" and SYSTEM_VULKAN.match(line):
                    errors.append(f"{f}:{n}: core/ includes Vulkan")
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if target == "nuvec.h" or target.startswith("nuvec/"):
                    continue  # the public API
                to_layer = target.split("/")[0]
                if "/" not in target or to_layer not in LAYERS:
                    if os.path.exists(os.path.join(src, target)):
                        errors.append(f"{f}:{n}: include \"{target}\" without its layer")
                    continue  # a generated or third-party header
                if not os.path.exists(os.path.join(src, target)):
                    errors.append(f"{f}:{n}: \"{target}\" does not exist")
                    continue
                arrows.append((f, target))
                if LAYERS[to_layer] > LAYERS[layer] or (LAYERS[to_layer] == LAYERS[layer] and to_layer != layer):
                    errors.append(f"{f}:{n}: includes \"{target}\": {to_layer}/ is not below {layer}/")

    # Cycles between modules (a .c with its .h).
    comps = cycles(arrows)
    for comp in comps:
        errors.append("cycle between modules: " + " -> ".join(comp))

    comp = os.path.join(src, "..", "llm")
    comp_files = []
    if os.path.isdir(comp):
        comp_files, comp_errors = check_component(src, comp)
        errors += comp_errors

    tools = os.path.join(src, "..", "tools")
    tool_files = []
    if os.path.isdir(tools):
        tool_files, tool_errors = check_tools(src, tools, comp)
        errors += tool_errors

    up = sum(1 for a, b in arrows
             if a.split(os.sep)[0] in LAYERS and LAYERS[b.split("/")[0]] > LAYERS[a.split(os.sep)[0]])
    largest = max((len(c) for c in comps), default=0)
    if show:
        for a, b in arrows:
            print(f"{a} -> {b}")
    print(f"src/: {len(files)} files, {len(arrows)} include arrows, {up} up a layer, "
          f"{len(comps)} cycles (largest {largest} modules); llm/: {len(comp_files)} files; "
          f"tools/: {len(tool_files)} files")
    for e in errors:
        print("layering: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
