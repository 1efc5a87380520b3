// amsrag web UI: ask a question, show the answer with clickable citations and the route it took.
// Plain DOM, no dependencies; every server string is set with textContent (passages are untrusted).
"use strict";

const $ = (id) => document.getElementById(id);
const CLASSES = ["zero_hop", "one_hop", "multi_hop"];
let serverConfig = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "style") node.setAttribute("style", v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return node;
}

// replaceChildren without the null/undefined placeholders of optional parts (the DOM would print "null").
function put(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

function fmt(x, digits = 3) {
  return typeof x === "number" && isFinite(x) ? x.toFixed(digits) : "–";
}

function retrieverClass(name) {
  return ["bm25", "dense", "graph"].includes(name) ? "r-" + name : "r-other";
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value || sessionStorage.getItem("amsrag-key") || "";
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function api(method, path, body) {
  const res = await fetch(path, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (!res.ok) {
    if (res.status === 401) $("key-label").classList.remove("hidden");
    const err = (data && data.error) || { code: "http_" + res.status, message: res.statusText };
    throw Object.assign(new Error(err.message), { code: err.code, status: res.status });
  }
  return data;
}

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", !!isError);
}

async function loadConfig() {
  try {
    serverConfig = await api("GET", "/v1/config");
  } catch (e) {
    setStatus(e.status === 401 ? "This server needs an API key." : "Could not load the configuration: " + e.message,
              e.status !== 401);
    return;
  }
  const sel = $("system");
  sel.replaceChildren(...serverConfig.systems.map((s) => el("option", { value: s }, s)));
  sel.value = serverConfig.default_system;
  $("question").maxLength = serverConfig.limits.max_question_chars;
  $("index-info").textContent = `${serverConfig.index.passages} passages · generator ${serverConfig.generator}` +
    ` · θl ${serverConfig.router.theta_low} θh ${serverConfig.router.theta_high}`;
  setStatus("");
}

// ---------------------------------------------------------------- the filter

// The filter field's specs (space-separated, the CLI's --where spelling: FIELD=VALUE[,VALUE…], or a bound on the
// modification date such as modified>=2025-01-01) as the request's `where` object, or null when empty. The server
// checks fields, types, tags and dates and names what is wrong.
const BOUNDS = { ">=": "gte", ">": "gt", "<=": "lte", "<": "lt" };

function parseWhere(text) {
  const fields = new Map();
  const refuse = (spec, why) => { throw Object.assign(new Error(`filter '${spec}': ${why}`), { code: "invalid_filter" }); };
  for (const spec of text.trim().split(/\s+/).filter(Boolean)) {
    const found = /^([^=<>]*?)(>=|<=|=|>|<)(.*)$/s.exec(spec);
    if (!found) {
      refuse(spec, "expected FIELD=VALUE[,VALUE…], e.g. type=pdf,html, source=guides/* or modified>=2025-01-01");
    }
    const [, name, op, value] = found;
    if (op === "=") {
      const values = fields.get(name);
      fields.set(name, (Array.isArray(values) ? values : []).concat(value.split(",")));
      continue;
    }
    if (name !== "modified") refuse(spec, `only modified takes >=, >, <=, <; write ${name}=VALUE[,VALUE…]`);
    const bounds = fields.get(name) || {};
    if (BOUNDS[op] in bounds) refuse(spec, `a second ${op} bound on modified; give each bound once`);
    fields.set(name, { ...bounds, [BOUNDS[op]]: value });
  }
  return fields.size ? Object.fromEntries(fields) : null;
}

function whereText(where) {
  const ops = Object.fromEntries(Object.entries(BOUNDS).map(([op, key]) => [key, op]));
  return Object.entries(where).map(([field, values]) => Array.isArray(values)
    ? field + "=" + values.join(",")
    : Object.entries(values).map(([key, bound]) => field + ops[key] + bound).join(" ")).join(" ");
}

// The filter the server applied (trace.filter: where, allowed, passages); hidden without one.
function renderFilter(scope) {
  const box = $("filter-info");
  if (!scope) { box.replaceChildren(); box.classList.add("hidden"); return; }
  box.replaceChildren("Filter ", el("code", {}, whereText(scope.where)),
    `: ${scope.allowed} of ${scope.passages} passages allowed`);
  box.classList.remove("hidden");
}

// ---------------------------------------------------------------- answer

function renderAnswer(result) {
  $("source-panel").classList.add("hidden");  // a new answer: the previous one's passage no longer applies
  const sources = new Map((result.sources || []).map((s) => [s.id, s]));
  const p = $("answer");
  p.replaceChildren(el("span", { id: "answer-text" }, result.answer));
  if (result.abstained) p.appendChild(el("span", { class: "pill" }, "abstained"));
  const language = (result.trace && result.trace.language) || { warnings: [] };
  $("warnings").replaceChildren(...language.warnings.map((w) => el("li", { class: "warning" }, w)));
  const list = $("sources");
  list.replaceChildren();
  result.citations.forEach((id, i) => {
    const src = sources.get(id) || { id, title: "", text: "" };
    const item = el("li", { id: "source-" + (i + 1), "data-id": id },
      el("strong", {}, src.title || id), " ", el("span", { class: "muted" }, "(" + id + ")"), " ",
      sourceLink(src.citation), el("div", { class: "text hidden" }, src.text));
    list.appendChild(item);
    p.appendChild(el("a", {
      class: "cite", href: "#source-" + (i + 1), "data-id": id,
      onclick: (ev) => {
        ev.preventDefault();
        const text = item.querySelector(".text");
        text.classList.toggle("hidden");
        item.classList.add("flash");
        setTimeout(() => item.classList.remove("flash"), 1200);
        item.scrollIntoView({ block: "nearest" });
        showSource(i + 1, src, quotesOf(result, id));
      },
    }, "[" + (i + 1) + "]"));
  });
  renderQuote($("quote"), result.quote);
  renderParts(result.parts || [], result.citations);
  renderAudit(result.trace || {});
  renderChain(result.trace || {});
  renderFilter((result.trace || {}).filter);
  $("answer-panel").classList.remove("hidden");
}

// ---------------------------------------------------------------- cited source files

// A link to the cited file as the server serves it (citation.url: /v1/sources/NAME/PATH[#page=N or #ANCHOR]), or null.
// Opened in a new tab; PDFs at the cited page, HTML at the cited section. With an API key the file is fetched with it (a link cannot
// send one) and shown from a blob: a PDF or an image as itself, anything else as plain text, never as a page.
function sourceLink(citation) {
  if (!citation || !citation.url) return citation ? el("span", { class: "muted" }, citation.label) : null;
  return el("a", {
    class: "source-link", href: citation.url, target: "_blank", rel: "noopener noreferrer",
    onclick: (ev) => {
      const key = $("api-key").value || sessionStorage.getItem("amsrag-key") || "";
      if (!key) return;  // the browser follows the link
      ev.preventDefault();
      openWithKey(citation.url);
    },
  }, citation.label);
}

async function openWithKey(url) {
  const tab = window.open("about:blank", "_blank");
  const [path, hash] = url.split("#");
  try {
    const res = await fetch(path, { headers: headers() });
    if (!res.ok) throw new Error("HTTP " + res.status);
    const kind = (res.headers.get("content-type") || "").split(";")[0];
    const safe = kind === "application/pdf" || /^image\/(png|jpeg|gif|webp)$/.test(kind) ? kind : "text/plain";
    const blob = new Blob([await res.arrayBuffer()], { type: safe + (safe === "text/plain" ? ";charset=utf-8" : "") });
    const target = URL.createObjectURL(blob) + (hash ? "#" + hash : "");
    if (tab) tab.location.href = target; else window.location.assign(target);
  } catch (e) {
    if (tab) tab.close();
    setStatus("Could not open the source file: " + e.message, true);
  }
}

// The quotes of the answer (and of its parts) taken from passage `id`.
function quotesOf(result, id) {
  return [result.quote, ...(result.parts || []).map((part) => part.quote)]
    .filter((q) => q && typeof q.text === "string" && q.passage_id === id);
}

// The side panel: the cited passage, its file link, and the quoted sentence highlighted with the answer span.
function showSource(number, src, quotes) {
  const text = src.text || "";
  const quote = quotes.find((q) => text.includes(q.text));
  let body = [text];
  if (quote) {
    const at = text.indexOf(quote.text);
    const sentence = el("mark", { class: "sentence" }, quote.text.slice(0, quote.start),
      el("mark", { class: "span" }, quote.text.slice(quote.start, quote.end)), quote.text.slice(quote.end));
    body = [text.slice(0, at), sentence, text.slice(at + quote.text.length)];
  }
  put($("source-panel-body"),
    el("h3", {}, "[" + number + "] " + (src.title || src.id)),
    el("p", { class: "muted" }, src.id),
    sourceLink(src.citation),
    el("p", { class: "passage" }, ...body));
  $("source-panel").classList.remove("hidden");
  const mark = $("source-panel").querySelector("mark.sentence");
  if (mark) mark.scrollIntoView({ block: "nearest" });
}

// The supporting sentence with the answer span marked (result.quote: text, start, end, passage_id).
function renderQuote(box, quote) {
  if (!quote || typeof quote.text !== "string") { box.replaceChildren(); box.classList.add("hidden"); return; }
  const { text, start, end } = quote;
  box.replaceChildren("“", text.slice(0, start), el("mark", {}, text.slice(start, end)), text.slice(end), "” ",
    el("span", { class: "muted" }, "[" + quote.passage_id + "]"));
  box.classList.remove("hidden");
}

// A question asking several things (result.parts): each part's question, answer, citation numbers and quote.
function renderParts(parts, citations) {
  const box = $("parts");
  if (!parts.length) { box.replaceChildren(); box.classList.add("hidden"); return; }
  box.replaceChildren(...parts.map((part, i) => {
    const numbers = part.citations.map((id) => "[" + (citations.indexOf(id) + 1) + "]").join(" ");
    const quote = el("p", { class: "quote hidden" });
    renderQuote(quote, part.quote);
    return el("li", { class: "part", "data-part": String(i + 1) },
      el("span", { class: "part-q" }, part.query), " → ",
      el("strong", { class: "part-answer" }, part.abstained ? "not found" : part.answer), " ",
      el("span", { class: "muted" }, numbers), quote);
  }));
  box.classList.remove("hidden");
}

// The decomposer's plan and the chain's steps (trace.chain): each step's sub-question, answer, cited
// passage, confidence, retrievers and time; nothing for a one-step question.
function renderChain(trace) {
  const box = $("chain");
  const chain = trace.chain || {};
  const plan = chain.plan || {};
  if (!chain.plan || plan.kind === "single") { box.replaceChildren(); box.classList.add("hidden"); return; }
  let head = "Plan: " + plan.kind + " (" + fmt(plan.confidence, 2) + ")";
  if (plan.operator) head += " · " + plan.operator + " of " + (plan.entities || []).join(" / ");
  const verdict = chain.used ? "answered by the chain: " + chain.reason
    : chain.failed_step ? "chain failed at step " + chain.failed_step + ": " + chain.reason
    : (chain.steps || []).length ? "the plain reader's answer stands (" + chain.reason + ")" : chain.reason;
  const steps = (chain.steps || []).map((s, i) => el("li", { class: "chain-step" + (s.failed ? " failed" : ""),
    "data-step": String(i + 1) },
    el("span", { class: "chain-q" }, s.question), " → ",
    el("strong", {}, s.answer || "—"),
    el("span", { class: "muted" }, " [" + (s.passage || "-") + "] conf " + fmt(s.confidence, 2) + " · " +
      (s.retrievers || []).join("+") + " · " + fmt(s.ms, 0) + " ms" + (s.failed ? " · failed: " + s.failed : ""))));
  box.replaceChildren(el("p", { class: "muted" }, head + " — " + verdict), el("ol", {}, ...steps));
  box.dataset.used = chain.used ? "1" : "0";
  box.classList.remove("hidden");
}

// The citation-support audit and the proxy signals that fired (trace.audit, trace.signals).
const SIGNAL_NAMES = [
  ["gray_zone", "gray-zone α"], ["disagreement", "confident but unsupported"],
  ["sufficiency_failed", "evidence failed the sufficiency check"],
];

function renderAudit(trace) {
  const audit = trace.audit || {};
  const signals = trace.signals || {};
  const box = $("audit");
  const chips = SIGNAL_NAMES.filter(([key]) => signals[key]).map(([key, name]) =>
    el("span", { class: "chip", "data-signal": key }, name));
  if (signals.escalations) {
    chips.push(el("span", { class: "chip", "data-signal": "escalated" }, "escalated ×" + signals.escalations));
  }
  let verdict;
  if (audit.support === null || audit.support === undefined) {
    verdict = el("span", { id: "audit-verdict", class: "muted" }, "not audited" + (audit.reason ? " (" + audit.reason + ")" : ""));
  } else {
    const supported = audit.flagged ? "unsupported" : "supported";
    const line = "support " + fmt(audit.support, 2) + " (" + supported + ", threshold " + fmt(audit.threshold, 2) + ")";
    verdict = signals.flagged
      ? el("span", { id: "audit-verdict", class: "flagged" },
        "flagged as likely wrong: " + (signals.flag_reason || "see the signals") + " — " + line)
      : el("span", { id: "audit-verdict", class: audit.flagged ? "flagged" : "supported" }, line);
  }
  box.replaceChildren(el("span", { class: "muted" }, "Citation audit: "), verdict, ...chips);
  box.dataset.support = audit.support === null || audit.support === undefined ? "" : String(audit.support);
}

// ---------------------------------------------------------------- route

function renderClasses(cx) {
  const box = $("class-bars");
  if (!cx) { box.replaceChildren(el("p", { class: "muted" }, "not classified (a fixed system)")); return; }
  box.replaceChildren(...CLASSES.map((c) => {
    const pr = cx.probs[c] || 0;
    return el("div", { class: "bar-row" + (c === cx.label ? " chosen" : ""), "data-class": c },
      el("span", {}, c), el("div", { class: "bar" }, el("span", { class: "fill", style: `width:${(pr * 100).toFixed(1)}%` })),
      el("span", { class: "num" }, fmt(pr)));
  }));
}

// The gauge draws what routing and fusion acted on (route_alpha/route_label); the classifier's own
// alpha shows as a secondary mark when the two differ (e.g. zero_hop for a generator that cannot answer
// closed-book is retrieved as one_hop/multi_hop with the confidence renormalised over the two).
function routed(cx) {
  return {
    label: cx.route_label !== undefined && cx.route_label !== null ? cx.route_label : cx.label,
    alpha: typeof cx.route_alpha === "number" ? cx.route_alpha : cx.alpha,
  };
}

function renderAlpha(cx, router) {
  const box = $("alpha-gauge");
  if (!cx || !router) { box.replaceChildren(el("p", { class: "muted" }, "no confidence for this system")); return; }
  const lo = router.theta_low, hi = router.theta_high;
  const route = routed(cx), a = route.alpha;
  const differs = route.label !== cx.label || Math.abs(route.alpha - cx.alpha) > 5e-4;
  const pct = (x) => (Math.max(0, Math.min(1, x)) * 100).toFixed(2) + "%";
  const tick = (frac, text, kind) => el("span", { class: "tick " + kind, "data-frac": String(frac) }, text);
  put(box,
    el("div", { class: "gauge-wrap" },
      el("div", { class: "needle-row" }, el("span", { class: "needle-label", id: "alpha-label", "data-frac": String(a) },
        "α = " + fmt(a) + " · " + route.label)),
      el("div", { class: "gauge" },
        el("div", { class: "zone C", style: `width:${pct(lo)}` }, "C"),
        el("div", { class: "zone B", style: `width:${pct(hi - lo)}` }, "B"),
        el("div", { class: "zone A", style: `width:${pct(1 - hi)}` }, "A")),
      differs ? el("div", { class: "needle classifier", id: "classifier-needle", "data-alpha": String(cx.alpha),
        style: `left:${pct(cx.alpha)}`, title: `classifier: α = ${fmt(cx.alpha)} (${cx.label})` }) : null,
      el("div", { class: "needle", id: "alpha-needle", "data-alpha": String(a), style: `left:${pct(a)}`,
        title: `routing: α = ${fmt(a)} (${route.label})` })),
    el("div", { class: "ticks", id: "alpha-ticks" }, tick(0, "0", "end"), tick(lo, "θl " + lo, "theta"),
      tick(hi, "θh " + hi, "theta"), tick(1, "1", "end")),
    el("p", { class: "muted", id: "alpha-zone" }, a >= hi ? "α ≥ θh: confident → Strategy A" :
      a >= lo ? "θl ≤ α < θh → Strategy B" : "α < θl: uncertain → the widest path, Strategy C"),
    differs ? el("p", { class: "muted", id: "classifier-alpha" },
      el("span", { class: "mark-key" }), `classifier: ${cx.label}, α = ${fmt(cx.alpha)}; routed as ${route.label}, ` +
      `α = ${fmt(a)}` + (cx.label === "zero_hop" ? " (this generator does not answer closed-book)" : "")) : null,
    cx.embedding === false ? el("p", { class: "note", id: "embedding-note" },
      "The classifier could not read this question's language; it decided by the question's structure.") : null);
}

// Tick labels: each centred on its value but kept inside the scale; the two thresholds pushed apart when
// they would touch, and an end label ("0"/"1") hidden when a threshold label covers it. Needs layout
// (the panel visible), so it runs after rendering and when the card's size changes.
function layoutGauge() {
  const ticks = $("alpha-ticks");
  if (!ticks || !ticks.offsetWidth) return;
  const width = (node) => node.getBoundingClientRect().width;  // fractional: offsetWidth rounds
  const W = width(ticks), GAP = 6;
  const place = (node, left) => { node.style.left = left.toFixed(2) + "px"; return { left, right: left + width(node) }; };
  const centred = (node) => {
    const w = width(node), x = parseFloat(node.dataset.frac) * W;
    return Math.max(0, Math.min(W - w, x - w / 2));
  };
  const [zero, low, high, one] = ticks.querySelectorAll(".tick");
  let l = place(low, centred(low)), h = place(high, centred(high));
  if (l.right + GAP > h.left) {  // spread the pair around its midpoint, inside the scale
    const wl = width(low), total = wl + GAP + width(high);
    const mid = (parseFloat(low.dataset.frac) + parseFloat(high.dataset.frac)) / 2 * W;
    const start = Math.max(0, Math.min(W - total, mid - total / 2));
    l = place(low, start);
    h = place(high, start + wl + GAP);
  }
  const z = place(zero, 0), o = place(one, W - width(one));
  zero.classList.toggle("covered", z.right + GAP > l.left);  // still laid out: measured again next time
  one.classList.toggle("covered", h.right + GAP > o.left);
  const label = $("alpha-label");
  if (label) {
    const row = width(label.parentElement), w = width(label);
    label.style.left = Math.max(0, Math.min(row - w, parseFloat(label.dataset.frac) * row - w / 2)).toFixed(2) + "px";
  }
}

new ResizeObserver(layoutGauge).observe($("alpha-gauge"));  // a window resize or the grid reflowing the card

function renderStrategy(trace) {
  const cx = trace.complexity;
  put($("strategy"),
    el("div", {}, el("span", { class: "pill strong", id: "strategy-value" }, "Strategy " + trace.strategy),
      el("span", { class: "pill" }, "system " + trace.system),
      cx ? el("span", { class: "pill" }, cx.label) : null,
      cx && cx.decided_by === "library" ? el("span", { class: "pill", id: "library-decided" }, "decided by the query library") : null),
    el("p", { id: "strategy-reason" }, trace.reason || ""),
    cx && cx.library ? el("p", { class: "muted", id: "library-vote" },
      `query library: ${cx.library.n_close} close labelled queries vote p(multi_hop) ${fmt(cx.library.p_multi)} ` +
      `with weight ${fmt(cx.library.weight)}`) : null,
    el("p", { class: "muted", id: "retriever-calls" }, `${trace.retriever_calls} retriever call(s): ` +
      (passesOf(trace).map((p) => (p.index ? passLabel(trace, p.index) + ": " : "") + p.runs.map((r) => r.name).join(", "))
        .join("; ") || "none")));
}

function renderEscalations(trace) {
  const corr = trace.corrective || {};
  const esc = trace.escalations || [];
  $("escalations").replaceChildren(
    el("p", {}, "corrective: ", el("strong", {}, corr.action || "–"),
      corr.score !== null && corr.score !== undefined ? " (score " + fmt(corr.score) + ")"
        : (corr.reason ? " (" + corr.reason + ")" : "")),
    esc.length ? el("ol", { id: "escalation-list" }, ...esc.map((e) => el("li", { class: "escalation" },
      typeof e === "string" ? e : [
        el("div", {}, el("span", { class: "pill strong" }, `Strategy ${e.from} → ${e.to}`),
          e.path ? el("span", { class: "pill" }, "path " + e.path) : null),
        e.query ? el("div", { class: "esc-query" }, el("span", { class: "muted" }, "query "), "“" + e.query + "”") : null,
        e.reason ? el("div", { class: "muted" }, e.reason) : null])))
      : el("p", { class: "muted", id: "escalation-list" }, "no escalations"));
}

function titleOf(id, titles) {
  return (titles && titles[id]) || id;
}

// Each run's pass (trace.retrievers[i].pass): 0 the first pass, i the wider pass escalations[i - 1] ran.
function passOf(run) {
  return typeof run.pass === "number" ? run.pass : 0;
}

function passesOf(trace) {
  const passes = [];
  for (const r of trace.retrievers || []) {
    const i = passOf(r);
    let p = passes.find((q) => q.index === i);
    if (!p) passes.push(p = { index: i, runs: [] });
    p.runs.push(r);
  }
  return passes;
}

function passLabel(trace, index) {
  if (!index) return "first pass";
  const e = (trace.escalations || [])[index - 1];
  const by = e && typeof e.reason === "string" ? e.reason.split(":")[0] : "";
  return `escalation ${index}` + (e ? ` (${e.from} → ${e.to}${by ? ", " + by : ""})` : "");
}

function renderRetrievers(trace, titles) {
  const box = $("retrievers");
  const runs = trace.retrievers || [];
  if (!runs.length) { box.replaceChildren(el("p", { class: "muted" }, "no retrieval on this route")); return; }
  const several = passesOf(trace).length > 1;
  box.replaceChildren(...runs.map((r) => el("div", { class: "retriever", "data-retriever": r.name, "data-pass": passOf(r) },
    el("h4", {}, el("span", { class: "swatch " + retrieverClass(r.name) }), r.name,
      several ? el("span", { class: "pass-label" }, " · " + passLabel(trace, passOf(r))) : null,
      el("span", { class: "muted" }, ` · ${r.hits.length} hits · ${fmt(r.ms, 1)} ms`)),
    r.error ? el("p", { class: "err" }, r.error) : null,
    el("table", {}, el("thead", {}, el("tr", {}, el("th", { class: "num" }, "rank"), el("th", {}, "passage"),
      el("th", { class: "num" }, "score"))),
      el("tbody", {}, ...r.hits.slice(0, 10).map((h) => el("tr", {},
        el("td", { class: "num" }, h.rank), el("td", { title: h.id }, titleOf(h.id, titles)),
        el("td", { class: "num" }, fmt(h.score)))))))));
}

// CA-RRF(d) = sum_r w_r / (k_r + rank_r(d)), recomputed from the trace's hits, weights and k.
function fusedFromTrace(trace) {
  if (Array.isArray(trace.fused)) {  // the engine's own fused list (after the second hop, when one ran)
    return trace.fused.map((it) => ({ id: it.id, score: it.score, ranks: it.ranks || {}, contrib: it.contributions || {} }));
  }
  const f = trace.fusion || {};
  const weights = f.weights || {}, ks = f.k || {};
  const acc = new Map();
  for (const r of (trace.retrievers || []).filter((run) => passOf(run) === 0)) {
    const w = weights[r.name], k = ks[r.name];
    for (const h of r.hits) {
      const e = acc.get(h.id) || { id: h.id, score: 0, ranks: {}, contrib: {} };
      const c = (w !== undefined && k !== undefined) ? w / (k + h.rank) : h.score;
      e.ranks[r.name] = h.rank;
      e.contrib[r.name] = c;
      e.score += c;
      acc.set(h.id, e);
    }
  }
  return [...acc.values()].sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}

function renderFusion(trace, titles, finalIds) {
  const f = trace.fusion || {};
  const box = $("fusion");
  const retrieverNames = (trace.retrievers || []).filter((r) => passOf(r) === 0).map((r) => r.name);  // fusion: first pass
  if (!retrieverNames.length) { box.replaceChildren(el("p", { class: "muted" }, "nothing to fuse")); return; }
  const picks = new Set(((trace.mmr || {}).picks || []).map((p) => p.id));
  const items = fusedFromTrace(trace).slice(0, 12);
  const names = [...new Set(items.flatMap((it) => Object.keys(it.ranks)))];
  if (!names.length) names.push(...retrieverNames);
  const max = items.length ? items[0].score : 1;
  const legend = el("p", { id: "fusion-weights" }, "method ", el("strong", {}, f.method || "–"), " · ",
    ...retrieverNames.map((n) => el("span", { class: "pill", "data-retriever": n },
      el("span", { class: "swatch " + retrieverClass(n) }),
      `${n}: w = ${fmt((f.weights || {})[n])}, k = ${(f.k || {})[n] ?? "–"}`)));
  const table = el("table", { id: "fused-table" },
    el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "passage"),
      ...names.map((n) => el("th", { class: "num" }, n + " rank")), el("th", {}, "contributions"),
      el("th", { class: "num" }, "score"))),
    el("tbody", {}, ...items.map((it, i) => el("tr", {
      class: (picks.has(it.id) ? "picked " : "") + (finalIds.has(it.id) ? "final" : ""), "data-id": it.id },
      el("td", { class: "num" }, i + 1), el("td", { title: it.id }, titleOf(it.id, titles)),
      ...names.map((n) => el("td", { class: "num" }, it.ranks[n] ?? "–")),
      el("td", {}, el("div", { class: "bar", style: "width:10rem" }, ...names.filter((n) => it.contrib[n]).map((n) =>
        el("span", { class: retrieverClass(n), title: `${n}: ${fmt(it.contrib[n], 5)}`,
          style: `width:${(100 * it.contrib[n] / max).toFixed(2)}%` })))),
      el("td", { class: "num" }, fmt(it.score, 5))))));
  box.replaceChildren(legend, table, el("p", { class: "muted" },
    (Array.isArray(trace.fused) ? "The engine's fused list (hop1/hop2 columns: the second hop's fusion)"
      : "Recomputed from each retriever's top hits in the trace") + "; bold rows were returned, green rows are MMR picks." +
    (passesOf(trace).length > 1 ? " The first pass's fusion: an escalation's passes are merged behind it." : "")));
}

