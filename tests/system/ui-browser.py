#!/usr/bin/python3
"""ui-browser.py: drive Debian's headless Chromium (chromedriver, through
python3-selenium) over dtctld's web page and print one line per check:
"ok NAME" or "not ok NAME: evidence".  t0921-ui-browser.t turns them into
TAP.

  ui-browser.py URL CASES.json

CASES.json: {"root": TOKEN, "bob": TOKEN, "alice": TOKEN, "expired": TOKEN,
"job": ID (the failed-and-restarted job, root's), "alice_job": ID,
"report": the job's report (data of GET /v1/jobs/ID/report),
"alice_name", "bob_name": the users' names, "suspect": a node an admin
marked suspect,
"steps": {"1": n1, "2": n2} (metric rows per attempt)}
With DT_UI_SCREENSHOTS=DIR it saves DIR/job.png of the job page.
"""
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

url, cases = sys.argv[1], json.load(open(sys.argv[2]))
results = []


def check(name, cond, evidence=""):
    results.append(("ok %s" % name) if cond else ("not ok %s: %s" % (name, evidence)))
    print(results[-1], flush=True)


opts = Options()
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
          "--no-first-run", "--disable-extensions", "--window-size=1400,1800"):
    opts.add_argument(a)
opts.binary_location = "/usr/bin/chromium"
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
driver.set_page_load_timeout(60)


