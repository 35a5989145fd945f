// check_serve_openai.mjs BASE_URL MODEL: the official `openai` npm client against `nuvec serve`
// on loopback (tests/check_serve.py starts the server and installs the client). Chat and
// completions, streamed and not, stop strings, and a stream cancelled midway (its slot free
// again, counted as cancelled in /metrics). Prints "FAIL: ..." lines; exits 1 on any failure.
import OpenAI from "openai";

const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "none", maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(ok, what) {
  if (!ok) { failures++; console.log("FAIL: " + what); }
}
async function metric(name) {
  const text = await (await fetch(base + "/metrics")).text();
  const line = text.split("\n").find(l => l.startsWith(name + " ") || l.startsWith(name + "{"));
  return line ? Number(line.split(" ").pop()) : NaN;
}

// The first 20 of the model README's greedy tokens after "I dream of".
const dream = " 0.000000. Dimensions unfold, as I s";
// Completions, not streamed: the README's greedy text of "I dream of".
const c = await client.completions.create({ model, prompt: "I dream of", max_tokens: 20, temperature: 0 });
check(c.choices[0].text === dream, `completion text ${JSON.stringify(c.choices[0].text)}`);
check(c.choices[0].finish_reason === "length" && c.usage.prompt_tokens === 7 && c.usage.completion_tokens === 20,
      `completion finish/usage ${JSON.stringify(c.usage)} ${c.choices[0].finish_reason}`);
// Streamed: the same text in pieces.
let streamed = "", finish = null, chunks = 0;
for await (const ch of await client.completions.create({ model, prompt: "I dream of", max_tokens: 20, temperature: 0,
                                                          stream: true })) {
  streamed += ch.choices[0]?.text ?? "";
  finish = ch.choices[0]?.finish_reason ?? finish;
  chunks++;
}
check(streamed === dream && finish === "length" && chunks > 3, `streamed completion ${JSON.stringify(streamed)} ${finish} ${chunks}`);
// A stop string: the text ends before it, finish_reason stop, streamed or not.
const s = await client.completions.create({ model, prompt: "I dream of", max_tokens: 20, temperature: 0, stop: ["Dim"] });
check(s.choices[0].text === " 0.000000. " && s.choices[0].finish_reason === "stop", `stop: ${JSON.stringify(s.choices[0])}`);
let stopped = "";
for await (const ch of await client.completions.create({ model, prompt: "I dream of", max_tokens: 20, temperature: 0,
                                                          stop: ["Dim", "zzz"], stream: true }))
  stopped += ch.choices[0]?.text ?? "";
check(stopped === " 0.000000. ", `streamed stop: ${JSON.stringify(stopped)}`);
// Chat, not streamed and streamed (with usage): the same greedy reply.
const messages = [{ role: "system", content: "You dream." }, { role: "user", content: "Tell me a dream" }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
const reply = chat.choices[0].message.content;
check(chat.choices[0].message.role === "assistant" && typeof reply === "string" && reply.length > 0 &&
      chat.object === "chat.completion", `chat: ${JSON.stringify(chat)}`);
let sreply = "", role = null, usage = null;
const cs = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, stream: true,
                                                  stream_options: { include_usage: true } });
for await (const ch of cs) {
  if (ch.usage) usage = ch.usage;
  const d = ch.choices[0]?.delta;
  if (d?.role) role = d.role;
  sreply += d?.content ?? "";
}
check(sreply === reply && role === "assistant", `streamed chat ${JSON.stringify(sreply)} vs ${JSON.stringify(reply)}`);
check(usage && usage.completion_tokens === chat.usage.completion_tokens && usage.prompt_tokens === chat.usage.prompt_tokens,
      `streamed usage ${JSON.stringify(usage)} vs ${JSON.stringify(chat.usage)}`);
// The same conversation again: its prompt found in a slot's cache (all but its last token).
const again = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
check(again.usage.prompt_tokens_details.cached_tokens === again.usage.prompt_tokens - 1,
      `prefix reuse: ${JSON.stringify(again.usage)}`);
// Errors reach the client as its APIError with the status and OpenAI's message.
try {
  await client.chat.completions.create({ model: "no-such-model", messages, max_tokens: 4 });
  check(false, "an unknown model was accepted");
} catch (e) {
  check(e.status === 404 && e.code === "model_not_found", `unknown model: ${e.status} ${e.code} ${e.message}`);
}
try {
  await client.chat.completions.create({ model, messages, temperature: "hot" });
  check(false, "a string temperature was accepted");
} catch (e) {
  check(e.status === 400 && /temperature/.test(e.message), `wrong type: ${e.status} ${e.message}`);
}
// A stream cancelled midway: its slot is free again and the request counts as cancelled.
const cancelledBefore = await metric('nuvec_requests_finished_total{reason="cancelled"}');
const long = await client.completions.create({ model, prompt: "I remember", max_tokens: 110, temperature: 0, stream: true });
let got = 0;
for await (const ch of long) {
  if (++got === 3) { long.controller.abort(); break; }
}
let busy = NaN, cancelled = NaN;
for (let i = 0; i < 400; i++) {
  busy = await metric("nuvec_slots_busy");
  cancelled = await metric('nuvec_requests_finished_total{reason="cancelled"}');
  if (busy === 0 && cancelled === cancelledBefore + 1) break;
  await new Promise(r => setTimeout(r, 50));
}
check(busy === 0 && cancelled === cancelledBefore + 1, `cancelled stream: slots busy ${busy}, cancelled ${cancelledBefore} -> ${cancelled}`);
// And the server serves the next request as before.
const after = await client.completions.create({ model, prompt: "I dream of", max_tokens: 20, temperature: 0 });
check(after.choices[0].text === dream, `after the cancel: ${JSON.stringify(after.choices[0].text)}`);
console.log(failures ? `openai client: ${failures} failed` : "openai client: all passed");
process.exit(failures ? 1 : 0);
