/* job.js: one job: loss and step time against wall-clock time across its
 * attempts with failure, detection, restart and resume marked; the
 * goodput breakdown; communication; per-rank step times; attempts and
 * checkpoints. */
"use strict";
const jobId = new URLSearchParams(location.search).get("id");
const colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"];
const charts = {};

/* Vertical lines at marks[i].x (seconds) with their labels. */
const markPlugin = {
  id: "dtmarks",
  afterDatasetsDraw(chart, args, opts) {
    const marks = opts.marks || [], xs = chart.scales.x, area = chart.chartArea, c = chart.ctx;
    c.save();
    c.font = "10px sans-serif";
    marks.forEach((m, i) => {
      const x = xs.getPixelForValue(m.x);
      if (x < area.left || x > area.right) return;
      c.strokeStyle = m.color; c.fillStyle = m.color; c.setLineDash([4, 3]);
      c.beginPath(); c.moveTo(x, area.top); c.lineTo(x, area.bottom); c.stroke();
      c.fillText(m.label, x + 2, area.top + 10 + 11 * (i % 4));
    });
    c.restore();
  }
};
Chart.register(markPlugin);

function lineChart(id, ylabel, datasets, marks, t0) {
  const cfg = {
    type: "scatter",
    data: { datasets: datasets },
    options: {
      animation: false, maintainAspectRatio: false, showLine: true,
      parsing: false, normalized: true,
      elements: { point: { radius: 1.5 }, line: { borderWidth: 1.5 } },
      scales: {
        x: { type: "linear", title: { display: true, text: "wall-clock time since submission (s)" } },
        y: { title: { display: true, text: ylabel } }
      },
      plugins: { dtmarks: { marks: marks }, legend: { position: "bottom" } }
    }
  };
  if (charts[id]) charts[id].destroy();
  charts[id] = new Chart(document.getElementById(id), cfg);
}

/* Failure, detection, restart and resume of each attempt that ended in a
 * failure, in seconds since t0. */
function failureMarks(job, events, t0) {
  const marks = [], atts = job.attempts || [];
  const sec = t => (dt.ms(t) - t0) / 1000;
  for (const a of atts) {
    if (!a.cause || a.state !== "failed") continue;
    const next = atts.find(b => b.attempt === a.attempt + 1);
    if (a.fail_time) marks.push({ kind: "failure", x: sec(a.fail_time), color: "#d62728",
      label: "failure: " + a.cause + (a.cause_node ? " on " + a.cause_node : "") + " (attempt " + a.attempt + ")" });
    const det = events.find(e => e.attempt === a.attempt && e.kind === a.cause);
    if (det) marks.push({ kind: "detection", x: sec(det.time), color: "#ff7f0e", label: "detection (attempt " + a.attempt + ")" });
    if (next && next.submit_time) marks.push({ kind: "restart", x: sec(next.submit_time), color: "#9467bd", label: "restart: attempt " + next.attempt });
    const fs = events.find(e => next && e.attempt === next.attempt && e.kind === "first_step");
    if (fs) marks.push({ kind: "resume", x: sec(fs.time), color: "#2ca02c", label: "resume from step " + (next.resume_step || 0) });
  }
  return marks;
}

const parts = [
  ["kept_training_s", "training kept", "#2ca02c"], ["lost_work_s", "lost work", "#d62728"],
  ["detection_s", "detection", "#ff7f0e"], ["restart_s", "restart", "#9467bd"],
  ["queue_s", "queue", "#8c564b"], ["startup_s", "start-up", "#17becf"],
  ["checkpoint_stall_s", "checkpoint stalls", "#bcbd22"], ["shutdown_s", "shutdown", "#7f7f7f"],
  ["idle_s", "idle", "#c7c7c7"], ["unaccounted_s", "unaccounted", "#444"]
];
function goodput(rep) {
  const b = rep.breakdown || {}, total = rep.wall_s || 0, bar = [], leg = [];
  for (const [k, name, color] of parts) {
    const v = b[k] || 0;
    const pct = total > 0 ? 100 * v / total : 0;
    bar.push('<div data-part="' + k + '" data-seconds="' + v + '" title="' + name + ": " + v.toFixed(1) +
      ' s" style="width:' + pct.toFixed(3) + "%;background:" + color + '">' + (pct > 8 ? name : "") + "</div>");
    leg.push('<span><i style="background:' + color + '"></i>' + name + " " + v.toFixed(1) + " s (" + pct.toFixed(1) + "%)</span>");
  }
  document.getElementById("goodput").innerHTML = bar.join("");
  document.getElementById("goodput-legend").innerHTML = leg.join("");
  document.getElementById("ettr").textContent = "ETTR " + (100 * (rep.ettr || 0)).toFixed(1) +
    "% (kept training time / wall time since the first start); wall " + total.toFixed(1) + " s" +
    (rep.final ? "" : " (live)");
}

