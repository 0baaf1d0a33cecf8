/* jobs.js: the jobs list, filtered by user and state, refreshed. */
"use strict";
const ckptAge = {}; /* job id -> time of its newest committed checkpoint */

async function lastCkpt(job) {
  if (job.last_checkpoint === null || job.last_checkpoint === undefined) return "";
  if (job.state === "running" || job.state === "restarting" || !(job.id in ckptAge)) {
    try {
      const c = await dt.get("/v1/jobs/" + job.id + "/checkpoints");
      const done = c.filter(x => x.state === "committed");
      ckptAge[job.id] = done.length ? (done[0].commit_time || done[0].time) : null;
    } catch (e) { ckptAge[job.id] = null; }
  }
  return "step " + job.last_checkpoint + (ckptAge[job.id] ? ", " + dt.ago(ckptAge[job.id]) : "");
}

async function refresh() {
  const user = document.getElementById("f-user").value;
  const state = document.getElementById("f-state").value;
  let q = "?limit=500";
  if (state) q += "&state=" + encodeURIComponent(state);
  if (user) q += "&user=" + encodeURIComponent(user);
  let jobs;
  try {
    jobs = await dt.get("/v1/jobs" + q);
  } catch (e) { dt.error(String(e.message)); return; }
  dt.error("");
  const users = document.getElementById("f-user");
  for (const j of jobs) {
    if (![...users.options].some(o => o.value === j.user)) {
      const o = document.createElement("option");
      o.value = o.textContent = j.user;
      users.appendChild(o);
    }
  }
  const rows = [];
  for (const j of jobs) {
    const share = j.comm && j.comm.exposed_share !== null && j.comm.exposed_share !== undefined
      ? (100 * j.comm.exposed_share).toFixed(0) + "%" + (j.comm.comm_bound ? ' <span class="warn">comm-bound</span>' : "")
      : "";
    rows.push('<tr data-job="' + j.id + '"><td><a href="/ui/job.html?id=' + j.id + '">' + j.id + "</a></td><td>" +
      dt.esc(j.name) + "</td><td>" + dt.esc(j.user) + '</td><td class="state-' + dt.esc(j.state) + '">' +
      dt.esc(j.state) + "</td><td>" + dt.progress(j) + "</td><td>" + dt.num(j.loss, 4) + "</td><td>" +
      dt.num(j.throughput, 1) + "</td><td>" + j.restarts + "</td><td>" + dt.esc(await lastCkpt(j)) +
      "</td><td>" + share + "</td></tr>");
  }
  document.querySelector("#jobs tbody").innerHTML = rows.join("");
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

document.getElementById("f-user").addEventListener("change", refresh);
document.getElementById("f-state").addEventListener("change", refresh);
setInterval(() => { if (document.getElementById("f-auto").checked) refresh(); }, 5000);
dt.whoami().then(refresh, () => {});
