"use strict";
// The page: reads the embedded records, filters and sorts them, lists them virtually (only the rows
// on screen are in the DOM, so 10,000 episodes scroll smoothly) and shows the selected episode.

const DATA = JSON.parse(document.getElementById("trl-env-data").textContent);
const EPS = DATA.episodes;
const ROW = 30; // px; must match --row in page.css
const state = { view: [], selected: null, mode: "mask", haystacks: null };
const $ = (id) => document.getElementById(id);

function haystack(e) {
  const prompt = e.p === null ? "" : DATA.prompts[e.p];
  const turns = e.turns.map((t) => `${t.reasoning ?? ""}\n${t.action ?? ""}\n${t.observation ?? ""}`).join("\n");
  const tokens = e.tt.join("");
  return [e.seed, e.stop_reason, e.error, prompt, tokens, turns, e.text, JSON.stringify(e.extra)].join("\n").toLowerCase();
}

function numberInput(id) {
  const value = $(id).value.trim();
  return value === "" || Number.isNaN(Number(value)) ? null : Number(value);
}

function applyFilters() {
  const stepMin = numberInput("f-step-min"), stepMax = numberInput("f-step-max");
  const rewardMin = numberInput("f-reward-min"), rewardMax = numberInput("f-reward-max");
  const stop = $("f-stop").value, success = $("f-success").value;
  const query = $("f-search").value.trim().toLowerCase();
  if (query && !state.haystacks) state.haystacks = EPS.map(haystack); // built on the first search only
  const inRange = (x, lo, hi) => (lo === null && hi === null) || (x !== null && (lo === null || x >= lo) && (hi === null || x <= hi));
  const view = [];
  for (let i = 0; i < EPS.length; i++) {
    const e = EPS[i];
    if (!inRange(e.step, stepMin, stepMax) || !inRange(e.reward, rewardMin, rewardMax)) continue;
    if (stop && String(e.stop_reason ?? "unknown") !== stop) continue;
    if (success && String(e.success ?? "unknown") !== success) continue;
    if (query && !state.haystacks[i].includes(query)) continue;
    view.push(i);
  }
  const sort = $("f-sort").value;
  const key = { "reward-asc": (e) => e.reward, "reward-desc": (e) => (e.reward === null ? null : -e.reward), step: (e) => e.step, turns: (e) => -(e.num_turns || 0) }[sort];
  if (key) view.sort((a, b) => (key(EPS[a]) ?? Infinity) - (key(EPS[b]) ?? Infinity) || a - b);
  state.view = view;
  $("count").textContent = `${view.length.toLocaleString()} of ${EPS.length.toLocaleString()} episodes`;
  $("spacer").style.height = `${view.length * ROW}px`;
  $("viewport").scrollTop = 0;
  drawRows();
  $("summary").querySelectorAll(".bar-row").forEach((r) => r.classList.toggle("on", r.dataset.stop === stop));
}

function drawRows() {
  const viewport = $("viewport");
  const first = Math.max(0, Math.floor(viewport.scrollTop / ROW) - 10);
  const last = Math.min(state.view.length, Math.ceil((viewport.scrollTop + viewport.clientHeight) / ROW) + 10);
  const rows = [];
  for (let r = first; r < last; r++) {
    const i = state.view[r], e = EPS[i];
    rows.push(`<div class="row${i === state.selected ? " sel" : ""}" data-i="${i}" style="top:${r * ROW}px">` +
      `<span class="dim num">${i}</span><span class="seed" title="${esc(e.seed)}">${esc(e.seed)}</span>` +
      `<span class="num dim c-step">${e.step ?? "–"}</span><span class="num">${fmt(e.reward)}</span>` +
      `<span class="c-stop"><span class="pill ${esc(e.stop_reason ?? "")}">${esc(e.stop_reason ?? "unknown")}</span></span>` +
      `<span class="num">${e.num_turns ?? "–"}</span><span>${bool(e.success)}</span></div>`);
  }
  if (!state.view.length) rows.push('<p class="empty">No episode matches the filters.</p>');
  $("spacer").innerHTML = rows.join("");
}

function select(i) {
  state.selected = i;
  const e = EPS[i];
  $("detail").innerHTML = renderEpisode(e, e.p === null ? null : DATA.prompts[e.p], state.mode);
  $("detail").scrollTop = 0;
  drawRows();
}

function moveSelection(delta) {
  if (!state.view.length) return;
  const at = state.view.indexOf(state.selected);
  const r = Math.min(state.view.length - 1, Math.max(0, at < 0 ? 0 : at + delta));
  select(state.view[r]);
  const viewport = $("viewport");
  if (r * ROW < viewport.scrollTop) viewport.scrollTop = r * ROW;
  if ((r + 1) * ROW > viewport.scrollTop + viewport.clientHeight) viewport.scrollTop = (r + 1) * ROW - viewport.clientHeight;
}

