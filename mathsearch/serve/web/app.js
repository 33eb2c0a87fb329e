/* mathsearch search page: LaTeX query with live MathML preview, results grouped by document.
 *
 * Everything comes from the page's own origin (GET config, POST render, POST search); equations
 * arrive as MathML strings from the server's LaTeX -> MathML conversion and are rebuilt here as
 * DOM nodes through an allow-list of MathML elements and attributes, never assigned as markup.
 */
"use strict";

(() => {
  const PREVIEW_DELAY_MS = 250;
  const HITS_SHOWN = 3; // equations shown per document before "Show more"
  /* The modes, what each is and which controls shape it (mode_info, the server's mode
   * registry), the normalisations and the profile's defaults come from GET config only: without
   * it the page says so and does not search. */
  const NO_CONFIG =
    "The page cannot search without the server's configuration: reload it to try again.";

  // The MathML namespace, taken from the HTML parser rather than spelled out here.
  const MATHML_NS = new DOMParser()
    .parseFromString("<math></math>", "text/html")
    .body.firstElementChild.namespaceURI;

  const MATHML_ELEMENTS = new Set([
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "merror", "mfrac", "msqrt",
    "mroot", "mstyle", "mpadded", "mphantom", "menclose", "mfenced", "msub", "msup", "msubsup",
    "munder", "mover", "munderover", "mmultiscripts", "mprescripts", "none", "mtable", "mtr",
    "mtd", "mlabeledtr", "semantics", "annotation",
  ]);
  const MATHML_ATTRIBUTES = new Set([
    "accent", "accentunder", "align", "alttext", "close", "columnalign", "columnlines",
    "columnspacing", "columnspan", "depth", "dir", "display", "displaystyle", "encoding",
    "fence", "form", "frame", "framespacing", "height", "largeop", "linethickness", "lspace",
    "mathsize", "mathvariant", "maxsize", "minsize", "movablelimits", "notation", "open",
    "rowalign", "rowlines", "rowspacing", "rowspan", "rspace", "scriptlevel", "separator",
    "separators", "stretchy", "symmetric", "voffset", "width",
  ]);
  const MAX_MATH_DEPTH = 256;
  const MINUS_SIGN = "\u2212";

  /* MathML Core renders mathvariant="normal" only; other variants of Latin letters and digits
   * become the Unicode mathematical alphanumeric symbols, as TeX would set them.
   * [capital A, small a, digit 0 or 0 when the style has no digits, holes filled elsewhere]. */
  const VARIANTS = {
    bold: [0x1d400, 0x1d41a, 0x1d7ce, {}],
    italic: [0x1d434, 0x1d44e, 0, { h: 0x210e }],
    "bold-italic": [0x1d468, 0x1d482, 0, {}],
    script: [0x1d49c, 0x1d4b6, 0, {
      B: 0x212c, E: 0x2130, F: 0x2131, H: 0x210b, I: 0x2110, L: 0x2112, M: 0x2133, R: 0x211b,
      e: 0x212f, g: 0x210a, o: 0x2134,
    }],
    "bold-script": [0x1d4d0, 0x1d4ea, 0, {}],
    fraktur: [0x1d504, 0x1d51e, 0, { C: 0x212d, H: 0x210c, I: 0x2111, R: 0x211c, Z: 0x2128 }],
    "double-struck": [0x1d538, 0x1d552, 0x1d7d8, {
      C: 0x2102, H: 0x210d, N: 0x2115, P: 0x2119, Q: 0x211a, R: 0x211d, Z: 0x2124,
    }],
    "bold-fraktur": [0x1d56c, 0x1d586, 0, {}],
    "sans-serif": [0x1d5a0, 0x1d5ba, 0x1d7e2, {}],
    "bold-sans-serif": [0x1d5d4, 0x1d5ee, 0x1d7ec, {}],
    "sans-serif-italic": [0x1d608, 0x1d622, 0, {}],
    monospace: [0x1d670, 0x1d68a, 0x1d7f6, {}],
  };

  function styled(text, variant) {
    const [capital, small, digit, holes] = VARIANTS[variant];
    let out = "";
    for (const ch of text) {
      const c = ch.codePointAt(0);
      if (holes[ch]) out += String.fromCodePoint(holes[ch]);
      else if (c >= 65 && c <= 90) out += String.fromCodePoint(capital + c - 65);
      else if (c >= 97 && c <= 122) out += String.fromCodePoint(small + c - 97);
      else if (digit && c >= 48 && c <= 57) out += String.fromCodePoint(digit + c - 48);
      else out += ch;
    }
    return out;
  }

  const $ = (id) => document.getElementById(id);
  const ui = {
    form: $("search-form"),
    latex: $("latex"),
    text: $("text"),
    preview: $("preview"),
    previewError: $("preview-error"),
    previewNote: $("preview-note"),
    mode: $("mode"),
    modeHint: $("mode-hint"),
    alpha: $("alpha"),
    alphaValue: $("alpha-value"),
    alphaField: $("alpha-field"),
    normalization: $("normalization"),
    normalizationField: $("normalization-field"),
    k: $("k"),
    search: $("search"),
    status: $("status"),
    results: $("results"),
    indexName: $("index-name"),
    index: $("index"),
    indexField: $("index-field"),
    indexHint: $("index-hint"),
    keyForm: $("key-form"),
    key: $("api-key"),
  };

  /* The API key, when the server requires one (401): asked for once, kept for this tab only. */
  const KEY_STORE = "mathsearch-api-key";
  let apiKey = "";
  try {
    apiKey = window.sessionStorage.getItem(KEY_STORE) || "";
  } catch {
    apiKey = "";
  }

  /** GET config's answer; null until it comes. */
  let config = null;
  let previewTimer = 0;
  let previewSeq = 0;
  let previewAbort = null;
  let searchSeq = 0;
  let searchAbort = null;
  let searched = false;
  /** The documents shown for the current query (the next page's offset), and its mode. */
  let shown = 0;
  let shownMode = "";
  /** Set by "Similar equations": the indexed equation the search is like (the box shows its
   * LaTeX); editing the box makes it a plain query again. */
  let likeId = "";

  class ApiError extends Error {
    constructor(status, reason, details) {
      super(reason);
      this.status = status;
      this.details = details;
    }
  }

  /* ---------- HTTP ---------- */

  async function api(path, body, signal) {
    const init = { signal, headers: { Accept: "application/json" } };
    if (apiKey) init.headers.Authorization = `Bearer ${apiKey}`;
    if (body !== undefined) {
      init.method = "POST";
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, "The search server could not be reached.");
    }
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (response.status === 401) askForKey();
    if (!response.ok) {
      const info = (data && data.error) || {};
      let reason = info.reason || `${response.status} ${response.statusText}`.trim();
      const retry = response.headers.get("Retry-After");
      if (response.status === 429 && retry) reason += ` (retry in ${retry} s)`;
      throw new ApiError(response.status, reason, info.details);
    }
    return data;
  }

  /** The error's reason, and the other invalid fields of a 422 (the first is the reason). */
  function describeError(error) {
    let text = error.message || String(error);
    const details = Array.isArray(error.details) ? error.details.slice(1, 4) : [];
    const parts = details.map((d) => {
      if (!d || typeof d !== "object") return String(d);
      const msg = d.msg || d.reason || "";
      return d.field ? `${d.field}: ${msg}` : msg;
    });
    if (parts.length) text += `; ${parts.join("; ")}`;
    return text;
  }

  /* ---------- MathML ---------- */

  function parseMathSource(markup) {
    const parser = new DOMParser();
    const xml = parser.parseFromString(markup, "application/xml");
    if (!xml.getElementsByTagName("parsererror").length && xml.documentElement) {
      return xml.documentElement;
    }
    return parser.parseFromString(markup, "text/html").querySelector("math");
  }

  /** The text a token element shows: minus signs for hyphens, styled letters for variants. */
  function tokenText(element, text) {
    if (element.localName === "mo" && text.trim() === "-") return MINUS_SIGN;
    const variant = element.getAttribute("mathvariant");
    if (variant && VARIANTS[variant] && element.localName !== "mo") {
      element.setAttribute("mathvariant", "normal");
      return styled(text, variant);
    }
    return text;
  }

  function rebuild(node, depth) {
    const element = document.createElementNS(MATHML_NS, node.localName);
    for (const attr of Array.from(node.attributes)) {
      const name = attr.localName.toLowerCase();
      if (attr.namespaceURI === null && MATHML_ATTRIBUTES.has(name)) {
        element.setAttribute(name, attr.value);
      }
    }
    if (depth >= MAX_MATH_DEPTH) return element;
    for (const child of Array.from(node.childNodes)) {
      if (child.nodeType === Node.TEXT_NODE || child.nodeType === Node.CDATA_SECTION_NODE) {
        element.appendChild(document.createTextNode(tokenText(element, child.data)));
      } else if (
        child.nodeType === Node.ELEMENT_NODE &&
        MATHML_ELEMENTS.has(child.localName) &&
        child.localName !== "math"
      ) {
        element.appendChild(rebuild(child, depth + 1));
      }
    }
    return element;
  }

  /** A fresh <math> element holding only allow-listed MathML, or null. */
  function mathElement(markup, label) {
    if (typeof markup !== "string" || !markup) return null;
    const source = parseMathSource(markup);
    if (!source || source.localName !== "math") return null;
    const math = rebuild(source, 0);
    math.setAttribute("display", "block");
    if (label) math.setAttribute("alttext", label);
    return math;
  }

  function mathOrSource(markup, latex) {
    const math = mathElement(markup, latex);
    if (math) return math;
    const code = document.createElement("code");
    code.className = "math-fallback";
    code.textContent = latex || "";
    return code;
  }

  /* ---------- controls ---------- */

  function fillSelect(select, values, current) {
    select.replaceChildren(
      ...values.map((value) => {
        const option = document.createElement("option");
        option.value = value;
        option.textContent = value.replace(/_/g, " ");
        return option;
      }),
    );
    if (values.includes(current)) select.value = current;
  }

  function applyConfig(cfg) {
    const defaults = cfg.defaults || {};
    config = { ...cfg, defaults, mode_info: cfg.mode_info || {} };
    fillSelect(ui.mode, config.modes || [], defaults.mode);
    fillSelect(ui.normalization, config.normalizations || [], defaults.normalization);
    ui.alpha.value = String(defaults.alpha);
    ui.k.value = String(defaults.k);
    const limits = config.limits || {};
    if (limits.max_latex_chars) ui.latex.maxLength = limits.max_latex_chars;
    if (limits.max_text_chars) ui.text.maxLength = limits.max_text_chars;
    if (limits.max_k) ui.k.max = String(limits.max_k);
    ui.indexName.textContent = config.index ? `index ${config.index}` : "";
    const libraries = Array.isArray(config.libraries) ? config.libraries : [];
    const equations = document.createElement("option");
    equations.value = "";
    equations.textContent = `equations (${config.index || "default"})`;
    ui.index.replaceChildren(
      equations,
      ...libraries.map((name) => {
        const option = document.createElement("option");
        option.value = name;
        option.textContent = `documents of ${name}`;
        return option;
      }),
    );
    ui.indexField.hidden = libraries.length === 0;
    ui.search.disabled = false;
  }

  /** The library index chosen in "Search in" ("" for the equation index). */
  function libraryIndex() {
    return ui.indexField.hidden ? "" : ui.index.value;
  }

  /** GET config's mode_info of ``mode`` ({} before config came). */
  function modeInfo(mode) {
    return (config && config.mode_info[mode]) || {};
  }

  /** Whether a ranking parameter (alpha, normalization, ...) shapes the mode's ranking. */
  function shapes(mode, parameter) {
    return (modeInfo(mode).parameters || []).includes(parameter);
  }

  function syncControls() {
    const mode = ui.mode.value;
    const usesAlpha = shapes(mode, "alpha");
    ui.alpha.disabled = !usesAlpha;
    ui.alphaField.classList.toggle("inactive", !usesAlpha);
    ui.normalizationField.hidden = !shapes(mode, "normalization");
    ui.alphaValue.textContent = Number(ui.alpha.value).toFixed(2);
    ui.modeHint.textContent = modeInfo(mode).summary || "";
    ui.indexHint.hidden = !libraryIndex();
  }

  function kValue() {
    const max = Number(ui.k.max) || 10000;
    const k = Math.round(Number(ui.k.value));
    if (!Number.isFinite(k) || k < 1) return Number(config.defaults.k) || 10;
    return Math.min(k, max);
  }

  /* ---------- URL ---------- */

  function stateFromControls() {
    const state = { q: ui.latex.value, mode: ui.mode.value };
    if (likeId) state.like = likeId;
    const text = ui.text.value.trim();
    if (text) state.text = text;
    if (shapes(state.mode, "alpha") && Number(ui.alpha.value) !== Number(config.defaults.alpha)) {
      state.alpha = Number(ui.alpha.value).toFixed(2);
    }
    if (
      shapes(state.mode, "normalization") &&
      ui.normalization.value !== config.defaults.normalization
    ) {
      state.normalization = ui.normalization.value;
    }
    if (kValue() !== Number(config.defaults.k)) state.k = String(kValue());
    if (libraryIndex()) state.index = libraryIndex();
    return state;
  }

  function writeUrl(push) {
    const url = new URL(window.location.href);
    url.search = new URLSearchParams(stateFromControls()).toString();
    if (url.href === window.location.href) return;
    if (push) window.history.pushState(null, "", url);
    else window.history.replaceState(null, "", url);
  }

  function readUrl() {
    const params = new URLSearchParams(window.location.search);
    const d = config.defaults;
    ui.latex.value = params.get("q") || "";
    likeId = params.get("like") || "";
    ui.text.value = params.get("text") || "";
    const mode = params.get("mode");
    ui.mode.value = mode && (config.modes || []).includes(mode) ? mode : d.mode;
    const alpha = Number(params.get("alpha"));
    ui.alpha.value = params.has("alpha") && alpha >= 0 && alpha <= 1 ? String(alpha) : d.alpha;
    const norm = params.get("normalization");
    ui.normalization.value =
      norm && (config.normalizations || []).includes(norm) ? norm : d.normalization;
    ui.k.value = params.get("k") || String(d.k);
    const index = params.get("index") || "";
    ui.index.value = (config.libraries || []).includes(index) ? index : "";
    syncControls();
    return Boolean(ui.latex.value.trim() || ui.text.value.trim());
  }

  /* ---------- preview ---------- */

  function showPreviewError(reason) {
    ui.previewError.textContent = reason;
    ui.previewError.hidden = !reason;
    ui.latex.setAttribute("aria-invalid", reason ? "true" : "false");
    ui.preview.classList.toggle("stale", Boolean(reason));
  }

  /** Unknown control sequences are kept as upright names; say so (they match only verbatim). */
  function showPreviewNote(unknown) {
    const names = (Array.isArray(unknown) ? unknown : [])
      .filter((n) => typeof n === "string" && n)
      .map((n) => (n.startsWith("\\") ? n : `\\${n}`));
    ui.previewNote.textContent = names.length
      ? `Unknown ${names.length === 1 ? "macro" : "macros"} kept as written: ${names.join(" ")}`
      : "";
    ui.previewNote.hidden = !names.length;
  }

  function placeholder(text) {
    const span = document.createElement("span");
    span.className = "placeholder";
    span.textContent = text;
    return span;
  }

  async function refreshPreview() {
    const latex = ui.latex.value;
    const seq = ++previewSeq;
    if (previewAbort) previewAbort.abort();
    if (!latex.trim()) {
      ui.preview.replaceChildren(placeholder("The rendered query appears here."));
      showPreviewError("");
      showPreviewNote([]);
      return;
    }
    previewAbort = new AbortController();
    ui.preview.setAttribute("aria-busy", "true");
    try {
      const data = await api("render", { latex }, previewAbort.signal);
      if (seq !== previewSeq) return;
      const math = mathElement(data && data.mathml, latex);
      if (math) {
        ui.preview.replaceChildren(math);
        showPreviewError("");
        showPreviewNote(data.unknown_macros);
      } else {
        showPreviewError("The server's MathML could not be displayed.");
      }
    } catch (error) {
      if (error.name === "AbortError" || seq !== previewSeq) return;
      showPreviewError(describeError(error));
      showPreviewNote([]);
    } finally {
      if (seq === previewSeq) ui.preview.removeAttribute("aria-busy");
    }
  }

  function schedulePreview() {
    window.clearTimeout(previewTimer);
    previewTimer = window.setTimeout(refreshPreview, PREVIEW_DELAY_MS);
  }

  /* ---------- search ---------- */

  function searchBody() {
    const mode = ui.mode.value;
    const body = {
      latex: ui.latex.value,
      mode,
      k: kValue(),
      explain: true,
      group: true,
      mathml: true,
    };
    const text = ui.text.value.trim();
    if (text) body.text = text;
    if (shapes(mode, "alpha")) body.alpha = Number(ui.alpha.value);
    if (shapes(mode, "normalization")) body.normalization = ui.normalization.value;
    const library = libraryIndex();
    if (library) {
      body.index = library; // the library's documents by their math; words go to its text
      delete body.explain;
      delete body.group;
      delete body.mathml;
    } else if (likeId) {
      body.like = likeId; // the server searches with the equation's stored LaTeX, without it
      delete body.latex;
    }
    return body;
  }

  function setStatus(text, kind) {
    ui.status.textContent = text;
    ui.status.className = `status${kind ? ` ${kind}` : ""}`;
  }

  function plural(n, word) {
    return `${n} ${word}${n === 1 ? "" : "s"}`;
  }

  async function runSearch({ push = true } = {}) {
    if (!config) {
      setStatus(NO_CONFIG, "error");
      return;
    }
    if (!ui.latex.value.trim() && !ui.text.value.trim()) {
      setStatus("Type a LaTeX query first.", "error");
      ui.latex.focus();
      return;
    }
    const seq = ++searchSeq;
    if (searchAbort) searchAbort.abort();
    searchAbort = new AbortController();
    searched = true;
    writeUrl(push);
    const body = searchBody();
    ui.results.setAttribute("aria-busy", "true");
    ui.search.disabled = true;
    setStatus("Searching…", "busy");
    try {
      const data = await api("search", body, searchAbort.signal);
      if (seq !== searchSeq) return;
      if (data.kind === "library") {
        showLibrary(data);
        return;
      }
      const groups = groupsOf(data);
      const hitCount = groups.reduce((n, g) => n + g.hits.length, 0);
      const took = Number(data.took_ms);
      const timing = Number.isFinite(took) ? ` · ${Math.round(took)} ms` : "";
      const mode = data.mode || body.mode;
      const like = body.like ? ` · similar to ${body.like}` : "";
      setStatus(
        hitCount
          ? `${plural(hitCount, "equation")} in ${plural(groups.length, "document")} · ` +
              `mode ${mode}${like}${timing}`
          : `No matching equations · mode ${mode}${like}${timing}`,
        "",
      );
      renderResults(groups, mode);
      shown = groups.length;
      shownMode = mode;
      if (groups.length >= body.k) ui.results.append(morePagesButton());
    } catch (error) {
      if (error.name === "AbortError" || seq !== searchSeq) return;
      setStatus(describeError(error), "error");
      ui.results.replaceChildren();
    } finally {
      if (seq === searchSeq) {
        ui.results.removeAttribute("aria-busy");
        ui.search.disabled = false;
      }
    }
  }

  /** "More documents": the next page of the same ranking (offset = documents shown). */
  function morePagesButton() {
    const button = el("button", "link-button more-pages", "More documents");
    button.type = "button";
    button.id = "more-pages";
    button.addEventListener("click", () => loadMore(button));
    const wrap = el("div", "pages-more");
    wrap.append(button);
    return wrap;
  }

  async function loadMore(button) {
    const seq = searchSeq;
    const body = { ...searchBody(), offset: shown };
    button.disabled = true;
    try {
      const data = await api("search", body, searchAbort ? searchAbort.signal : undefined);
      if (seq !== searchSeq) return;
      const groups = groupsOf(data);
      const list = ui.results.querySelector(".group-list");
      if (list) for (const item of renderGroups(groups, shownMode)) list.append(item);
      shown += groups.length;
      if (groups.length < body.k) {
        button.parentElement.remove();
        setStatus(`${plural(shown, "document")} · no more results · mode ${shownMode}`, "");
      } else {
        button.disabled = false;
        setStatus(`${plural(shown, "document")} · mode ${shownMode}`, "");
      }
    } catch (error) {
      if (error.name === "AbortError" || seq !== searchSeq) return;
      button.parentElement.remove();
      setStatus(describeError(error), "error");
    }
  }

  function groupsOf(data) {
    if (Array.isArray(data.groups)) return data.groups;
    const byDoc = new Map();
    for (const hit of data.hits || []) {
      if (!byDoc.has(hit.doc_id)) {
        byDoc.set(hit.doc_id, { rank: byDoc.size + 1, doc_id: hit.doc_id, score: hit.score, hits: [] });
      }
      byDoc.get(hit.doc_id).hits.push(hit);
    }
    return Array.from(byDoc.values());
  }

  /* ---------- rendering ---------- */

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmt(value) {
    if (value === null || value === undefined || !Number.isFinite(Number(value))) return "–";
    const x = Number(value);
    if (x !== 0 && Math.abs(x) < 0.1) return x.toFixed(4);
    return x.toFixed(3);
  }

  /** Which subqueries a mode's scores come from. */
  function subqueries(mode) {
    return modeInfo(mode).subqueries || [];
  }

  function breakdown(hit, mode) {
    const list = el("dl", "breakdown");
    const ex = hit.explanation;
    if (!ex) {
      list.append(row("score", fmt(hit.score), "bd-score"));
      return list;
    }
    for (const name of subqueries(mode)) {
      const raw = ex[name];
      const normalized = ex[`${name}_normalized`];
      const dd = el("dd");
      if (raw === null || raw === undefined) {
        dd.append(el("span", "missing", "not retrieved"));
      } else {
        dd.append(el("span", "raw", fmt(raw)));
        if (normalized !== null && normalized !== undefined) {
          dd.append(el("span", "arrow", " → "), el("span", "normalized", fmt(normalized)));
        }
      }
      const wrap = el("div", `bd-row bd-${name}`);
      wrap.append(el("dt", "", name), dd);
      list.append(wrap);
    }
    if (ex.formula) {
      const dd = el("dd");
      dd.append(el("code", "", ex.formula));
      const wrap = el("div", "bd-row bd-formula");
      wrap.append(el("dt", "", "formula"), dd);
      list.append(wrap);
    }
    return list;
  }

  function row(label, value, className) {
    const wrap = el("div", `bd-row ${className}`);
    wrap.append(el("dt", "", label), el("dd", "", value));
    return wrap;
  }

  function renderHit(hit, mode) {
    const item = el("li", "hit");
    const head = el("div", "hit-head");
    head.append(el("span", "hit-rank", `#${hit.rank}`), el("span", "hit-id", hit.eq_id));
    const where = [];
    if (hit.section) where.push(hit.section);
    if (hit.position !== null && hit.position !== undefined) where.push(`equation ${hit.position}`);
    if (where.length) head.append(el("span", "hit-where", where.join(" · ")));
    const score = el("span", "hit-score", fmt(hit.score));
    score.title = "score";
    head.append(score);
    item.append(head);

    const math = el("div", "hit-math");
    math.append(mathOrSource(hit.mathml, hit.latex));
    item.append(math);

    const meta = el("div", "hit-meta");
    if (hit.match) meta.append(bindingsLine(hit));
    meta.append(breakdown(hit, mode));
    const tokens = Array.isArray(hit.matched_tokens) ? hit.matched_tokens : [];
    if (tokens.length) {
      const matched = el("p", "matched");
      matched.append(el("span", "matched-label", `${plural(tokens.length, "matched token")}:`));
      for (const token of tokens.slice(0, 8)) matched.append(" ", el("code", "token", token));
      if (tokens.length > 8) matched.append(` +${tokens.length - 8} more`);
      meta.append(matched);
    }
    item.append(meta);

    const details = el("details", "hit-source");
    details.append(el("summary", "", "LaTeX source"));
    const pre = el("pre");
    pre.append(el("code", "", hit.latex || ""));
    const reuse = el("button", "link-button", "Search for this equation");
    reuse.type = "button";
    reuse.addEventListener("click", () => searchFrom(hit, ""));
    details.append(pre, reuse);
    const similar = el("button", "link-button similar", "Similar equations");
    similar.type = "button";
    similar.title = "equations like this one, without it";
    similar.addEventListener("click", () => searchFrom(hit, hit.eq_id));
    item.append(similar);
    item.append(details);
    return item;
  }

  /** A wildcard hit's match and what each query variable bound, highlighted. */
  function bindingsLine(hit) {
    const line = el("p", `bindings match-${hit.match}`);
    line.append(el("span", "bindings-label", `${hit.match} match`));
    const bindings = hit.bindings && typeof hit.bindings === "object" ? hit.bindings : {};
    for (const [name, value] of Object.entries(bindings)) {
      const chip = el("span", "binding");
      chip.append(el("code", "binding-var", `?${name}`), " = ", el("code", "binding-value", value));
      line.append(" ", chip);
    }
    return line;
  }

  /** Search again from a hit: its LaTeX in the box, and ``like`` its id or "" (a plain query). */
  function searchFrom(hit, like) {
    likeId = like;
    ui.latex.value = hit.latex || "";
    refreshPreview();
    runSearch();
    ui.latex.scrollIntoView({ behavior: "smooth", block: "center" });
  }

  function moreButton(hits, more, docId) {
    const button = el("button", "link-button more-hits", `Show ${plural(more, "more equation")}`);
    button.type = "button";
    button.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-label", `Show ${plural(more, "more equation")} from ${docId}`);
    button.addEventListener("click", () => {
      const open = button.getAttribute("aria-expanded") !== "true";
      Array.from(hits.children).forEach((node, i) => {
        if (i >= HITS_SHOWN) node.hidden = !open;
      });
      button.setAttribute("aria-expanded", String(open));
      const label = open ? "Show fewer equations" : `Show ${plural(more, "more equation")}`;
      button.textContent = label;
      button.setAttribute("aria-label", open ? label : `${label} from ${docId}`);
    });
    const wrap = el("div", "group-more");
    wrap.append(button);
    return wrap;
  }

  /** A library index's answer: documents by their math, each with its matched equations. */
  function showLibrary(data) {
    const took = Number(data.took_ms);
    const timing = Number.isFinite(took) ? ` · ${Math.round(took)} ms` : "";
    const count = (data.hits || []).length;
    setStatus(
      count
        ? `${plural(count, "document")} of ${data.index} · mode ${data.mode}${timing}`
        : `No matching documents in ${data.index} · mode ${data.mode}${timing}`,
      "",
    );
    const list = el("ol", "group-list library-list");
    for (const hit of data.hits || []) {
      const item = el("li", "group library-hit");
      item.dataset.docId = hit.doc_id;
      const head = el("div", "group-head");
      const title = el("h2", "group-title");
      title.append(el("span", "group-rank", `${hit.rank}.`), " ");
      title.append(el("span", "library-title", hit.title || hit.doc_id));
      head.append(title);
      head.append(el("span", "group-doc", hit.doc_id));
      const score = el("span", "group-score", fmt(hit.score));
      score.title = "document score (BM25 over its math tokens fused with its math vector)";
      head.append(score);
      item.append(head);
      const equations = el("ol", "hits library-equations");
      for (const equation of hit.equations || []) {
        const row = el("li", "hit");
        row.append(el("span", "hit-id", equation.eq_id), " ");
        row.append(el("code", "hit-latex", equation.latex));
        equations.append(row);
      }
      item.append(equations);
      list.append(item);
    }
    ui.results.replaceChildren(list);
  }

  function renderResults(groups, mode) {
    const list = el("ol", "group-list");
    for (const item of renderGroups(groups, mode)) list.append(item);
    ui.results.replaceChildren(list);
  }

  function renderGroups(groups, mode) {
    const items = [];
    for (const group of groups) {
      const item = el("li", "group");
      const head = el("div", "group-head");
      const title = el("h2", "group-title");
      title.append(el("span", "group-rank", `${group.rank}.`), " ");
      title.append(el("span", "group-doc", group.doc_id));
      head.append(title);
      head.append(el("span", "group-count", plural(group.hits.length, "equation")));
      const score = el("span", "group-score", fmt(group.score));
      score.title = "document score (its best equation)";
      head.append(score);
      item.append(head);
      const hits = el("ol", "hits");
      group.hits.forEach((hit, i) => {
        const node = renderHit(hit, mode);
        if (i >= HITS_SHOWN) node.hidden = true;
        hits.append(node);
      });
      item.append(hits);
      const more = group.hits.length - HITS_SHOWN;
      if (more > 0) item.append(moreButton(hits, more, group.doc_id));
      items.push(item);
    }
    return items;
  }

  /* ---------- wiring ---------- */

  function askForKey() {
    if (!ui.keyForm.hidden) return;
    ui.keyForm.hidden = false;
    ui.key.focus();
  }

  ui.keyForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    apiKey = ui.key.value.trim();
    try {
      window.sessionStorage.setItem(KEY_STORE, apiKey);
    } catch {
      /* storage off: the key lasts until the page is left */
    }
    ui.key.value = "";
    ui.keyForm.hidden = true;
    setStatus("");
    await start();
  });

  function researchIfShown() {
    syncControls();
    if (searched) runSearch();
  }

  ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    runSearch();
  });
  ui.latex.addEventListener("input", () => {
    likeId = ""; // an edited query is the user's own
    schedulePreview();
  });
  ui.latex.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      window.clearTimeout(previewTimer);
      refreshPreview();
      runSearch();
    }
  });
  ui.alpha.addEventListener("input", syncControls);
  ui.mode.addEventListener("change", researchIfShown);
  ui.alpha.addEventListener("change", researchIfShown);
  ui.normalization.addEventListener("change", researchIfShown);
  ui.k.addEventListener("change", researchIfShown);
  ui.index.addEventListener("change", researchIfShown);
  window.addEventListener("popstate", () => {
    if (!config) return;
    const hasQuery = readUrl();
    refreshPreview();
    if (hasQuery) runSearch({ push: false });
  });

  async function start() {
    try {
      applyConfig(await api("config"));
    } catch (error) {
      // no stale defaults: the modes and what shapes them are the server's to say
      ui.search.disabled = true;
      setStatus(
        `Could not load the server's configuration: ${describeError(error).replace(/\.$/, "")}. ` +
          NO_CONFIG,
        "error",
      );
      document.body.classList.add("ready");
      return;
    }
    const hasQuery = readUrl();
    document.body.classList.add("ready");
    if (hasQuery) {
      refreshPreview();
      runSearch({ push: false });
    }
  }

  // The sanitiser, for the end-to-end tests (tests/opensearch/test_search_page.py).
  window.mathsearchPage = Object.freeze({ mathElement });

  start();
})();
