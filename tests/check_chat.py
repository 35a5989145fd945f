#!/usr/bin/env python3
"""check_chat.py NUVEC MODELS_DIR: `nuvec chat` on the tiny aidreams260K model, typed to through a
pipe: replies stream and are greedy-deterministic, a later turn finds the earlier turns in the
cache (its report on stderr: "N cached"), /reset forgets them (the same first reply again, nothing
cached), Ctrl-C (SIGINT) stops a reply in progress and at the prompt without ending the program,
/exit and end of input quit with status 0; bad arguments exit 2; a closed stdout ends it with
status 1."""
import atexit
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from checks import check, closed_reader, failures

nuvec, models = sys.argv[1], sys.argv[2]
model = f"{models}/aidreams260K/model.gguf"


chats = []


@atexit.register
def no_chat_left():
    for c in chats:
        if c.p.poll() is None:
            c.p.kill()
            c.p.wait()


class Chat:
    def __init__(self, *args):
        self.p = subprocess.Popen([nuvec, "chat", model, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        chats.append(self)
        self.out, self.err = b"", b""
        self.cond = threading.Condition()
        for name in ("out", "err"):
            threading.Thread(target=self._read, args=(name,), daemon=True).start()

    def _read(self, name):
        f = self.p.stdout if name == "out" else self.p.stderr
        while True:
            k = os.read(f.fileno(), 4096)
            with self.cond:
                if k:
                    setattr(self, name, getattr(self, name) + k)
                self.cond.notify_all()
            if not k:
                return

    def wait(self, name, pattern, start, timeout=120):
        """The first match of pattern in stdout/stderr after byte `start`."""
        end = time.time() + timeout
        with self.cond:
            while True:
                m = re.compile(pattern, re.S).search(getattr(self, name), start)
                if m or time.time() > end or self.p.poll() is not None:
                    return m
                self.cond.wait(0.2)

    def say(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def turn(self, line):
        """Sends a message; returns the reply (stdout up to the next prompt) and the report."""
        o, e = len(self.out), len(self.err)
        self.say(line)
        m = self.wait("out", rb"(.*?)\n> ", o)
        r = self.wait("err", rb"\[prompt (\d+) tokens, (\d+) cached; reply (\d+) tokens", e)
        return (m.group(1).decode() if m else None), (tuple(int(x) for x in r.groups()) if r else None)


tpl = tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False)
tpl.write("{%- for m in messages %}{{ m['content'] }}{{ '\\n' }}{% endfor %}")
tpl.close()
c = Chat("--system", "You dream.", "--temp", "0", "-n", "16", "--chat-template", tpl.name)
check(c.wait("out", rb"^> ", 0) is not None, f"no prompt: {c.err.decode()}")
r1, s1 = c.turn("Tell me a dream")
check(r1 and s1 and s1[1] == 0 and s1[2] == 16, f"first turn: {r1!r} {s1}")
r2, s2 = c.turn("And another")
check(s2 and s1 and s2[1] >= s1[0] and s2[0] > s1[0] + 2, f"second turn's cache: {s1} then {s2}")
o = len(c.out)
c.say("/reset")
check(c.wait("out", rb"the conversation is reset", o) is not None, "/reset answered")
r3, s3 = c.turn("Tell me a dream")
check(r3 == r1 and s3 and s3[1] == 0, f"after /reset: {r3!r} {s3} (first: {r1!r})")
# Ctrl-C at the prompt: a new prompt, the program goes on.
o = len(c.out)
c.p.send_signal(signal.SIGINT)
check(c.wait("out", rb"\n> ", o, 30) is not None and c.p.poll() is None, "Ctrl-C at the prompt")
o = len(c.out)
c.say("/exit")
check(c.p.wait(60) == 0, "/exit")

# Ctrl-C during a reply (of up to 60 tokens, so it is still going): it stops, the
# conversation goes on.
c = Chat("--temp", "0", "-n", "60", "--chat-template", tpl.name)
check(c.wait("out", rb"^> ", 0) is not None, f"no prompt: {c.err.decode()}")
o, e = len(c.out), len(c.err)
c.say("I remember")
first = c.wait("out", rb"\S", o)
c.p.send_signal(signal.SIGINT)
m = c.wait("out", rb"\[stopped\]\n> ", o, 60)
r = c.wait("err", rb"reply (\d+) tokens", e, 60)
check(first and m and r and int(r.group(1)) < 50 and c.p.poll() is None,
      f"Ctrl-C in a reply: {c.out[o:]!r} {c.err[e:]!r}")
r4, s4 = c.turn("I remember")
check(r4 is not None and s4 and s4[1] > 0, f"a turn after the stop: {r4!r} {s4}")
c.p.stdin.close()  # end of input quits
check(c.p.wait(60) == 0, "end of input")

for bad in (["--temp"], ["-n", "0"], ["--frobnicate"], []):
    p = subprocess.run([nuvec, "chat", *([model] if bad else []), *bad], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    check(p.returncode == 2 and p.stderr, f"{bad}: rc {p.returncode}")
p = subprocess.run([nuvec, "chat", f"{models}/stories260K/hf"], capture_output=True, text=True, timeout=120,
                   stdin=subprocess.DEVNULL)
check(p.returncode == 1 and "tokenizer" in p.stderr, f"a model without a tokenizer: {p.returncode} {p.stderr}")
# A reader of stdout that is gone (`| head -1`; here before the first write): the chat ends with a
# message and status 1 (SIGPIPE ignored, not killed by it).
w = closed_reader()
p = subprocess.Popen([nuvec, "chat", model], stdin=subprocess.PIPE, stdout=w, stderr=subprocess.PIPE)
os.close(w)
try:
    err = p.communicate(b"hello\n", timeout=120)[1].decode(errors="replace")
except subprocess.TimeoutExpired:
    p.kill()
    err = "timed out"
check(p.returncode == 1 and "standard output" in err, f"stdout closed: rc {p.returncode}: {err[-300:]!r}")
for c in chats:
    said = [l for l in c.err.decode(errors="replace").splitlines() if re.search(r"runtime error|Sanitizer", l)]
    check(not said, f"nuvec chat's stderr: {said[:5]}")
os.unlink(tpl.name)
if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("all passed")