function layout() {
  const stops = [...countBy(EPS, (e) => String(e.stop_reason ?? "unknown")).keys()].sort();
  const steps = EPS.map((e) => e.step).filter((s) => s !== null);
  const [s0, s1] = extent(steps);
  const option = (v, label) => `<option value="${esc(v)}">${esc(label)}</option>`;
  $("app").innerHTML =
    `<header class="top"><h1>${esc(DATA.title)}</h1><span class="meta">${EPS.length.toLocaleString()} episodes` +
    `${steps.length ? ` · training steps ${s0}–${s1}` : " · evaluation (no training steps)"}</span></header>` +
    `<section class="summary" id="summary">${renderSummary(EPS, "")}</section>` +
    '<section class="filters">' +
    '<label class="c-step">step <input id="f-step-min" type="number" placeholder="min"> – <input id="f-step-max" type="number" placeholder="max"></label>' +
    '<label>reward <input id="f-reward-min" type="number" step="any" placeholder="min"> – <input id="f-reward-max" type="number" step="any" placeholder="max"></label>' +
    `<label>stop reason <select id="f-stop">${option("", "any")}${stops.map((s) => option(s, s)).join("")}</select></label>` +
    `<label>success <select id="f-success">${option("", "any")}${option("true", "success")}${option("false", "failure")}${option("unknown", "unknown")}</select></label>` +
    `<label>sort <select id="f-sort">${option("", "file order")}${option("reward-asc", "reward ↑")}${option("reward-desc", "reward ↓")}${option("step", "step")}${option("turns", "most turns")}</select></label>` +
    '<label>search <input id="f-search" type="search" placeholder="seed, text, error…"></label>' +
    '<button id="f-reset" type="button">Reset</button><span class="count" id="count"></span></section>' +
    '<main class="split"><div class="list"><div class="list-head"><span class="num">#</span><span>seed</span>' +
    '<span class="num c-step">step</span><span class="num">reward</span><span>stop</span><span class="num">turns</span><span>ok</span></div>' +
    '<div class="viewport" id="viewport" tabindex="0"><div class="spacer" id="spacer"></div></div></div>' +
    '<article class="detail" id="detail"><p class="empty">Select an episode.</p></article></main>' +
    '<div class="tip" id="tip" hidden></div>';
  $("app").classList.toggle("nosteps", !steps.length); // an evaluation: no step column, no step filter
}

function wire() {
  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(applyFilters, 120); };
  for (const id of ["f-step-min", "f-step-max", "f-reward-min", "f-reward-max", "f-search"]) $(id).addEventListener("input", later);
  for (const id of ["f-stop", "f-success", "f-sort"]) $(id).addEventListener("change", applyFilters);
  $("f-reset").addEventListener("click", () => {
    document.querySelectorAll(".filters input, .filters select").forEach((el) => { el.value = ""; });
    applyFilters();
  });
  $("summary").addEventListener("click", (ev) => {
    const row = ev.target.closest(".bar-row");
    if (!row) return;
    $("f-stop").value = $("f-stop").value === row.dataset.stop ? "" : row.dataset.stop;
    applyFilters();
  });
  $("viewport").addEventListener("scroll", () => requestAnimationFrame(drawRows));
  $("spacer").addEventListener("click", (ev) => {
    const row = ev.target.closest(".row");
    if (row) select(Number(row.dataset.i));
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.target.closest && ev.target.closest("input, select")) return;
    if (ev.key === "ArrowDown" || ev.key === "j") { moveSelection(1); ev.preventDefault(); }
    if (ev.key === "ArrowUp" || ev.key === "k") { moveSelection(-1); ev.preventDefault(); }
  });
  const tip = $("tip");
  $("detail").addEventListener("click", (ev) => {
    const button = ev.target.closest(".modes button");
    if (button && state.selected !== null) { state.mode = button.dataset.mode; select(state.selected); }
  });
  $("detail").addEventListener("mouseover", (ev) => {
    const tok = ev.target.closest(".tok");
    if (!tok) { tip.hidden = true; return; }
    tip.innerHTML = tokenTip(EPS[state.selected], Number(tok.dataset.i));
    const box = tok.getBoundingClientRect();
    tip.hidden = false;
    tip.style.left = `${Math.min(box.left, window.innerWidth - tip.offsetWidth - 8)}px`;
    tip.style.top = `${box.bottom + 6 + tip.offsetHeight > window.innerHeight ? box.top - tip.offsetHeight - 6 : box.bottom + 6}px`;
  });
  $("detail").addEventListener("mouseleave", () => { tip.hidden = true; });
}

layout();
wire();
applyFilters();
if (EPS.length) select(0);
