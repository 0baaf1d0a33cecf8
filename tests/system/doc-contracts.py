#!/usr/bin/env python3
"""doc-contracts.py: what the code emits against what the documents say.

    doc-contracts.py CHECK SRCDIR BUILDDIR

CHECK is one of:
  conf-keys   every key of config_keys[] (orchestrator/ctldconf.c) has its
              entry in dtctld.conf(5) and a line in the example config
  trainer-env every variable the agent sets for a rank (agent/ranks.c) is
              in the TRAINER ENVIRONMENT section of dtctl(1)
  causes      every cause the controller records is in the CAUSES section
              of dtctl-job(5) and in the Cause enum of schemas/openapi.json
  events      every event kind the controller records is in dtctl-job(5)
              (EVENTS, or CAUSES: a failure's event kind is its cause) and
              in the Event kind enum of schemas/openapi.json
  cites       every file a code comment names exists in the tree (or is a
              system header, a generated file a Makefile.am names, or a
              file the programs write: a string literal of the code)

Each missing item is printed on its own line; exit 0 when none, 1 when
some, 2 on usage errors.

How the code is read (an emission site of another form must follow one of
these, or be added here):
  causes:  the cause argument of jobs_attempt_fail() and attempt_stop();
           the words cause_of_launcher_end() (jobs/detect.c) and the
           Slurm launcher's cause_of() (slurm_watch.c) pass through, less
           the launcher's own "completed", "failed" and "lost" that the
           former maps; jobs_signal()'s planned ends; the job-level give-up
           verdicts of ft_verdict_name() (ftpolicy.c) less "restart" and
           "max_restarts" (that failure carries the attempt's cause);
           literal words written into a row's cause
  events:  the kind argument of store_event() and jobs_note(), the kind of
           a struct note_arg initializer, and every attempt's cause (the
           failure's event; the give-up verdicts are no event kind)
"""
import glob
import json
import os
import re
import subprocess
import sys


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def no_comments(s):
    return re.sub(r"/\*.*?\*/", " ", s, flags=re.S)


def split_args(text):
    """Top-level comma-separated arguments of a call's argument text."""
    args, depth, cur, instr = [], 0, "", False
    i = 0
    while i < len(text):
        c = text[i]
        if instr:
            cur += c
            if c == "\\":
                cur += text[i + 1]
                i += 1
            elif c == '"':
                instr = False
        elif c == '"':
            instr = True
            cur += c
        elif c in "([{":
            depth += 1
            cur += c
        elif c in ")]}":
            depth -= 1
            cur += c
        elif c == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    args.append(cur.strip())
    return args


def call_args(src, name):
    """The argument lists of every call of 'name' in src."""
    out = []
    for m in re.finditer(r"\b" + name + r"\s*\(", src):
        i, depth = m.end(), 1
        start = i
        instr = False
        while i < len(src) and depth:
            c = src[i]
            if instr:
                if c == "\\":
                    i += 1
                elif c == '"':
                    instr = False
            elif c == '"':
                instr = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            i += 1
        out.append(split_args(src[start:i - 1]))
    return out


def literal(arg):
    m = re.fullmatch(r'"([a-z_]+)"', arg)
    return m.group(1) if m else None


def function_body(src, name):
    m = re.search(r"\b" + name + r"\s*\([^;{]*\)\s*\{", src)
    if not m:
        return ""
    i, depth = m.end(), 1
    while i < len(src) and depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return src[m.end():i]


def sources(srcdir):
    files = sorted(glob.glob(os.path.join(srcdir, "orchestrator", "*.c"))
                   + glob.glob(os.path.join(srcdir, "orchestrator", "jobs", "*.c")))
    return {f: no_comments(read(f)) for f in files}


def code_causes(srcdir, job_level=True):
    src = sources(srcdir)
    causes = set()
    for s in src.values():
        for name in ("jobs_attempt_fail", "attempt_stop"):
            for a in call_args(s, name):
                if len(a) > 2 and literal(a[2]):
                    causes.add(literal(a[2]))
        for m in re.finditer(r"snprintf\s*\(\s*\w+->row\.cause\s*,[^;]*?\"([a-z_]+)\"\s*\)", s):
            causes.add(m.group(1))
    d = src.get(os.path.join(srcdir, "orchestrator", "jobs", "detect.c"), "")
    for m in re.finditer(r'\?\s*"([a-z_]+)"\s*:\s*"([a-z_]+)"', function_body(d, "jobs_signal")):
        causes |= {m.group(1), m.group(2)}
    launcher = set(re.findall(r'return\s+"([a-z_]+)"', function_body(d, "cause_of_launcher_end")))
    w = src.get(os.path.join(srcdir, "orchestrator", "slurm_watch.c"), "")
    launcher |= set(re.findall(r'"([a-z_]+)"', function_body(w, "cause_of")))
    causes |= launcher - {"completed", "failed", "lost"}
    if job_level:
        f = src.get(os.path.join(srcdir, "orchestrator", "ftpolicy.c"), "")
        causes |= set(re.findall(r'return\s+"([a-z_]+)"', function_body(f, "ft_verdict_name"))) \
            - {"restart", "max_restarts"}
    causes.discard("")
    return causes


def code_events(srcdir):
    src = sources(srcdir)
    kinds = set()
    for s in src.values():
        for a in call_args(s, "store_event"):
            if len(a) > 4 and literal(a[4]):
                kinds.add(literal(a[4]))
        for a in call_args(s, "jobs_note"):
            if len(a) > 2 and literal(a[2]):
                kinds.add(literal(a[2]))
        kinds |= set(re.findall(r'struct\s+note_arg\s+\w+\s*=\s*\{\s*"([a-z_]+)"', s))
    return kinds | code_causes(srcdir, job_level=False)


