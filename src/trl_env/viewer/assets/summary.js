"use strict";
// Summary panel: figure cards, reward and success over steps (inline SVG), stop reasons, turn counts.

const STOP_COLOURS = { done: "#34a853", token_budget: "#e8a33d", max_turns: "#7b8db0", env_error: "#d9534f" };

function esc(value) {
  return String(value).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function fmt(x, digits = 3) {
  return x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(digits);
}

function mean(xs) {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

function extent(xs) {
  let lo = Infinity, hi = -Infinity;
  for (const x of xs) { if (x < lo) lo = x; if (x > hi) hi = x; }
  return [lo, hi];
}

function countBy(items, key) {
  const counts = new Map();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) || 0) + 1);
  return counts;
}

function card(label, value, sub) {
  return `<div class="card"><div class="label">${esc(label)}</div><div class="value">${value}</div>` +
    `<div class="sub">${sub || "&nbsp;"}</div></div>`;
}

function summaryCards(eps) {
  const rewards = eps.map((e) => e.reward).filter((r) => r !== null);
  const known = eps.filter((e) => e.success === true || e.success === false);
  const wins = known.filter((e) => e.success).length;
  const turns = eps.reduce((a, e) => a + (e.num_turns || 0), 0);
  const failures = eps.reduce((a, e) => a + (e.parse_failures || 0), 0);
  const failed = eps.filter((e) => e.parse_failures).length;
  const errors = eps.filter((e) => e.error).length;
  return '<div class="cards">' +
    card("Episodes", eps.length.toLocaleString(), "") +
    card("Success", known.length ? `${fmt((100 * wins) / known.length, 1)}%` : "–",
      known.length ? `${wins} of ${known.length}` : "not recorded") +
    card("Mean reward", fmt(mean(rewards)), rewards.length ? extent(rewards).map((r) => fmt(r, 2)).join(" … ") : "") +
    card("Mean turns", fmt(eps.length ? turns / eps.length : null, 2), `${turns.toLocaleString()} turns`) +
    card("Parse failures", failures.toLocaleString(), `in ${failed} episode${failed === 1 ? "" : "s"}`) +
    card("Env errors", errors.toLocaleString(), errors ? `${fmt((100 * errors) / eps.length, 1)}% of all` : "none") +
    "</div>";
}

// A small line chart: mean reward (left axis) and success rate (right axis, 0–1) per training step.
function stepChart(eps) {
  const groups = new Map();
  for (const e of eps) {
    if (e.step === null || e.step === undefined) continue;
    let g = groups.get(e.step);
    if (!g) groups.set(e.step, (g = { r: [], s: [] }));
    if (e.reward !== null) g.r.push(e.reward);
    if (e.success === true || e.success === false) g.s.push(e.success ? 1 : 0);
  }
  if (!groups.size) return rewardHistogram(eps);
  const steps = [...groups.keys()].sort((a, b) => a - b);
  const reward = steps.map((s) => [s, mean(groups.get(s).r)]).filter((p) => p[1] !== null);
  const success = steps.map((s) => [s, mean(groups.get(s).s)]).filter((p) => p[1] !== null);
  const W = 460, H = 128, L = 40, R = success.length ? 34 : 10, T = 10, B = 22;
  const x0 = steps[0], x1 = steps[steps.length - 1];
  let lo = Math.min(0, ...reward.map((p) => p[1])), hi = Math.max(...reward.map((p) => p[1]), lo + 1e-9);
  if (hi - lo < 1e-6) hi = lo + 1;
  const X = (s) => (x1 === x0 ? (L + W - R) / 2 : L + ((s - x0) / (x1 - x0)) * (W - L - R));
  const Y = (v, a, b) => T + (1 - (v - a) / (b - a)) * (H - T - B);
  let svg = `<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="xMinYMid meet" role="img" aria-label="reward and success by step">`;
  for (let i = 0; i <= 3; i++) {
    const v = lo + ((hi - lo) * i) / 3, y = Y(v, lo, hi);
    svg += `<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" stroke="#eceef2"/>`;
    svg += `<text x="${L - 5}" y="${y + 3}" text-anchor="end">${fmt(v, 2)}</text>`;
    if (success.length) svg += `<text x="${W - R + 5}" y="${y + 3}">${Math.round((100 * i) / 3)}%</text>`;
  }
  svg += `<text x="${L}" y="${H - 6}">step ${x0}</text><text x="${W - R}" y="${H - 6}" text-anchor="end">${x1}</text>`;
  const line = (points, a, b, colour, dash) => {
    const d = points.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1], a, b).toFixed(1)}`).join(" ");
    let out = `<polyline points="${d}" fill="none" stroke="${colour}" stroke-width="1.8" ${dash ? 'stroke-dasharray="4 3"' : ""}/>`;
    if (points.length <= 60) {
      for (const p of points) out += `<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1], a, b).toFixed(1)}" r="2.4" fill="${colour}"><title>step ${p[0]}: ${fmt(p[1])}</title></circle>`;
    }
    return out;
  };
  svg += line(success, 0, 1, "#16a34a", true) + line(reward, lo, hi, "#2563eb", false) + "</svg>";
  const key = '<span class="key"><span class="swatch" style="background:#2563eb"></span>mean reward</span>' +
    (success.length ? '<span class="key"><span class="swatch" style="background:#16a34a"></span>success rate</span>' : "");
  return `<figure class="chart wide"><figcaption>Reward &amp; success by step ${key}</figcaption>${svg}</figure>`;
}

