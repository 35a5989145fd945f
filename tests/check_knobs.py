#!/usr/bin/env python3
"""check_knobs.py [ROOT]: fails when docs/knobs.md, the one list of nuvec's environment variables,
misses a NUVEC_* variable that src/, llm/, tools/ or bench/ reads, or names one that nothing
(tests/ included) reads any more.

A variable counts as read where its name is a whole string literal in C code ("NUVEC_TRACE"):
every getenv, nu__env_on and nu__op_env_knobs call names its variable so. Listed means written as
`NUVEC_NAME` in docs/knobs.md.
"""
import os
import re
import sys

LITERAL = re.compile(r'"(NUVEC_[A-Z0-9_]+)"')
LISTED = re.compile(r'`(NUVEC_[A-Z0-9_]+)')


def literals(root, folders):
    """{variable: first "path:line"} for the whole-literal NUVEC_* names in the .c and .h files."""
    found = {}
    for folder in folders:
        for top, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(top, name)
                with open(path, encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        for m in LITERAL.finditer(line):
                            found.setdefault(m.group(1), f"{os.path.relpath(path, root)}:{n}")
    return found


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    doc = os.path.join(root, "docs", "knobs.md")
    with open(doc, encoding="utf-8") as fh:
        listed = set(LISTED.findall(fh.read()))
    read = literals(root, ["src", "llm", "tools", "bench"])
    anywhere = dict(read, **literals(root, ["tests"]))
    errors = [f"{where}: reads {var}, which docs/knobs.md does not list" for var, where in sorted(read.items())
              if var not in listed]
    errors += [f"docs/knobs.md lists {var}, which no code reads" for var in sorted(listed - set(anywhere))]
    print(f"knobs: {len(read)} variables read by the libraries and tools, {len(listed)} listed")
    for e in errors:
        print("knobs: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
