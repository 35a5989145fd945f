#!/usr/bin/env python3
"""check_serve.py NUVEC MODELS_DIR NPM_DIR: `nuvec serve` end to end on loopback, on the tiny
aidreams260K model. The servers are started here (127.0.0.1, a free port) and every request is
bounded in count and time. Checked: /health (503 while loading), /v1/models, /tokenize,
/detokenize, /apply-template, greedy completions (the model README's ids and text) streamed and
not, malformed requests (truncated JSON, wrong types, unknown model, over-long prompts, huge
bodies, slow clients, disconnects mid-request and mid-stream), the bounded queue (429 with
Retry-After), a load test (32 concurrent streaming clients, 200 requests, each greedy response
identical token for token to the same request served alone, /metrics accounting for every one,
memory back to its idle level), the official `openai` npm client and the chat page in headless
Chromium (tests/check_serve_openai.mjs, check_serve_page.mjs; npm packages installed into
NPM_DIR, pinned), and a drain on SIGTERM."""
import atexit
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from checks import check, failures

nuvec, models, npm_dir = sys.argv[1], sys.argv[2], sys.argv[3]
# A sanitizer build decodes some ten times slower: its load test is smaller (the full one runs in
# the normal build).
sanitized = len(sys.argv) > 4 and sys.argv[4] == "sanitized"
WAIT = 900 if sanitized else 60  # seconds a request may take
GREEDY = 12 if sanitized else 40  # tokens of the README's greedy run checked
model = f"{models}/aidreams260K/model.gguf"
here = os.path.dirname(os.path.abspath(__file__))
t_start = time.time()
NPM_PACKAGES = ["openai@6.49.0", "playwright-core@1.65.1"]


servers = []


@atexit.register
def no_server_left():
    """However the script ends, the servers it started end too."""
    for s in servers:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()


