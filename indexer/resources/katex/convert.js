#!/usr/bin/env node
// LaTeX -> MathML with the pinned npm katex: the converter of indexer/katex_backend.py.
//
// A long-running filter. The first line written is a header:
//   {"ready": true, "katex": "<version>"}
// then every stdin line is one request, answered by exactly one stdout line, in order:
//   in:  {"id": ..., "latex": "...", "macros": {"\\RR": "\\mathbb{R}"}}   (macros optional)
//   out: {"id": ..., "mathml": "<math ...>...</math>"}
//    or  {"id": ..., "error": "<KaTeX message>", "reason": "<code>", "name"?: "\\foo"}
// The Python side writes and flushes a whole batch at once; each answer is written as soon as it
// is ready with one write() (stdout to a pipe is synchronous and unbuffered in node, so nothing
// waits for a flush), which pins a hang or a crash on exactly the first unanswered request.
// Measured on the 14,152 hep-th 2003 equations, this costs no throughput against answers
// buffered per input chunk. Stdin EOF ends the program.
"use strict";

const readline = require("readline");
const katex = require("katex");

const OPTIONS = Object.freeze({
  output: "mathml",
  displayMode: true,
  throwOnError: true,
  strict: "ignore",
  trust: false,
  maxSize: 100,
  maxExpand: 1000,
});

// Ordered: the first pattern that matches a KaTeX message gives the reason code.
const REASONS = [
  [/^Undefined control sequence: (\S+)/, "unknown-macro"],
  [/^No such environment: (\S+)/, "unknown-environment"],
  [/^Too many expansions/, "too-many-expansions"],
  [/right'|\\right|\\left|\\middle|^Mismatch: |^Missing \\end|got '\\end'/, "unbalanced-delimiters"],
  [/^Expected '\}'|^Unexpected end of input|^Extra \}|got '\}'|got 'EOF'/, "unbalanced-braces"],
];

function classify(err) {
  if (err instanceof katex.ParseError) {
    const raw = String(err.rawMessage || err.message || "");
    for (const [pattern, reason] of REASONS) {
      const match = pattern.exec(raw);
      if (match) {
        return { reason, name: match[1] };
      }
    }
    return { reason: "katex-parse-error" };
  }
  if (err instanceof RangeError && /call stack/i.test(String(err.message))) {
    return { reason: "too-deep" };
  }
  return { reason: "katex-internal-error" };
}

function mathElement(html) {
  const start = html.indexOf("<math");
  const end = html.lastIndexOf("</math>");
  if (start < 0 || end < start) {
    return null;
  }
  return html.slice(start, end + "</math>".length);
}

function convert(request) {
  const id = request.id === undefined ? null : request.id;
  if (typeof request.latex !== "string") {
    return { id, error: "request has no string 'latex'", reason: "bad-request" };
  }
  const macros = {};
  if (request.macros && typeof request.macros === "object") {
    for (const [key, value] of Object.entries(request.macros)) {
      if (typeof value === "string") {
        macros[key] = value;
      }
    }
  }
  try {
    const html = katex.renderToString(request.latex, { ...OPTIONS, macros });
    const mathml = mathElement(html);
    if (mathml === null) {
      return { id, error: "KaTeX output has no <math> element", reason: "katex-internal-error" };
    }
    return { id, mathml };
  } catch (err) {
    const { reason, name } = classify(err);
    const answer = { id, error: String((err && err.message) || err), reason };
    if (name !== undefined) {
      answer.name = name;
    }
    return answer;
  }
}

function handle(line) {
  if (!line.trim()) {
    return null;
  }
  let request;
  try {
    request = JSON.parse(line);
  } catch (err) {
    return { id: null, error: `not a JSON line: ${err.message}`, reason: "bad-request" };
  }
  if (request === null || typeof request !== "object") {
    return { id: null, error: "request is not a JSON object", reason: "bad-request" };
  }
  return convert(request);
}

process.stdout.on("error", () => process.exit(0)); // the reader went away
process.stdout.write(JSON.stringify({ ready: true, katex: katex.version }) + "\n");

const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", (line) => {
  const answer = handle(line);
  if (answer !== null) {
    process.stdout.write(JSON.stringify(answer) + "\n");
  }
});