async function load() {
  let job, events, metrics, rep, ckpts, ranks;
  try {
    [job, events, metrics, ckpts] = await Promise.all([
      dt.get("/v1/jobs/" + jobId), dt.get("/v1/jobs/" + jobId + "/events"),
      dt.get("/v1/jobs/" + jobId + "/metrics?max_points=1000"),
      dt.get("/v1/jobs/" + jobId + "/checkpoints")]);
    rep = await dt.get("/v1/jobs/" + jobId + "/report").catch(() => null);
    ranks = await dt.get("/v1/jobs/" + jobId + "/ranks").catch(() => []);
  } catch (e) { dt.error(String(e.message)); return; }
  dt.error("");
  document.title = "dtctl: job " + job.id;
  document.getElementById("title").textContent = "Job " + job.id + " " + job.name;
  document.getElementById("summary").innerHTML = "User " + dt.esc(job.user) + ', state <span class="state-' +
    dt.esc(job.state) + '">' + dt.esc(job.state) + "</span>" + (job.reason ? " (" + dt.esc(job.reason) + ")" : "") +
    ", step " + dt.progress(job) + ", restarts " + job.restarts + ", throughput " + dt.num(job.throughput, 1) + " samples/s";

  const t0 = dt.ms(job.submit_time);
  const byAtt = {};
  for (const p of metrics.points) (byAtt[p.attempt] = byAtt[p.attempt] || []).push(p);
  const atts = Object.keys(byAtt).map(Number).sort((a, b) => a - b);
  const series = (f) => atts.map((a, i) => ({
    label: "attempt " + a, borderColor: colors[i % colors.length], backgroundColor: colors[i % colors.length],
    data: byAtt[a].filter(p => f(p) !== null).map(p => ({ x: (dt.ms(p.time) - t0) / 1000, y: f(p), step: p.step }))
  }));
  const marks = failureMarks(job, events, t0);
  lineChart("loss", "loss", series(p => p.loss), marks, t0);
  lineChart("steptime", "step time (ms): compute + communication", series(p =>
    p.compute_ms === null ? null : p.compute_ms + (p.comm_ms || 0)), marks, t0);
  lineChart("commshare", "exposed communication share", series(p =>
    p.compute_ms === null || p.comm_ms === null || p.compute_ms + p.comm_ms <= 0 ? null
      : p.comm_ms / (p.compute_ms + p.comm_ms)), marks, t0);
  document.getElementById("marks").innerHTML = marks.map(m =>
    '<li data-kind="' + m.kind + '">' + dt.esc(m.label) + " at " + m.x.toFixed(1) + " s</li>").join("");

  if (rep) goodput(rep);

  const c = job.comm, cb = events.filter(e => e.kind === "comm_bound");
  let ch = "";
  if (c) ch += "Exposed communication share " + dt.num(100 * c.exposed_share, 1) + "% (threshold " +
    dt.num(100 * c.threshold, 0) + "% over " + c.window_steps + " steps), compute-time spread between ranks " +
    dt.num(100 * c.compute_spread, 1) + "%" + (c.mfu !== null && c.mfu !== undefined ? ", MFU " + dt.num(100 * c.mfu, 1) + "%" : "") + ". ";
  for (const e of cb) ch += '<div class="warn" data-kind="comm_bound">' + dt.esc(e.detail) + "</div>";
  document.getElementById("comm").innerHTML = ch || '<span class="muted">no live figures</span>';

  /* A straggler (score below the spec's straggler.threshold) stands out in red. */
  const sth = ((job.spec || {}).straggler || {}).threshold || 0.75;
  const slow = r => r.straggler_score !== null && r.straggler_score !== undefined && r.straggler_score < sth;
  const rl = (ranks || []).map(r => "rank " + r.rank + (slow(r) ? " (straggler, score " + dt.num(r.straggler_score, 2) + ")" : ""));
  if (charts.ranks) charts.ranks.destroy();
  charts.ranks = new Chart(document.getElementById("ranks"), {
    type: "bar",
    data: { labels: rl, datasets: [
      { label: "compute (ms)", backgroundColor: (ranks || []).map(r => slow(r) ? "#d62728" : "#1f77b4"),
        data: (ranks || []).map(r => r.compute_ms) },
      { label: "communication wait (ms)", backgroundColor: "#ff7f0e", data: (ranks || []).map(r => r.comm_ms) }] },
    options: { animation: false, maintainAspectRatio: false, scales: { x: { stacked: true }, y: { stacked: true } } }
  });

  document.querySelector("#attempts tbody").innerHTML = (job.attempts || []).map(a =>
    "<tr><td>" + a.attempt + "</td><td>" + dt.esc(a.state) + "</td><td>" + dt.esc(a.cause) + "</td><td>" +
    dt.esc(a.cause_node) + "</td><td>" + dt.esc(a.cause_rank) + "</td><td>" + dt.esc(a.slurm_job_id) +
    "</td><td>" + dt.esc(a.nodelist || (a.nodes || []).map(n => n.name || n).join(",")) + "</td><td>" + dt.esc(a.resume_step) + "</td><td>" +
    dt.esc(a.start_time) + "</td><td>" + dt.esc(a.end_time) + '</td><td data-mfu="' + dt.esc(a.mfu) + '" title="' +
    (a.model_flops ? dt.num(a.model_flops / 1e9, 3) + " GFLOP per step, peak " + dt.num(a.peak_flops / 1e9, 1) +
      " GFLOP/s (" + dt.esc(a.peak_source) + ")" : "the trainer reports no FLOPs") + '">' +
    (a.mfu !== null && a.mfu !== undefined ? dt.num(100 * a.mfu, 2) + "%" : "-") + "</td>" +
    '<td data-numerics-changed="' + (a.numerics_changed ? 1 : 0) + '"' + (a.numerics_changed ? ' class="warn"' : "") +
    ">" + dt.esc(numericsText(a.numerics)) + (a.numerics_changed ? " (changed)" : "") + "</td></tr>").join("");
  /* Bit-identity with an uninterrupted run holds up to the first attempt
   * that computed otherwise (dtctl-job(5), NUMERICS). */
  document.getElementById("numerics").innerHTML = !job.numerics ? "" :
    job.numerics_changed_from ? '<div class="warn" data-kind="numerics_changed">Numerics changed from attempt ' +
      job.numerics_changed_from + " on: the parameters are no longer bit-identical to an uninterrupted run's.</div>"
    : '<span class="muted">Every attempt computed with the pinned numerics (' + dt.esc(numericsText(job.numerics)) + ").</span>";
  document.querySelector("#checkpoints tbody").innerHTML = ckpts.map(k =>
    "<tr><td>" + k.step + "</td><td>" + k.attempt + "</td><td>" + dt.esc(k.state) + "</td><td>" +
    dt.esc(k.shards) + "</td><td>" + dt.esc(k.bytes) + "</td><td>" + dt.esc(k.commit_time || k.time) + "</td></tr>").join("");
  document.body.dataset.loaded = "1";
}

/* A numerics identity in a few words: the BLAS core or the device. */
function numericsText(n) {
  if (!n) return "-";
  return [n.device && n.device !== "cpu" ? n.device : null, n.blas_core ? n.blas + " " + n.blas_core : null,
          n.torch ? "torch " + n.torch : null, n.precision].filter(x => x).join(", ");
}

dt.whoami().then(() => {
  load();
  setInterval(() => { if (document.body.dataset.loaded) load(); }, 10000);
}, () => {});