class Server:
    def __init__(self, *args):
        self.p = subprocess.Popen([nuvec, "serve", model, "--port", "0", *args], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        servers.append(self)
        self.lines = []
        self.port = None
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_line("listening on", 60)
        self.port = int(re.search(r"127\.0\.0\.1:(\d+)", self.find("listening on")).group(1))
        self.first_health = self.get("/health")  # right after listening: the model is loading
        self.wait_line("ready:", 120)

    def _read(self):
        for line in self.p.stderr:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def find(self, text):
        return next((l for l in self.lines if l and text in l), None)

    def wait_line(self, text, timeout):
        end = time.time() + timeout
        with self.cond:
            while not self.find(text):
                if None in self.lines or time.time() > end:
                    raise RuntimeError(f"the server did not say '{text}': {''.join(l for l in self.lines if l)}")
                self.cond.wait(0.5)

    def request(self, method, path, body=None, headers=None, timeout=WAIT):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body, **kw):
        s, h, b = self.request("POST", path, body, **kw)
        try:
            return s, h, json.loads(b)
        except ValueError:
            return s, h, b

    def stream(self, path, body, timeout=WAIT):
        """The events of a streamed request: JSON objects, then "[DONE]"."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return r.status, json.loads(r.read())
            events = []
            for line in r.read().decode().split("\n\n"):
                if line.startswith("data: "):
                    events.append("[DONE]" if line[6:] == "[DONE]" else json.loads(line[6:]))
            return 200, events
        finally:
            c.close()

    def metrics(self):
        s, _, b = self.get("/metrics")
        out = {}
        for line in b.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self, timeout=60):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None


def streamed_text(events):
    text, toks, finish, usage = "", [], None, None
    for e in events:
        if e == "[DONE]":
            continue
        if e.get("usage"):
            usage = e["usage"]
        for c in e.get("choices", []):
            text += c.get("text", "") or (c.get("delta") or {}).get("content", "") or ""
            toks += c.get("tokens", [])
            finish = c.get("finish_reason") or finish
    return text, toks, finish, usage


DREAM = [429, 464, 448, 464, 464, 464, 464, 464, 464, 448, 429, 468, 342, 358, 402, 327, 446, 299, 303, 266,
         437, 443, 434, 438, 451, 306, 443, 259, 430, 446, 299, 303, 266, 437, 443, 434, 438, 451, 306, 443]
DREAM_TEXT = " 0.000000. Dimensions unfold, as I softly refine, as I softly ref"

srv = Server("--parallel", "8", "--queue", "32", "--timeout", "3", "--max-body", "65536")
check(srv.first_health[0] == 503 and json.loads(srv.first_health[2]) == {"status": "loading"},
      f"/health while loading: {srv.first_health}")
s, _, b = srv.get("/health")
check(s == 200 and json.loads(b) == {"status": "ok"}, f"/health: {s} {b}")
s, _, b = srv.get("/v1/models")
check(s == 200 and json.loads(b)["data"][0]["id"] == "model", f"/v1/models: {b}")
s, h, b = srv.get("/")
check(s == 200 and h.get("Content-Type", "").startswith("text/html") and b"/v1/chat/completions" in b, "the chat page")

# Tokenizer routes and the template.
s, _, o = srv.post("/tokenize", {"content": "I dream of"})
check(s == 200 and o["tokens"] == [1, 303, 281, 269, 435, 447, 275], f"/tokenize: {o}")
s, _, o = srv.post("/tokenize", {"content": "I dream of", "add_special": False, "with_pieces": True})
check(s == 200 and [t["id"] for t in o["tokens"]] == [303, 281, 269, 435, 447, 275] and
      "".join(t["piece"] for t in o["tokens"]) == "I dream of", f"/tokenize with pieces: {o}")
s, _, o = srv.post("/detokenize", {"tokens": DREAM})
check(s == 200 and o["content"] == DREAM_TEXT[1:], f"/detokenize (the first piece's space dropped): {o}")
s, _, o = srv.post("/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
check(s == 200 and o["prompt"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", f"/apply-template: {o}")

# Greedy completions: the README's ids and text, whole and streamed.
s, _, o = srv.post("/v1/completions", {"prompt": "I dream of", "max_tokens": GREEDY, "temperature": 0,
                                       "return_tokens": True})
text_of = (lambda t: DREAM_TEXT) if GREEDY == 40 else (lambda t: t if t and DREAM_TEXT.startswith(t) else None)
check(s == 200 and o["choices"][0]["tokens"] == DREAM[:GREEDY] and o["choices"][0]["text"] == text_of(o["choices"][0]["text"])
      and o["usage"] == {"prompt_tokens": 7, "completion_tokens": GREEDY, "total_tokens": 7 + GREEDY,
                     "prompt_tokens_details": {"cached_tokens": o["usage"]["prompt_tokens_details"]["cached_tokens"]}},
      f"greedy completion: {o}")
s, ev = srv.stream("/v1/completions", {"prompt": "I dream of", "max_tokens": GREEDY, "temperature": 0, "stream": True,
                                       "return_tokens": True, "stream_options": {"include_usage": True}})
text, toks, finish, usage = streamed_text(ev)
check(s == 200 and ev[-1] == "[DONE]" and text == text_of(text) and toks == DREAM[:GREEDY] and finish == "length" and
      usage["completion_tokens"] == GREEDY, f"streamed completion: {text!r} {toks} {finish} {usage}")
s, _, o = srv.post("/v1/completions", {"prompt": [[1, 303, 281, 269, 435, 447, 275]], "max_tokens": 5, "temperature": 0,
                                       "return_tokens": True})
check(s == 200 and o["choices"][0]["tokens"] == DREAM[:5] and o["usage"]["prompt_tokens_details"]["cached_tokens"] == 6,
      f"a prompt of ids, its prefix cached: {o}")
# Stop strings: the text ends before the first one, even when it spans tokens.
for stop in ("Dim", ["xyz", "ensions"], ". D"):
    s, _, o = srv.post("/v1/completions", {"prompt": "I dream of", "max_tokens": 40, "temperature": 0, "stop": stop})
    want = DREAM_TEXT[:DREAM_TEXT.find(stop if isinstance(stop, str) else "ensions")]
    check(s == 200 and o["choices"][0]["text"] == want and o["choices"][0]["finish_reason"] == "stop",
          f"stop {stop!r}: {o}")
# Sampling: the same seed, the same tokens.
runs = [srv.post("/v1/completions", {"prompt": "I remember", "max_tokens": 12, "temperature": 0.9, "top_k": 20,
                                     "top_p": 0.95, "seed": 7, "return_tokens": True})[2] for _ in range(2)]
check(runs[0]["choices"][0]["tokens"] == runs[1]["choices"][0]["tokens"], f"seeded sampling: {runs}")

# Malformed requests: 4xx with OpenAI's error body naming the problem; the server goes on.
long_prompt = "dreams of vectors " * 60
bad = [
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}', 400, "not valid JSON"),
    ("/v1/chat/completions", b'', 400, "empty"),
    ("/v1/chat/completions", b'[1, 2]', 400, "JSON object"),
    ("/v1/chat/completions", b'{"messages": []} x', 400, "after its JSON"),
    ("/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
    ("/v1/chat/completions", {"messages": [{"content": "hi"}]}, 400, "role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "text"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, 400, "temperature"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1.5}, 400, "max_tokens"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}, 400, "max_tokens"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stop": ["a"] * 5}, 400, "stop"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, 400, "stream"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "'n'"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "model": "gpt-4"}, 404, "does not exist"),
    ("/v1/completions", {"prompt": long_prompt}, 400, "context"),
    ("/v1/completions", {"prompt": [1, 99999]}, 400, "vocabulary"),
    ("/v1/completions", {"prompt": 5}, 400, "prompt"),
    ("/v1/completions", {"prompt": "a", "top_p": 2}, 400, "top_p"),
    ("/detokenize", {"tokens": [1, -3]}, 400, "tokens"),
    ("/tokenize", {"content": None}, 400, "content"),
    ("/v1/nothing", {}, 404, "no route"),
]
for path, body, want, words in bad:
    s, _, o = srv.post(path, body)
    ok = s == want and isinstance(o, dict) and set(o.get("error", {})) >= {"message", "type", "param", "code"}
    check(ok and words in o["error"]["message"], f"{path} {str(body)[:60]}: {s} {o}")
s, _, o = srv.post("/v1/completions", {"prompt": long_prompt})
check(s == 400 and o["error"]["code"] == "context_length_exceeded", f"over-long prompt's code: {o}")
s, _, b = srv.request("GET", "/v1/chat/completions")
check(s == 405, f"GET on a POST route: {s}")
# Huge bodies: refused by their Content-Length, or once past the limit when sent chunked.
s, _, b = srv.request("POST", "/v1/completions", b"x" * 70000)
check(s == 413 and b"limit" in b, f"huge body: {s} {b[:100]}")


def raw(data, read=True, timeout=10):
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    try:
        sock.sendall(data)
        got = b""
        while read:
            k = sock.recv(65536)
            if not k:
                break
            got += k
            if b"\r\n0\r\n\r\n" in got or (b"Content-Length" in got and got.endswith(b"}")):
                break
        return got
    finally:
        sock.close()


t0 = time.time()
got = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n" + b"x" * 5000)
check(got.startswith(b"HTTP/1.1 413") and time.time() - t0 < 5, f"a 10 GB Content-Length, refused at once: {got[:80]}")
chunk = b"%x\r\n%s\r\n" % (40000, b"y" * 40000)
got = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
          chunk * 2 + b"0\r\n\r\n")
check(got.startswith(b"HTTP/1.1 413"), f"huge chunked body: {got[:80]}")
# A slow client (headers never finished) is closed after --timeout; others are served meanwhile.
slow = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
t0 = time.time()
s, _, o = srv.post("/v1/completions", {"prompt": "I dream of", "max_tokens": 3, "temperature": 0})
check(s == 200, f"served beside a slow client: {s}")
try:
    closed = slow.recv(100) == b""
except (ConnectionResetError, socket.timeout):
    closed = False
check(closed and time.time() - t0 < 10, f"the slow client was not closed in time ({time.time() - t0:.1f} s)")
slow.close()
# Disconnects mid-request (half a body) and mid-stream (the slot is freed, counted as cancelled).
raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"prompt\": \"I", read=False)
m0 = srv.metrics()
sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
body = json.dumps({"prompt": "I remember", "max_tokens": 110, "temperature": 0, "stream": True}).encode()
sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
             % (len(body), body))
first = sock.recv(4096)
sock.close()
for _ in range(200):
    m1 = srv.metrics()
    if m1['nuvec_requests_finished_total{reason="cancelled"}'] > m0['nuvec_requests_finished_total{reason="cancelled"}'] \
            and m1["nuvec_slots_busy"] == 0:
        break
    time.sleep(0.05)
check(b"200 OK" in first and m1["nuvec_slots_busy"] == 0 and
      m1['nuvec_requests_finished_total{reason="cancelled"}'] == m0['nuvec_requests_finished_total{reason="cancelled"}'] + 1
      and m1["nuvec_generated_tokens_total"] - m0["nuvec_generated_tokens_total"] < 100,
      f"a stream cut midway: {first[:60]} busy {m1['nuvec_slots_busy']}")
s, _, _ = srv.get("/health")
check(s == 200, "healthy after the malformed requests")
print(f"check_serve: basic and malformed requests done at {time.time() - t_start:.1f} s", flush=True)

# The load test: each request's greedy ids alone first, then 200 requests from 32 concurrent
# streaming clients; every stream's ids are the same.
prompts = [{"prompt": p} for p in ("I dream of", "My thoughts drift", "I remember", "Vectors", "In the night",
                                   "A gentle hum", "Whispers of")] + \
          [{"messages": [{"role": "user", "content": c}]} for c in ("Tell me a dream", "What is a vector?", "Hello")]
N, CLIENTS, TOKENS = (40, 8, 4) if sanitized else (200, 32, 6)
alone = []
for p in prompts:
    path = "/v1/chat/completions" if "messages" in p else "/v1/completions"
    s, _, o = srv.post(path, {**p, "max_tokens": TOKENS, "temperature": 0, "return_tokens": True})
    check(s == 200, f"alone {p}: {s} {o}")
    alone.append(o["choices"][0]["tokens"] if s == 200 else None)


def one(i, tokens=TOKENS):
    p = prompts[i % len(prompts)]
    path = "/v1/chat/completions" if "messages" in p else "/v1/completions"
    s, ev = srv.stream(path, {**p, "max_tokens": tokens, "temperature": 0, "stream": True, "return_tokens": True},
                       timeout=WAIT)
    return i, s, ev


# The idle level: after a first burst as wide as the load (the batch sizes' decode graphs are
# built at their first use, and each HTTP thread's allocator arena is made once).
with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
    list(pool.map(lambda i: one(i, 2), range(CLIENTS)))
time.sleep(0.3)
idle = srv.metrics()
t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
    results = list(pool.map(one, range(N)))
load_s = time.time() - t0
wrong = [(i, s) for i, s, ev in results if s != 200 or ev[-1] != "[DONE]" or streamed_text(ev)[1] != alone[i % len(prompts)]]
check(not wrong, f"load: {len(wrong)} of {N} responses differ from the request alone: {wrong[:5]}")
for _ in range(100):
    after = srv.metrics()
    if after["nuvec_requests_live"] == 0:
        break
    time.sleep(0.05)
done = sum(after[f'nuvec_requests_finished_total{{reason="{r}"}}'] - idle[f'nuvec_requests_finished_total{{reason="{r}"}}']
           for r in ("stop", "length", "cancelled", "error"))
served = sum(after.get(f'nuvec_http_requests_total{{route="{r}",code="200"}}', 0) -
             idle.get(f'nuvec_http_requests_total{{route="{r}",code="200"}}', 0) for r in ("chat", "completion"))
gen = sum(len(streamed_text(ev)[1]) for _, _, ev in results)
check(done == N and served == N, f"/metrics: {done} finished, {served} answered 200, of {N}")
check(after["nuvec_generated_tokens_total"] - idle["nuvec_generated_tokens_total"] >= gen and
      after["nuvec_steps_total"] - idle["nuvec_steps_total"] < gen, "tokens counted, decoded in batches")
check(after["nuvec_requests_live"] == 0 and after["nuvec_requests_live_bytes"] == 0 and after["nuvec_slots_busy"] == 0 and
      after["nuvec_queue_length"] == 0, f"requests left alive: {after}")
check(after["nuvec_device_active_bytes"] == idle["nuvec_device_active_bytes"],
      f"device memory {idle['nuvec_device_active_bytes']} -> {after['nuvec_device_active_bytes']}")
rss_growth = after["nuvec_process_resident_bytes"] - idle["nuvec_process_resident_bytes"]
# Under AddressSanitizer freed memory waits in its quarantine (256 MiB by default) before it is
# reused, so the resident size grows by up to that much with nothing leaked (LeakSanitizer checks
# leaks at exit there).
rss_limit = (16 + (256 if sanitized else 0)) << 20
check(rss_growth < rss_limit, f"resident memory grew by {rss_growth / 2**20:.1f} MiB")
batch = (after["nuvec_decode_rows_total"] - idle["nuvec_decode_rows_total"]) / max(1, after["nuvec_steps_total"] - idle["nuvec_steps_total"])
print(f"check_serve: load test: {N} requests from {CLIENTS} clients in {load_s:.1f} s, {gen} tokens, "
      f"{batch:.1f} decode rows a step, resident memory {rss_growth / 2**20:+.1f} MiB", flush=True)

# The official openai client and the chat page in Chromium (npm packages installed once, pinned).
node = shutil.which("node")
if sanitized:  # the same routes as above; the normal build's run covers the npm clients
    print("check_serve: the openai client and the chat page are skipped in a sanitizer build (too slow here)")
elif check(node is not None and shutil.which("npm") is not None, "node and npm are needed (Debian's nodejs)"):
    ok = all(os.path.isdir(f"{npm_dir}/node_modules/{p.rsplit('@', 1)[0]}") for p in NPM_PACKAGES)
    if not ok:
        os.makedirs(npm_dir, exist_ok=True)
        p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", npm_dir, *NPM_PACKAGES],
                           capture_output=True, text=True, timeout=600)
        ok = check(p.returncode == 0, f"npm install {NPM_PACKAGES}: {p.stderr[-2000:]}")
    if ok:
        env = {**os.environ, "NODE_PATH": f"{npm_dir}/node_modules"}
        for script, args in (("check_serve_openai.mjs", ["model"]), ("check_serve_page.mjs", [])):
            shutil.copy(f"{here}/{script}", f"{npm_dir}/{script}")  # ES modules resolve packages beside them
            p = subprocess.run([node, f"{npm_dir}/{script}", f"http://127.0.0.1:{srv.port}", *args], capture_output=True,
                               text=True, timeout=300, env=env)
            print(p.stdout.strip(), flush=True)
            check(p.returncode == 0, f"{script}: rc {p.returncode}: {p.stdout[-2000:]} {p.stderr[-2000:]}")
print(f"check_serve: node clients done at {time.time() - t_start:.1f} s", flush=True)

# SIGTERM drains: a stream under way ends normally, then the server exits 0.
sock = socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT)
body = json.dumps({"prompt": "I remember", "max_tokens": 20 if sanitized else 60, "temperature": 0,
                   "stream": True}).encode()
sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
             % (len(body), body))
got = sock.recv(4096)
srv.p.send_signal(signal.SIGTERM)
while True:
    k = sock.recv(65536)
    if not k:
        break
    got += k
sock.close()
rc = srv.p.wait(WAIT)
check(rc == 0 and b"data: [DONE]" in got and b'"finish_reason":"length"' in got and srv.find("stopped"),
      f"drain on SIGTERM: rc {rc}, {got[-200:]}")

# The bounded queue: one slot and one place in the queue; the others get 429 with Retry-After.
small = Server("--parallel", "1", "--queue", "1")


def long_stream(i):
    c = http.client.HTTPConnection("127.0.0.1", small.port, timeout=WAIT)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": "I remember", "max_tokens": 30 if sanitized else 100,
                                                           "temperature": 0,
                                                           "stream": True}).encode())
    r = c.getresponse()
    out = (r.status, r.getheader("Retry-After"), r.read())
    c.close()
    return out


with concurrent.futures.ThreadPoolExecutor(6) as pool:
    res = list(pool.map(long_stream, range(6)))
limited = [r for r in res if r[0] == 429]
check(len(limited) >= 3 and all(r[1] == "1" and json.loads(r[2])["error"]["type"] == "rate_limit_error" for r in limited)
      and all(r[2].endswith(b"data: [DONE]\n\n") for r in res if r[0] == 200),
      f"429 past the queue: {[(r[0], r[1]) for r in res]}")
check(small.metrics()["nuvec_queue_rejected_total"] == len(limited), "429s counted")
check(small.stop() == 0, "the small server stops")

# A model split by layers over the same device opened twice (--devices 0,0): the README's greedy ids,
# three requests at once (one batched step through both devices), and it says the split.
split = Server("--devices", "0,0", "--parallel", "3")
check(split.find("layers 0-"), f"the split said: {''.join(l for l in split.lines if l)}")


def split_one(i):
    return split.post("/v1/completions", {"prompt": "I dream of", "max_tokens": 12, "temperature": 0,
                                          "return_tokens": True})


with concurrent.futures.ThreadPoolExecutor(3) as pool:
    res = list(pool.map(split_one, range(3)))
check(all(r[0] == 200 and r[2]["choices"][0]["tokens"] == DREAM[:12] for r in res),
      f"split greedy completions: {[r[2] for r in res]}")
check(split.stop() == 0, "the split server stops")

# Nothing a sanitizer (the ASan build's) or the server itself complained about.
for server in servers:
    said = [l for l in server.lines if l and re.search(r"runtime error|Sanitizer", l)]
    check(not said, f"the server's stderr: {''.join(said[:5])}")
print(f"check_serve: {time.time() - t_start:.1f} s")
if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("all passed")
