#!/usr/bin/python3
"""The reference chat-template renderer for test_llm_template: Debian's python3-jinja2 set up as
Hugging Face's apply_chat_template sets it up (../shared/models/README.md, templates/):
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and jinja2.ext.loopcontrols;
transformers' tojson (json.dumps with ensure_ascii, indent, separators, sort_keys), its
raise_exception and strftime_now globals, and its {% generation %} tag (AssistantTracker, whose
block renders its body when no tracking is asked for).

    render_jinja.py JOBS.json OUT.json

JOBS.json: {"now": SECONDS, "jobs": [JOB, ...]}, a JOB {"template": PATH} or {"source": TEXT} with
{"context": PATH} or {"vars": OBJECT}: the template rendered with the context (a JSON object whose
members are the variables, read with json.loads); strftime_now formats the pinned time `now` in
the local time zone (the test sets TZ). OUT.json: {"jinja2": VERSION, "results": [RESULT per
job]}, a RESULT {"text": ...} or {"error": "raised" | "syntax" | "error", "type": NAME,
"message": ...}. Exit status 3 when the jinja2 imported is not Debian's python3-jinja2."""
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

DEBIAN_PREFIX = "/usr/lib/python3/dist-packages/jinja2/"


class Raised(jinja2.exceptions.TemplateError):
    """What raise_exception raises (transformers raises TemplateError; a subclass tells the test
    which errors the template raised itself)."""


def make_env(now):
    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.fromtimestamp(now).strftime(format)

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def error(kind, e):
    return {"error": kind, "type": type(e).__name__, "message": str(e)}


def main():
    if not jinja2.__file__.startswith(DEBIAN_PREFIX):
        print(f"render_jinja.py: jinja2 {jinja2.__version__} from {jinja2.__file__} is not Debian's "
              "python3-jinja2 (apt-get install python3-jinja2; run with /usr/bin/python3)", file=sys.stderr)
        return 3
    with open(sys.argv[1], encoding="utf-8") as f:
        jobs = json.load(f)
    env = make_env(jobs["now"])
    compiled, contexts, results = {}, {}, []
    for job in jobs["jobs"]:
        if "template" in job:
            key = ("path", job["template"])
            if key not in compiled:
                with open(job["template"], encoding="utf-8") as f:
                    compiled[key] = f.read()
        else:
            key = ("source", job["source"])
            compiled.setdefault(key, job["source"])
        if isinstance(compiled[key], str):
            try:
                compiled[key] = env.from_string(compiled[key])
            except Exception as e:  # a template Jinja2 refuses fails every render alike
                compiled[key] = error("syntax", e)
        template = compiled[key]
        if isinstance(template, dict):
            results.append(template)
            continue
        if "context" in job:
            if job["context"] not in contexts:
                with open(job["context"], encoding="utf-8") as f:
                    contexts[job["context"]] = f.read()
            ctx = json.loads(contexts[job["context"]])
        else:
            ctx = job.get("vars", {})
        try:
            results.append({"text": template.render(**ctx)})
        except Raised as e:
            results.append(error("raised", e))
        except Exception as e:
            results.append(error("error", e))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "results": results}, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
