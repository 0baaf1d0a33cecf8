/* ui.js: what every page of the dtctl web page shares: the link token,
 * reading the API, errors, formatting. */
"use strict";
const dt = {};

/* The link token of 'dtctl ui' comes in the address (#token=...); it is
 * kept for this tab and removed from the address bar. */
dt.token = (function () {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("dtctl-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("dtctl-token");
})();

dt.error = function (text) {
  const e = document.getElementById("error");
  if (!e) return;
  e.textContent = text;
  e.style.display = text ? "block" : "none";
};

/* GET an API route; the envelope's data, or throws with its error text. */
dt.get = async function (path) {
  const headers = {};
  if (dt.token) headers.Authorization = "Bearer " + dt.token;
  const r = await fetch(path, { headers: headers, cache: "no-store" });
  let env = null;
  try { env = await r.json(); } catch (e) { env = null; }
  if (!r.ok) {
    const msg = env && env.errors && env.errors.length ? env.errors[0].error : r.statusText;
    const err = new Error(r.status + ": " + msg);
    err.status = r.status;
    throw err;
  }
  return env.data;
};

/* Show who the page reads as, or how to get in. */
dt.whoami = async function () {
  const w = document.getElementById("who");
  try {
    const me = await dt.get("/v1/ui/whoami");
    if (w) w.textContent = "viewing as " + me.user + (me.admin ? " (admin)" : "");
    return me;
  } catch (e) {
    dt.error(e.status === 401
      ? "Not signed in: " + e.message.replace(/^401: /, "") + ". Run 'dtctl ui' and open the link it prints."
      : String(e.message));
    throw e;
  }
};

dt.ms = function (t) { return t ? Date.parse(t) : NaN; };
dt.ago = function (t) {
  const ms = Date.now() - dt.ms(t);
  if (!isFinite(ms)) return "";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return s + " s ago";
  if (s < 7200) return Math.round(s / 60) + " min ago";
  return (s / 3600).toFixed(1) + " h ago";
};
dt.num = function (x, d) { return x === null || x === undefined ? "" : Number(x).toFixed(d); };
dt.esc = function (s) {
  return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
};
/* Total steps of a job when its command says (--steps N) or its result does. */
dt.totalSteps = function (job) {
  if (job.result && Number.isInteger(job.result.steps)) return job.result.steps;
  const c = (job.spec && job.spec.command) || [];
  for (let i = 0; i < c.length; i++) {
    if (c[i] === "--steps" && i + 1 < c.length && /^\d+$/.test(c[i + 1])) return +c[i + 1];
    const m = /^--steps=(\d+)$/.exec(c[i]);
    if (m) return +m[1];
  }
  return null;
};
dt.progress = function (job) {
  const total = dt.totalSteps(job), step = job.step;
  if (step === null || step === undefined) return "";
  if (!total) return String(step);
  const pct = Math.min(100, 100 * step / total);
  return '<span class="bar" title="' + pct.toFixed(0) + '%"><span style="width:' + pct.toFixed(1) +
    '%"></span></span> ' + step + " / " + total;
};