// Without training steps (an evaluation): how rewards are distributed.
function rewardHistogram(eps) {
  const rewards = eps.map((e) => e.reward).filter((r) => r !== null);
  if (!rewards.length) return '<figure class="chart wide"><figcaption>Rewards</figcaption><p class="dim">no rewards</p></figure>';
  const [lo, hi] = extent(rewards), bins = lo === hi ? 1 : 16;
  const counts = new Array(bins).fill(0);
  for (const r of rewards) counts[Math.min(bins - 1, Math.floor(((r - lo) / (hi - lo || 1)) * bins))]++;
  const top = Math.max(...counts);
  const cols = counts.map((c, i) => {
    const a = lo + ((hi - lo) * i) / bins;
    const label = i === 0 || i === bins - 1 ? fmt(i === 0 ? lo : hi, 2) : "";
    return `<div class="col" title="${fmt(a, 3)} … ${fmt(a + (hi - lo) / bins, 3)}: ${c}"><div class="b" style="height:${(100 * c) / top}%"></div><div class="x">${label}&nbsp;</div></div>`;
  });
  return `<figure class="chart wide"><figcaption>Reward distribution <span class="key">(no training steps recorded)</span></figcaption><div class="hist">${cols.join("")}</div></figure>`;
}

function stopBars(eps, selected) {
  const counts = [...countBy(eps, (e) => String(e.stop_reason ?? "unknown"))].sort((a, b) => b[1] - a[1]);
  const top = Math.max(1, ...counts.map((c) => c[1]));
  const rows = counts.map(([name, n]) =>
    `<div class="bar-row${name === selected ? " on" : ""}" data-stop="${esc(name)}" title="show only ${esc(name)}">` +
    `<span class="name">${esc(name)}</span><span class="track"><span class="fill" style="display:block;width:${(100 * n) / top}%;` +
    `background:${STOP_COLOURS[name] || "#9ca3af"}"></span></span><span class="n">${n}</span></div>`);
  return `<figure class="chart narrow"><figcaption>Stop reasons <span class="key">click to filter</span></figcaption><div class="bars">${rows.join("")}</div></figure>`;
}

function turnHistogram(eps) {
  const counts = countBy(eps, (e) => e.num_turns || 0);
  const max = Math.max(0, extent(counts.keys())[1]), width = Math.max(1, Math.ceil((max + 1) / 24));
  const bins = [];
  for (let a = 0; a <= max; a += width) {
    let n = 0;
    for (let t = a; t < a + width; t++) n += counts.get(t) || 0;
    bins.push([width === 1 ? `${a}` : `${a}–${a + width - 1}`, n]);
  }
  while (bins.length > 1 && bins[0][1] === 0) bins.shift();
  const top = Math.max(1, ...bins.map((b) => b[1]));
  const cols = bins.map(([label, n]) => `<div class="col" title="${label} turns: ${n} episodes"><div class="b" style="height:${(100 * n) / top}%"></div><div class="x">${label}</div></div>`);
  return `<figure class="chart narrow"><figcaption>Turns per episode</figcaption><div class="hist">${cols.join("")}</div></figure>`;
}

function renderSummary(eps, selectedStop) {
  return summaryCards(eps) + stepChart(eps) + stopBars(eps, selectedStop) + turnHistogram(eps);
}
