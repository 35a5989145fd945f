// check_serve_page.mjs BASE_URL: the chat page of `nuvec serve` in Debian's Chromium, headless,
// driven by playwright-core (tests/check_serve.py starts the server and installs the package):
// the page loads, names the model, sends one message and streams a reply into the page.
import { chromium } from "playwright-core";

const base = process.argv[2];
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
let failures = 0;
function check(ok, what) {
  if (!ok) { failures++; console.log("FAIL: " + what); }
}
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(base + "/?max_tokens=24", { timeout: 30000 });
  await page.waitForFunction(() => document.getElementById("model").textContent !== "loading\u2026", null, { timeout: 30000 });
  const model = await page.textContent("#model");
  check(model && !model.startsWith("unavailable"), `model name on the page: ${model}`);
  await page.fill("#input", "Tell me a dream");
  await page.click("#send");
  await page.waitForSelector(".msg.assistant[data-state='done'], .msg[data-state='error']", { timeout: 120000 });
  const state = await page.getAttribute(".msg:last-child", "data-state");
  const reply = await page.textContent(".msg:last-child");
  const stats = await page.textContent("#stats");
  check(state === "done" && reply.length > 0, `reply: state ${state}, text ${JSON.stringify(reply)}`);
  check(/prompt tokens/.test(stats) && /generated/.test(stats), `stats line: ${JSON.stringify(stats)}`);
  const generated = Number((stats.match(/(\d+) generated/) || [])[1]);
  check(generated >= 1 && generated <= 24, `?max_tokens=24 caps the reply: ${JSON.stringify(stats)}`);
  check((await page.$$(".msg.user")).length === 1, "one user message on the page");
  check(errors.length === 0, `page errors: ${errors.join("; ")}`);
  if (process.env.NUVEC_PAGE_SCREENSHOT) await page.screenshot({ path: process.env.NUVEC_PAGE_SCREENSHOT });
} finally {
  await browser.close();
}
console.log(failures ? `chat page: ${failures} failed` : "chat page: all passed");
process.exit(failures ? 1 : 0);