function renderMmr(trace, titles) {
  const m = trace.mmr;
  const box = $("mmr");
  if (!m || !m.picks) {
    const g = m && m.gate;
    const why = g && g.redundancy !== null && g.redundancy !== undefined
      ? "MMR not applied: the top passages' redundancy " + fmt(g.redundancy) + " is below the gate's " + fmt(g.threshold)
      : g ? "MMR not applied (gate " + g.mode + ")" : "MMR not applied on this route";
    box.replaceChildren(el("p", { class: "muted" }, why));
    return;
  }
  box.replaceChildren(el("p", { class: "muted" }, "λ = " + m.lambda),
    el("table", { id: "mmr-table" }, el("thead", {}, el("tr", {}, el("th", { class: "num" }, "pick"), el("th", {}, "passage"),
      el("th", { class: "num" }, "relevance"), el("th", { class: "num" }, "max sim"), el("th", { class: "num" }, "MMR score"))),
      el("tbody", {}, ...m.picks.map((p, i) => el("tr", {}, el("td", { class: "num" }, i + 1),
        el("td", { title: p.id }, titleOf(p.id, titles)), el("td", { class: "num" }, fmt(p.relevance)),
        el("td", { class: "num" }, fmt(p.max_sim)), el("td", { class: "num" }, fmt(p.mmr_score)))))));
}

