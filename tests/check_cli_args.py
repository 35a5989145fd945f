#!/usr/bin/env python3
"""check_cli_args.py NUVEC MODELS_DIR: the subcommands' numeric options (tools/args.c, and `nuvec bench
pipeline`'s) refuse what is not a number in their range with exit status 2 and a message naming the
option, before opening a device or a file: no silent default, no wrapped value (`nuvec demo
--elements 99999999999` once ran 1,215,752,191 elements and failed). In range, they run: `nuvec demo`
with small values on the default device, `nuvec make-gguf` with --seed, --layers and --threads. Output
that does not get out (a closed pipe, a full device) ends a command with exit status 1 and a message."""
import os
import subprocess
import sys
import tempfile

from checks import check, closed_reader, failures, status

nuvec, models = sys.argv[1], sys.argv[2]
model = f"{models}/stories260K/model.gguf"


REFUSED = [
    (["demo", "--elements", "abc"], "--elements"),
    (["demo", "--elements", "99999999999"], "--elements"),
    (["demo", "--elements", "0"], "--elements"),
    (["demo", "--steps", "-1"], "--steps"),
    (["demo", "--steps"], "--steps"),
    (["demo", "--size", "12x"], "--size"),
    (["demo", "--size", " 5"], "--size"),
    (["bench", "pipeline", "--elements", "4096abc"], "--elements"),
    (["bench", "pipeline", "--in-flight", "0"], "--in-flight"),
    (["generate", model, "-n", "-3"], "-n"),
    (["generate", model, "-n", "+3"], "-n"),
    (["generate", model, "--temp", "nan"], "--temp"),
    (["generate", model, "--seed", "18446744073709551616"], "--seed"),
    (["generate", model, "--max-memory", "0"], "--max-memory"),
    (["chat", model, "--ctx", "1"], "--ctx"),
    (["chat", model, "-n", "2.5"], "-n"),
    (["chat", model, "--top-p", "1.5"], "--top-p"),
    (["serve", model, "--port", "70000"], "--port"),
    (["serve", model, "--parallel", "0"], "--parallel"),
    (["make-gguf", "--shape", "tiny", "--dtype", "f16", "--out", "/nonexistent/x.gguf", "--threads", "0"], "--threads"),
    (["make-gguf", "--shape", "tiny", "--dtype", "f16", "--out", "/nonexistent/x.gguf", "--layers", "1025"], "--layers"),
    (["quantize", model, "/nonexistent/out.gguf", "--type", "q8_0", "--threads", "abc"], "--threads"),
    (["load", "--chunk", "0", model], "--chunk"),
]
for args, option in REFUSED:
    p = subprocess.run([nuvec, *args], capture_output=True, text=True, timeout=120)
    check(p.returncode == 2 and option in p.stderr and "nuvec" in p.stderr,
          f"{' '.join(args)}: rc {p.returncode}, stderr {p.stderr[:300]!r}")

# In range: they run.
p = subprocess.run([nuvec, "demo", "--elements", "4096", "--steps", "2", "--size", "65536"], capture_output=True,
                   text=True, timeout=600)
check(p.returncode == 0 and "4096 floats" in p.stdout, f"demo in range: rc {p.returncode}: {p.stdout[-400:]} {p.stderr}")
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "t.gguf")
    p = subprocess.run([nuvec, "make-gguf", "--shape", "tiny", "--dtype", "f16", "--out", out, "--seed", "7",
                        "--layers", "1", "--threads", "2"], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and os.path.getsize(out) > 0, f"make-gguf in range: rc {p.returncode}: {p.stderr}")

# Output that does not get out: a closed pipe (the reader gone before the first write) and a full
# device; the command ends with exit status 1 and says so (SIGPIPE ignored: not killed by it).
def closed_pipe(args):
    w = closed_reader()
    p = subprocess.Popen([nuvec, *args], stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    err = p.communicate(timeout=300)[1].decode(errors="replace")
    return p.returncode, err


for args in (["info"], ["tokenize", f"{models}/aidreams260K/model.gguf", "--prompt", "hello there"]):
    rc, err = closed_pipe(args)
    check(rc == 1 and "nuvec: standard output: Broken pipe" in err, f"{' '.join(args)} | (closed): rc {rc}: {err[-300:]!r}")
if os.path.exists("/dev/full"):
    with open("/dev/full", "w") as full:
        p = subprocess.run([nuvec, "info"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    check(p.returncode == 1 and "nuvec: standard output:" in p.stderr, f"info > /dev/full: rc {p.returncode}: {p.stderr!r}")

print(f"{len(REFUSED)} refusals, 2 runs and 3 closed outputs checked, {len(failures)} failures")
sys.exit(status())
