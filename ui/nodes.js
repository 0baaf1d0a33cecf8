/* nodes.js: the nodes: health, suspect state and the failures behind it,
 * the job on each node; refreshed. */
"use strict";
async function refresh() {
  let nodes;
  try { nodes = await dt.get("/v1/nodes"); } catch (e) { dt.error(String(e.message)); return; }
  dt.error("");
  document.querySelector("#nodes tbody").innerHTML = nodes.map(n =>
    '<tr data-node="' + dt.esc(n.name) + '"><td>' + dt.esc(n.name) + '</td><td class="state-' + dt.esc(n.state) + '">' +
    dt.esc(n.state) + '</td><td class="state-' + dt.esc(n.health) + '">' + dt.esc(n.health) + "</td><td>" +
    (n.job ? '<a href="/ui/job.html?id=' + n.job + '">' + n.job + "</a>" + (n.attempt ? " (attempt " + n.attempt + ")" : "") : "") +
    "</td><td>" + n.failures + "</td><td>" + dt.esc(n.last_cause) + " " + dt.esc(n.last_failure_time) + "</td><td>" +
    dt.esc(n.suspect_since) + " " + dt.esc(n.note) + "</td><td>" + dt.esc(n.last_seen) + "</td></tr>").join("");
  const out = [];
  for (const n of nodes.filter(n => n.health === "suspect")) {
    try {
      const d = await dt.get("/v1/nodes/" + encodeURIComponent(n.name) + "?limit=20");
      out.push("<h2>" + dt.esc(n.name) + ": why it is suspect</h2><p>Suspect since " + dt.esc(n.suspect_since) +
        ": " + dt.esc(n.note) + "</p><table><tr><th>Time</th><th>Kind</th><th>Cause</th><th>Job</th><th>Attempt</th><th>Detail</th></tr>" +
        d.history.map(h => "<tr><td>" + dt.esc(h.time) + "</td><td>" + dt.esc(h.kind) + "</td><td>" + dt.esc(h.cause) +
          "</td><td>" + (h.job ? '<a href="/ui/job.html?id=' + h.job + '">' + h.job + "</a>" : "") + "</td><td>" +
          dt.esc(h.attempt) + "</td><td>" + dt.esc(h.detail) + "</td></tr>").join("") + "</table>");
    } catch (e) { out.push("<p>" + dt.esc(n.name) + ": " + dt.esc(e.message) + "</p>"); }
  }
  document.getElementById("suspects").innerHTML = out.join("");
}
dt.whoami().then(() => { refresh(); setInterval(refresh, 5000); }, () => {});