// Stages in pipeline order; retrievers run in parallel, so they share a start.
function renderWaterfall(trace) {
  const t = trace.timings_ms || {};
  const rows = [];
  let at = 0;
  for (const [name, v] of Object.entries(t)) {
    if (name === "total") continue;
    if (v && typeof v === "object") {
      const parts = Object.entries(v).filter(([, ms]) => typeof ms === "number");
      for (const [sub, ms] of parts) rows.push({ name: name + " · " + sub, start: at, ms, cls: retrieverClass(sub) });
      at += Math.max(0, ...parts.map(([, ms]) => ms));
    } else if (typeof v === "number") {
      rows.push({ name, start: at, ms: v, cls: "" });
      at += v;
    }
  }
  const total = typeof t.total === "number" ? Math.max(t.total, at) : at;
  const gen = trace.generator;
  const scale = total > 0 ? total : 1;
  $("waterfall").replaceChildren(...rows.map((r) => el("div", { class: "wf-row", "data-stage": r.name },
    el("span", {}, r.name),
    el("div", { class: "wf-track" }, el("div", { class: "wf-bar " + r.cls,
      style: `left:${(100 * r.start / scale).toFixed(2)}%;width:${(100 * r.ms / scale).toFixed(2)}%` })),
    el("span", { class: "num" }, fmt(r.ms, 1)))),
  el("p", { class: "muted" }, `total ${fmt(t.total, 1)} ms` + (gen ? ` · generator ${gen.name}` : "")));
}

