/* jobs.js: the jobs list, filtered by user and state, refreshed. */
"use strict";
/* The latest committed checkpoint: its step and the time since. */
function lastCkpt(job) {
  if (job.last_checkpoint === null || job.last_checkpoint === undefined) return "";
  return "step " + job.last_checkpoint + (job.last_checkpoint_time ? ", " + dt.ago(job.last_checkpoint_time) : "");
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
      dt.num(j.throughput, 1) + "</td><td>" + j.restarts + "</td><td>" + dt.esc(lastCkpt(j)) +
      "</td><td>" + share + "</td><td>" + (j.comm && typeof j.comm.mfu === "number" ? dt.num(100 * j.comm.mfu, 1) + "%" : "") +
      "</td></tr>");
  }
  document.querySelector("#jobs tbody").innerHTML = rows.join("");
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

document.getElementById("f-user").addEventListener("change", refresh);
document.getElementById("f-state").addEventListener("change", refresh);
setInterval(() => { if (document.getElementById("f-auto").checked) refresh(); }, 5000);
dt.whoami().then(refresh, () => {});
