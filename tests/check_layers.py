#!/usr/bin/env python3
"""check_layers.py [SRC_DIR] [--graph]: fails when an include in src/ points up a layer or closes a cycle,
or when the llm/ component beside src/ includes anything but public headers and its own.

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
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^">]+)[">]')
SYSTEM_VULKAN = re.compile(r'^\s*#\s*include\s+<vulkan/')


def module(path):
    return os.path.splitext(path)[0]


def check_component(src, comp):
    """The llm/ component is written against nuvec's public API: its files may include nuvec.h,
    nuvec/*.h, system headers and its own headers (beside them or under its include/), never a
    header of src/. Returns (files, errors)."""
    errors = []
    files = []
    for root, _, names in os.walk(comp):
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                files.append(os.path.join(root, name))
    for path in sorted(files):
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
                if quoted and not any(os.path.exists(o) for o in own):
                    errors.append(f"{rel}:{n}: \"{target}\" is neither a public header nor one of llm/'s")
    return files, errors


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

    # Cycles between modules (a .c with its .h), by Tarjan's strongly connected components.
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
    for comp in comps:
        errors.append("cycle between modules: " + " -> ".join(comp))

    comp = os.path.join(src, "..", "llm")
    comp_files = []
    if os.path.isdir(comp):
        comp_files, comp_errors = check_component(src, comp)
        errors += comp_errors

    up = sum(1 for a, b in arrows
             if a.split(os.sep)[0] in LAYERS and LAYERS[b.split("/")[0]] > LAYERS[a.split(os.sep)[0]])
    largest = max((len(c) for c in comps), default=0)
    if show:
        for a, b in arrows:
            print(f"{a} -> {b}")
    print(f"src/: {len(files)} files, {len(arrows)} include arrows, {up} up a layer, "
          f"{len(comps)} cycles (largest {largest} modules); llm/: {len(comp_files)} files")
    for e in errors:
        print("layering: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