function renderRoute(result) {
  const trace = result.trace;
  const titles = result.titles || {};
  const finalIds = new Set((result.passages || []).map((p) => p.id).concat(result.citations || []));
  renderClasses(trace.complexity);
  renderAlpha(trace.complexity, serverConfig && serverConfig.router);
  renderStrategy(trace);
  renderEscalations(trace);
  renderRetrievers(trace, titles);
  renderFusion(trace, titles, finalIds);
  renderMmr(trace, titles);
  renderWaterfall(trace);
  $("raw-trace").textContent = JSON.stringify(trace, null, 2);
  $("route-panel").classList.remove("hidden");
  layoutGauge();
}

async function ask(ev) {
  ev.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const key = $("api-key").value;
  if (key) sessionStorage.setItem("amsrag-key", key);
  if (!serverConfig) await loadConfig();
  const button = $("ask-button");
  button.disabled = true;
  setStatus("Thinking…");
  const t0 = performance.now();
  const whereBox = $("where");
  whereBox.classList.remove("invalid");
  try {
    const body = { question, system: $("system").value, explain: true };
    const where = parseWhere(whereBox.value);
    if (where) body.where = where;
    const result = await api("POST", "/v1/ask", body);
    renderAnswer(result);
    renderRoute(result);
    setStatus(`answered in ${((performance.now() - t0) / 1000).toFixed(2)} s`);
  } catch (e) {
    // a refused filter: the server's message names the field (`where.FIELD`) or the value
    if (e.code === "invalid_filter" || /`where/.test(e.message)) whereBox.classList.add("invalid");
    setStatus(`${e.code || "error"}: ${e.message}`, true);
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------- review

const REVIEW_CLASSES = [["zero_hop", "zero_hop (no retrieval)"], ["one_hop", "one_hop"], ["multi_hop", "multi_hop"]];
const SIGNALS = [["route_label", "route"], ["route_alpha", "route α"], ["gray_zone", "gray zone"],
  ["confidence", "generator confidence"], ["support", "citation support"], ["disagreement", "evidence-confidence disagreement"],
  ["sufficiency_failed", "sufficiency check failed"], ["escalations", "escalations"], ["flagged", "flagged"],
  ["suspect", "suspect"]];

function setReviewStatus(text, isError) {
  const s = $("review-status");
  s.textContent = text;
  s.classList.toggle("error", !!isError);
}

function signalValue(v) {
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : fmt(v);
  if (typeof v === "boolean") return v ? "yes" : "no";
  return v === null || v === undefined ? "–" : String(v);
}

function renderReviewItem(item) {
  const a = item.answer || {};
  const cx = a.complexity || {};
  const route = cx.label ? routed(cx) : null;
  const signals = a.signals || {};
  const audit = a.audit || {};
  const id = item.id;
  const form = el("form", { class: "review-form", autocomplete: "off" },
    ...["right", "wrong"].map((v) => el("label", {},
      el("input", { type: "radio", name: "verdict-" + id, value: v, class: "review-verdict" }), " " + v)),
    el("select", { class: "review-class", title: "the question's true class" },
      el("option", { value: "" }, "— true class —"),
      ...REVIEW_CLASSES.map(([v, text]) => el("option", { value: v }, text))),
    el("input", { class: "review-note", type: "text", placeholder: "note (optional)", maxlength: "4000" }),
    el("button", { type: "submit", class: "review-save" }, "Save review"),
    el("button", { type: "button", class: "review-dismiss secondary" }, "Dismiss"),
    el("span", { class: "review-error err" }));
  const card = el("article", { class: "panel review-item", "data-id": String(id) },
    el("h3", { class: "review-question" }, item.query),
    el("div", {}, el("span", { class: "pill strong review-kind" }, item.kind), el("span", { class: "pill" }, "system " + item.system),
      item.seen > 1 ? el("span", { class: "pill" }, `seen ${item.seen}×`) : null,
      el("span", { class: "muted review-reason" }, item.reason)),
    el("p", { class: "review-answer" }, el("span", { class: "muted" }, "answer: "),
      el("span", { class: "review-answer-text" }, a.answer === null || a.answer === undefined ? "–" : String(a.answer)),
      a.abstained ? el("span", { class: "pill" }, "abstained") : null),
    el("ol", { class: "sources review-sources" }, ...(a.sources || []).map((s) => el("li", { "data-id": s.id },
      el("strong", {}, s.title || s.id), " ", el("span", { class: "muted" }, "(" + s.id + ")"),
      el("div", { class: "text" }, s.text)))),
    (a.sources || []).length ? null : el("p", { class: "muted" }, "no cited evidence"),
    el("p", { class: "review-route" }, "route: ",
      route ? el("strong", {}, `${route.label} · α ${fmt(route.alpha)}`) : "not classified",
      " · Strategy " + (a.strategy || "–"),
      route && (route.label !== cx.label) ? el("span", { class: "muted" }, ` (classifier: ${cx.label}, α ${fmt(cx.alpha)})`) : null),
    el("p", { class: "review-support" }, "audit: citation support ", el("strong", {}, fmt(audit.support)),
      audit.threshold !== undefined ? el("span", { class: "muted" }, ` (flagged below ${fmt(audit.threshold)})`) : null,
      audit.verdict ? el("span", { class: "muted" }, " · " + audit.verdict) : null),
    el("table", { class: "review-signals" }, el("tbody", {}, ...SIGNALS.filter(([k]) => k in signals).map(([k, name]) =>
      el("tr", { "data-signal": k }, el("th", {}, name), el("td", { class: "num" }, signalValue(signals[k])))))),
    item.details ? el("details", {}, el("summary", {}, "shadow probe"), el("pre", {}, JSON.stringify(item.details, null, 2))) : null,
    form);
  const error = form.querySelector(".review-error");
  const done = async (path, body) => {
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      await api("POST", path, body);
      card.remove();
      await loadReviewCounts();
    } catch (e) {
      error.textContent = `${e.code || "error"}: ${e.message}`;
    } finally {
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const picked = form.querySelector(".review-verdict:checked");
    if (!picked) { error.textContent = "mark the answer right or wrong first"; return; }
    error.textContent = "";
    done(`/v1/review/${id}`, { verdict: picked.value, true_class: form.querySelector(".review-class").value || null,
      note: form.querySelector(".review-note").value });
  });
  form.querySelector(".review-dismiss").addEventListener("click", () =>
    done(`/v1/review/${id}/dismiss`, { note: form.querySelector(".review-note").value }));
  return card;
}

function showCounts(counts) {
  $("review-counts").textContent = `${counts.open} open · ${counts.reviewed} reviewed · ${counts.dismissed} dismissed`;
}

async function loadReviewCounts() {
  const data = await api("GET", "/v1/review?limit=1");
  showCounts(data.counts);
  if (!data.counts.open) setReviewStatus("Nothing to review.");
}

async function loadReviews() {
  const key = $("api-key").value;
  if (key) sessionStorage.setItem("amsrag-key", key);
  setReviewStatus("Loading…");
  try {
    if (!serverConfig) await loadConfig();
    const data = await api("GET", "/v1/review?status=open&limit=100");
    showCounts(data.counts);
    put($("review-list"), data.items.map(renderReviewItem));
    setReviewStatus(data.items.length ? "" : "Nothing to review.");
  } catch (e) {
    put($("review-list"));
    setReviewStatus(e.status === 401 ? "This server needs an API key: enter it above, then Refresh."
      : `${e.code || "error"}: ${e.message}`, true);
  }
}

const onReviewPage = location.pathname.replace(/\/+$/, "") === "/review";
$(onReviewPage ? "nav-review" : "nav-ask").classList.add("current");
$("ask-view").classList.toggle("hidden", onReviewPage);
$("review-view").classList.toggle("hidden", !onReviewPage);
$("review-refresh").addEventListener("click", loadReviews);
$("ask-form").addEventListener("submit", ask);
if (onReviewPage) loadReviews(); else loadConfig();
$("source-panel-close").addEventListener("click", () => $("source-panel").classList.add("hidden"));
