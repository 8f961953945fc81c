"use strict";
// One episode: facts, error, the conversation as the model saw it (prompt text, then every completion
// token coloured by source or by logprob), the per-turn table and any extra keys. Built only when opened.

const KIND_CLASS = { 1: "m", 0: "e", 2: "x" };
const KIND_NAME = { 1: "model (mask 1)", 0: "environment (mask 0)", 2: "end of turn added by the engine (mask 0)" };
const SPECIAL = /^<[|｜][^<>]*[|｜]>$|^<[a-z_]+\|>$|^<\|[a-z_]+>$/;
const HEAT_NATS = 12; // a logprob of -12 (p ≈ 6e-6, a uniform guess over 150k tokens) or lower: the hottest colour

// sqrt spreads the usual range of a trained model (0 to -3) over half the scale; a random model is near 1
function heat(logprob) {
  return Math.sqrt(Math.min(1, Math.max(0, -logprob / HEAT_NATS))).toFixed(2);
}

// Completion tokens as spans; newlines get a faint ↵ so line breaks inside tokens stay visible.
function tokenSpans(e) {
  const parts = new Array(e.tt.length);
  for (let i = 0; i < e.tt.length; i++) {
    const kind = e.k[i], text = e.tt[i];
    let cls = "tok " + KIND_CLASS[kind];
    if (SPECIAL.test(text)) cls += " sp";
    // the HTML parser would turn "\r" into "\n": a character reference keeps it as it was
    const body = text === "" ? "" : esc(text).replace(/\r/g, "&#13;").replace(/\n/g, '<span class="nl">↵</span>\n');
    const style = kind === "1" ? ` style="--h:${heat(e.lp[i])}"` : "";
    parts[i] = `<span class="${cls}" data-i="${i}"${style}>${body}</span>`;
  }
  return parts.join("");
}

function bool(value) {
  if (value === true) return '<span class="ok">✓</span>';
  if (value === false) return '<span class="no">✗</span>';
  return '<span class="dim">–</span>';
}

function turnsTable(e) {
  if (!e.turns.length) return "";
  const rewards = e.turn_rewards || [];
  const reasoning = e.turns.some((t) => t.reasoning);
  const rows = e.turns.map((t, i) =>
    `<tr><td class="dim">${i + 1}</td>` + (reasoning ? `<td class="txt"><div>${esc(t.reasoning ?? "")}</div></td>` : "") +
    `<td class="txt"><div>${esc(t.action ?? "")}</div></td>` +
    `<td>${bool(t.parsed_ok)}</td><td>${bool(t.stopped)}</td>` +
    `<td class="txt"><div>${esc(t.observation ?? "")}</div></td><td class="num">${fmt(rewards[i] ?? null)}</td></tr>`);
  return `<section class="block"><h3>Turns <span class="sub">parsed: the answer could be parsed · ` +
    `stopped: the model ended its turn itself</span></h3><table class="turns"><thead><tr><th>#</th>` +
    `${reasoning ? "<th>Reasoning</th>" : ""}<th>Action</th>` +
    `<th>Parsed</th><th>Stopped</th><th>Observation</th><th class="num">Reward</th></tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table></section>`;
}

function extraTable(e) {
  const keys = Object.keys(e.extra);
  if (!keys.length) return "";
  const rows = keys.map((k) => {
    const v = e.extra[k];
    return `<tr><th>${esc(k)}</th><td>${esc(typeof v === "string" ? v : JSON.stringify(v, null, 1))}</td></tr>`;
  });
  return `<section class="block"><h3>Other fields</h3><table class="extra">${rows.join("")}</table></section>`;
}

function conversation(e, prompt, mode) {
  const n = { 0: 0, 1: 0, 2: 0 };
  for (const c of e.k) n[c]++;
  const promptBlock = prompt === null ? "" :
    `<section class="block"><h3>Prompt <span class="sub">${e.pn} tokens · shown as text, not trained on</span></h3>` +
    `<pre class="prompt">${esc(prompt)}</pre></section>`;
  if (!e.tt.length) {
    const text = e.text ? `<div class="plain">${esc(e.text)}</div>` : '<p class="empty">no completion tokens</p>';
    return promptBlock + `<section class="block"><h3>Completion <span class="sub">no token data</span></h3>${text}</section>`;
  }
  const legend = mode === "heat"
    ? '<span class="legend"><span>logprob 0 <span class="heatbar"></span> ≤ −' + HEAT_NATS + '</span>' +
      '<span><span class="swatch" style="background:var(--end-bg);outline:1px dashed var(--end-line)"></span>engine end of turn</span></span>'
    : `<span class="legend"><span><span class="swatch" style="background:var(--model-bg)"></span>model ${n[1]}</span>` +
      `<span><span class="swatch" style="background:var(--env-bg)"></span>environment ${n[0]}</span>` +
      `<span><span class="swatch" style="background:var(--end-bg);outline:1px dashed var(--end-line)"></span>engine end of turn ${n[2]}</span></span>`;
  const modes = `<span class="modes"><button data-mode="mask" class="${mode === "mask" ? "on" : ""}">Source</button>` +
    `<button data-mode="heat" class="${mode === "heat" ? "on" : ""}">Logprob</button></span>`;
  return promptBlock + `<section class="block"><h3>Completion <span class="sub">${e.tt.length} tokens</span>${legend}${modes}</h3>` +
    `<div class="tokens${mode === "heat" ? " heat" : ""}">${tokenSpans(e)}</div></section>`;
}

function renderEpisode(e, prompt, mode) {
  const facts = [
    ["reward", fmt(e.reward)],
    ...(e.step === null || e.step === undefined ? [] : [["step", e.step]]),
    ["turns", e.num_turns ?? "–"],
    ["parse failures", e.parse_failures ?? "–"],
  ].map(([k, v]) => `<span class="fact">${k} <b>${esc(v)}</b></span>`).join("");
  const success = e.success === null || e.success === undefined ? "" :
    `<span class="pill ${e.success ? "done" : "env_error"}">${e.success ? "success" : "failure"}</span>`;
  const stop = `<span class="pill ${esc(e.stop_reason ?? "")}">${esc(e.stop_reason ?? "unknown")}</span>`;
  const error = e.error ? `<pre class="error">${esc(e.error)}</pre>` : "";
  return `<div class="ep-head"><h2>${esc(e.seed)}</h2>${stop}${success}${facts}</div>${error}` +
    conversation(e, prompt, mode) + turnsTable(e) + extraTable(e);
}

// The hover box over a token: its index, id, source and logprob.
function tokenTip(e, i) {
  const kind = e.k[i], lp = e.lp[i];
  const prob = kind === "1" ? ` · p ${(Math.exp(lp) * 100).toPrecision(3)}%` : "";
  const logprob = kind === "1" ? `<br>logprob <b>${lp.toFixed(3)}</b>${prob}` : "<br>not sampled: no logprob";
  return `token ${i} · id ${e.ids[i]}<br>${KIND_NAME[kind]}${logprob}<br><code>${esc(JSON.stringify(e.tt[i]))}</code>`;
}