def wait(js, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = driver.execute_script(js)
            if v:
                return v
        except Exception:
            pass
        time.sleep(0.2)
    return None


def console_errors():
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def fresh(path, token):
    """Open path in a new session state with this token (or none)."""
    driver.get(url + "/ui/nodes.html")  # any page of the origin, to clear its storage
    driver.execute_script("sessionStorage.clear()")
    driver.get_log("browser")
    driver.get(url + path + ("#token=" + token if token else ""))


try:
    job = cases["job"]
    # ---- root's link: the jobs list, the job page, the nodes page ---------------
    fresh("/ui/", cases["root"])
    rows = wait("const r = document.querySelectorAll('#jobs tbody tr'); return r.length ? "
                "[...r].map(x => +x.dataset.job) : null")
    check("jobs page: lists the jobs (root sees both)", rows and job in rows and cases["alice_job"] in rows, rows)
    check("jobs page: the token left the address bar", "token=" not in driver.current_url, driver.current_url)
    prog = driver.execute_script("const r = document.querySelector('#jobs tr[data-job=\"%d\"]');"
                                 "return r ? r.innerText : ''" % job)
    check("jobs page: the job's row has its state and progress", "completed" in prog and "/" in prog, prog)
    check("jobs page: the job's row has the time since its last checkpoint", " ago" in prog, prog)
    driver.execute_script("document.getElementById('f-user').value = arguments[0];"
                          "document.getElementById('f-user').dispatchEvent(new Event('change'))",
                          cases["alice_name"])
    rows = wait("const r = [...document.querySelectorAll('#jobs tbody tr')].map(x => +x.dataset.job);"
                "return r.length && !r.includes(%d) ? r : null" % job)
    check("jobs page: the user filter shows only that user's jobs", rows == [cases["alice_job"]], rows)
    driver.execute_script("document.getElementById('f-user').value = '';"
                          "document.getElementById('f-state').value = 'completed';"
                          "document.getElementById('f-state').dispatchEvent(new Event('change'))")
    rows = wait("const r = [...document.querySelectorAll('#jobs tbody tr')].map(x => +x.dataset.job);"
                "return r.length && !r.includes(%d) ? r : null" % cases["alice_job"])
    check("jobs page: the state filter shows only completed jobs", rows == [job], rows)
    errs = console_errors()
    check("jobs page: no JavaScript errors in the console", not errs, errs)

    driver.get(url + "/ui/job.html?id=%d" % job)
    loaded = wait("return document.body.dataset.loaded")
    check("job page: loads", loaded, driver.find_element("id", "error").text)
    ds = driver.execute_script(
        "const c = Chart.getChart('loss'); return c.data.datasets.map(d => "
        "({label: d.label, n: d.data.length, xs: d.data.map(p => p.x), steps: d.data.map(p => p.step)}))")
    labels = [d["label"] for d in ds]
    check("job page: the loss chart has one series per attempt (1 and 2)",
          labels == ["attempt 1", "attempt 2"], labels)
    want = cases["steps"]
    got = {d["label"].split()[-1]: d["n"] for d in ds}
    check("job page: the loss chart holds every metric point of both attempts",
          got == want, "chart %s, store %s" % (got, want))
    marks = driver.execute_script(
        "return Chart.getChart('loss').options.plugins.dtmarks.marks.map(m => ({kind: m.kind, x: m.x, label: m.label}))")
    kinds = [m["kind"] for m in marks]
    check("job page: failure, detection, restart and resume are marked on the chart",
          all(k in kinds for k in ("failure", "detection", "restart", "resume")), marks)
    fail_x = [m["x"] for m in marks if m["kind"] == "failure"]
    a1_last = max(ds[0]["xs"]) if ds and ds[0]["xs"] else None
    a2_first = min(ds[1]["xs"]) if len(ds) > 1 and ds[1]["xs"] else None
    check("job page: the failure mark lies after attempt 1's points and before attempt 2's",
          fail_x and a1_last is not None and a2_first is not None and a1_last <= fail_x[0] + 1 and fail_x[0] < a2_first,
          "a1 last %s, failure %s, a2 first %s" % (a1_last, fail_x, a2_first))
    check("job page: the failure mark names the cause",
          any("trainer_exit" in m["label"] for m in marks if m["kind"] == "failure"), marks)
    parts = driver.execute_script(
        "return [...document.querySelectorAll('#goodput > div')].map(d => "
        "({k: d.dataset.part, s: +d.dataset.seconds, w: parseFloat(d.style.width)}))")
    bd, wall = cases["report"]["breakdown"], cases["report"]["wall_s"]
    bad = [p for p in parts if abs(p["s"] - bd.get(p["k"], 0)) > 1e-9
           or abs(p["w"] - 100 * bd.get(p["k"], 0) / wall) > 0.01]
    check("job page: the goodput bar's parts match the report's breakdown (seconds and widths)",
          parts and not bad and {p["k"] for p in parts} == set(bd), bad or parts)
    check("job page: ETTR as in the report",
          ("ETTR %.1f%%" % (100 * cases["report"]["ettr"])) in driver.find_element("id", "ettr").text,
          driver.find_element("id", "ettr").text)
    att_rows = driver.execute_script("return [...document.querySelectorAll('#attempts tbody tr')].map(r => r.innerText)")
    check("job page: the attempts table has both attempts, attempt 1's cause",
          len(att_rows) == 2 and "trainer_exit" in att_rows[0], att_rows)
    mfu = driver.execute_script("return [...document.querySelectorAll('#attempts tbody td[data-mfu]')]"
                                ".map(d => [d.dataset.mfu, d.textContent])")
    check("job page: the attempts table shows each attempt's MFU as the API has it",
          len(mfu) == 2 and all(abs(float(m[0]) - cases["mfu"][i]) < 1e-9 and
                                m[1] == "%.2f%%" % (100 * cases["mfu"][i]) for i, m in enumerate(mfu)), mfu)
    ck = driver.execute_script("return document.querySelectorAll('#checkpoints tbody tr').length")
    check("job page: the checkpoints are listed", ck >= 1, ck)
    rk = driver.execute_script("return Chart.getChart('ranks').data.labels.length")
    check("job page: the per-rank chart has a bar per rank", rk == 2, rk)
    # rank 0 computes 3 times slower (--inject-slow 0:3): the straggler stands out
    sl = driver.execute_script("const c = Chart.getChart('ranks');"
                               "return {labels: c.data.labels, colors: c.data.datasets[0].backgroundColor}")
    check("job page: the per-rank chart marks the slow rank 0 as the straggler, in red",
          "straggler" in sl["labels"][0] and "straggler" not in sl["labels"][1] and
          sl["colors"][0] == "#d62728" and sl["colors"][1] != "#d62728", sl)
    cs = driver.execute_script("return Chart.getChart('commshare').data.datasets.map(d => d.data.length)")
    check("job page: the communication share is plotted", cs and sum(cs) > 0, cs)
    errs = console_errors()
    check("job page: no JavaScript errors in the console", not errs, errs)
    if os.environ.get("DT_UI_SCREENSHOTS"):  # a look at the page, for people
        driver.save_screenshot(os.path.join(os.environ["DT_UI_SCREENSHOTS"], "job.png"))

    driver.get(url + "/ui/nodes.html")
    n = wait("return document.querySelectorAll('#nodes tbody tr').length")
    check("nodes page: lists the nodes", n and n >= 2, n)
    sus = cases["suspect"]
    row = wait("const r = document.querySelector('#nodes tr[data-node=\"%s\"]'); return r ? r.innerText : null" % sus)
    check("nodes page: %s shows as suspect" % sus, row and "suspect" in row, row)
    hist = wait("const h = document.getElementById('suspects').innerText; return h.includes('%s: why it is suspect') ? h : null" % sus)
    check("nodes page: the history behind the suspect state of %s" % sus,
          hist and "marked suspect by uid 0" in hist, hist)
    errs = console_errors()
    check("nodes page: no JavaScript errors in the console", not errs, errs)

    # ---- privacy: dtbob's link does not show root's or dtalice's job ------------
    fresh("/ui/", cases["bob"])
    who = wait("const w = document.getElementById('who').textContent; return w || null")
    check("dtbob's link reads as dtbob", who and cases["bob_name"] in who, who)
    time.sleep(1.5)
    rows = driver.execute_script("return [...document.querySelectorAll('#jobs tbody tr')].map(x => +x.dataset.job)")
    check("dtbob's link: the jobs list shows neither root's nor dtalice's job (PrivateData=jobs)",
          job not in rows and cases["alice_job"] not in rows, rows)
    driver.get(url + "/ui/job.html?id=%d" % job)
    err = wait("const e = document.getElementById('error'); return e.style.display == 'block' ? e.textContent : null")
    check("dtbob's link: root's job page says 404, and draws nothing",
          err and "404" in err and not driver.execute_script("return Chart.getChart('loss') ? 1 : 0"), err)
    fresh("/ui/job.html?id=%d" % cases["alice_job"], cases["alice"])
    loaded = wait("return document.body.dataset.loaded")
    check("dtalice's link: her own job's page loads", loaded, driver.find_element("id", "error").text)
    mfu = driver.execute_script("return [...document.querySelectorAll('#attempts tbody td[data-mfu]')]"
                                ".map(d => [d.dataset.mfu, d.textContent])")
    check("dtalice's job page: no MFU (her trainer reports no FLOPs)", mfu == [["", "-"]], mfu)

    # ---- an expired link ----------------------------------------------------------
    fresh("/ui/", cases["expired"])
    err = wait("const e = document.getElementById('error'); return e.style.display == 'block' ? e.textContent : null")
    check("an expired link: the page says it expired and how to get a new one",
          err and "expired" in err and "dtctl ui" in err, err)
    rows = driver.execute_script("return document.querySelectorAll('#jobs tbody tr').length")
    check("an expired link: no job is shown", rows == 0, rows)
finally:
    driver.quit()
sys.exit(0 if all(r.startswith("ok") for r in results) else 1)