def man_section(page, title):
    """The troff text of section 'title' (up to the next .SH)."""
    s = read(page)
    m = re.search(r'^\.SH "?' + re.escape(title) + r'"?\n(.*?)(?=^\.SH |\Z)', s, re.S | re.M)
    return m.group(1) if m else ""


def openapi_enum(srcdir, *path):
    node = json.load(open(os.path.join(srcdir, "schemas", "openapi.json")))
    for p in path:
        node = node.get(p, {}) if isinstance(node, dict) else {}
    return set(node) if isinstance(node, list) else set()


def check_conf_keys(srcdir, builddir):
    s = no_comments(read(os.path.join(srcdir, "orchestrator", "ctldconf.c")))
    m = re.search(r"config_keys\[\]\s*=\s*\{(.*?)\};", s, re.S)
    keys = re.findall(r'"([A-Za-z]+)"', m.group(1)) if m else []
    if not keys:
        return ["config_keys[] not found in orchestrator/ctldconf.c"]
    page = read(os.path.join(builddir, "man", "dtctld.conf.5"))
    example = read(os.path.join(builddir, "config", "dtctld.conf.example"))
    bad = []
    for k in keys:
        if not re.search(r"^\.BI? " + k + "=", page, re.M):
            bad.append("%s: no entry in dtctld.conf(5)" % k)
        if not re.search(r"^#?" + k + "=", example, re.M):
            bad.append("%s: not in config/dtctld.conf.example" % k)
    return bad


def check_trainer_env(srcdir, builddir):
    s = no_comments(read(os.path.join(srcdir, "agent", "ranks.c")))
    names = set(re.findall(r'\bsetenv(?:_int)?\s*\(\s*"([A-Z_][A-Z0-9_]*)"', s))
    if not names:
        return ["no setenv in agent/ranks.c"]
    sect = man_section(os.path.join(builddir, "man", "dtctl.1"), "TRAINER ENVIRONMENT")
    if not sect:
        return ["dtctl(1) has no TRAINER ENVIRONMENT section"]
    words = set(re.findall(r"[A-Z_][A-Z0-9_]+", sect))
    return ["%s: set by the agent, not in dtctl(1) TRAINER ENVIRONMENT" % n
            for n in sorted(names - words)]


def check_causes(srcdir, builddir):
    causes = code_causes(srcdir)
    sect = man_section(os.path.join(builddir, "man", "dtctl-job.5"), "CAUSES")
    tags = set(re.findall(r"^\.TP\n\.BR? ([a-z_]+)", sect, re.M))
    enum = openapi_enum(srcdir, "components", "schemas", "Cause", "enum")
    bad = ["%s: not in dtctl-job(5) CAUSES" % c for c in sorted(causes - tags)]
    bad += ["%s: not in the Cause enum of schemas/openapi.json" % c for c in sorted(causes - enum)]
    return bad


def check_events(srcdir, builddir):
    kinds = code_events(srcdir)
    page = os.path.join(builddir, "man", "dtctl-job.5")
    text = man_section(page, "EVENTS") + man_section(page, "CAUSES")
    tags = set()
    for line in re.findall(r"^\.TP\n\.BR? (.*)$", text, re.M):
        tags |= set(re.findall(r"[a-z_]+", line.replace('", "', " ")))
    enum = openapi_enum(srcdir, "components", "schemas", "Event", "properties", "kind", "enum")
    bad = ["%s: not in dtctl-job(5) EVENTS" % k for k in sorted(kinds - tags)]
    bad += ["%s: not in the Event kind enum of schemas/openapi.json" % k
            for k in sorted(kinds - enum)]
    return bad


def check_cites(srcdir, builddir):
    files = subprocess.run(["git", "-C", srcdir, "ls-files"], capture_output=True,
                           text=True).stdout.split()
    if not files:      # a release tarball: no git; every file is in the tree
        files = [os.path.relpath(os.path.join(d, f), srcdir)
                 for d, _, fs in os.walk(srcdir) for f in fs]
    tree = set(files)
    code = [f for f in files if re.search(r"\.(c|h|cc|cu)$", f)]
    literals = set()
    makefiles = ""
    for f in files:
        if f.endswith("Makefile.am"):
            makefiles += read(os.path.join(srcdir, f))
    for f in code:
        literals |= set(re.findall(r'"([A-Za-z0-9_.-]+)"', no_comments(read(os.path.join(srcdir, f)))))
    tok = re.compile(r"(?<![\w/.*-])([A-Za-z0-9_][A-Za-z0-9_./-]*\."
                     r"(?:c|h|cc|md|json|sql|sh|py|am|ac|m4|t|in))\b")
    bad = []
    for f in code:
        s = read(os.path.join(srcdir, f))
        for m in re.finditer(r"/\*.*?\*/|//[^\n]*", s, flags=re.S):
            for t in tok.findall(m.group(0)):
                if (t in tree or os.path.normpath(os.path.join(os.path.dirname(f), t)) in tree
                        or any(n.endswith("/" + t) for n in tree)
                        or os.path.basename(t) in literals
                        or re.search(r"(^|\s)" + re.escape(t) + r"\s*:", makefiles, re.M)
                        or glob.glob("/usr/include/" + t) or glob.glob("/usr/include/*/" + t)):
                    continue
                bad.append("%s: a comment cites %s, which is not in the tree" % (f, t))
    return sorted(set(bad))


CHECKS = {
    "conf-keys": check_conf_keys,
    "trainer-env": check_trainer_env,
    "causes": check_causes,
    "events": check_events,
    "cites": check_cites,
}


def main(argv):
    if len(argv) != 4 or argv[1] not in CHECKS:
        sys.stderr.write(__doc__)
        return 2
    bad = CHECKS[argv[1]](argv[2], argv[3])
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
