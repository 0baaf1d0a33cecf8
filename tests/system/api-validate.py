#!/usr/bin/env python3
"""api-validate.py: check one answer of dtctld against schemas/openapi.json.

    api-validate.py OPENAPI METHOD PATH STATUS BODYFILE
    api-validate.py --serve OPENAPI FIFO OUTFILE   (requests on a named pipe)

PATH may carry a query string (ignored).  The operation is found by
matching PATH against the description's path templates; the answer's
schema is that of STATUS (else "default").  Validation is strict: an
object schema that lists its properties and says nothing of others
accepts no others, so a field the controller returns but the description
lacks is an error, as is a wrong type or a value outside an enum.

Exit status: 0 valid, 1 invalid (the reasons on stderr, one per line),
2 usage or an answer the description has no place for, 77 when Python's
jsonschema module is missing (Debian: python3-jsonschema).
"""
import json
import os
import re
import sys
import warnings

try:
    import jsonschema
except ImportError:
    sys.stderr.write("api-validate: python3-jsonschema is not installed\n")
    sys.exit(77)

warnings.simplefilter("ignore", DeprecationWarning)


def strict(node):
    """Close every object schema that lists its properties."""
    if isinstance(node, dict):
        if ("properties" in node and "additionalProperties" not in node
                and "patternProperties" not in node):
            node["additionalProperties"] = False
        for v in node.values():
            strict(v)
    elif isinstance(node, list):
        for v in node:
            strict(v)
    return node


def merge_allof(doc, node):
    """An allOf of object schemas as one schema, so that closing it (strict)
    closes the union of their properties rather than each part."""
    if isinstance(node, dict):
        for k in list(node):
            node[k] = merge_allof(doc, node[k])
        parts = node.get("allOf")
        if parts and len(parts) > 1:
            parts = [deref(doc, p) for p in parts]
            if all(isinstance(p, dict) and "properties" in p for p in parts):
                merged = {k: v for k, v in node.items() if k != "allOf"}
                merged.setdefault("type", "object")
                merged["properties"] = {}
                merged["required"] = []
                for p in parts:
                    merged["properties"].update(p["properties"])
                    merged["required"] += [r for r in p.get("required", [])
                                           if r not in merged["required"]]
                return merged
    elif isinstance(node, list):
        return [merge_allof(doc, v) for v in node]
    return node


def deref(doc, node):
    while isinstance(node, dict) and "$ref" in node and len(node) == 1:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise KeyError(ref)
        node = doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def find_operation(doc, method, path):
    path = path.split("?", 1)[0]
    for tmpl, item in doc["paths"].items():
        rx = "^" + re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(tmpl)) + "$"
        if re.match(rx, path) and method.lower() in item:
            return tmpl, item[method.lower()]
    return None, None


def load(spec_path):
    """The description, its allOf merged and its objects closed, and a
    resolver that also knows its neighbours (job.schema.json)."""
    with open(spec_path) as f:
        doc = json.load(f)
    doc = strict(merge_allof(doc, doc))
    store = {}
    base = os.path.dirname(os.path.abspath(spec_path))
    for name in os.listdir(base):
        if name.endswith(".schema.json"):
            with open(os.path.join(base, name)) as f:
                sub = strict(json.load(f))
            store[name] = store["/" + name] = sub
            if "$id" in sub:
                store[sub["$id"]] = sub
    return doc, jsonschema.RefResolver.from_schema(doc, store=store)


def check(doc, resolver, method, path, status, raw, cache):
    """Reasons the answer does not match (empty: it does), and an exit code."""
    tmpl, op = find_operation(doc, method, path)
    if not op:
        return ["%s %s: no such operation in the description" % (method, path)], 2
    responses = op.get("responses", {})
    resp = responses.get(status) or responses.get("default")
    if resp is None:
        return ["%s %s: status %s is not described (%s)"
                % (method, tmpl, status, ", ".join(sorted(responses)))], 1
    content = deref(doc, resp).get("content", {})
    media = next((m for m in content if "json" in m), None)
    if media is None or content[media].get("schema") is None:
        return [], 0                # text (e.g. /metrics): nothing to check here
    try:
        body = json.loads(raw)
    except ValueError as e:
        return ["%s %s %s: not JSON: %s" % (method, tmpl, status, e)], 1
    key = (method, tmpl, status)
    if key not in cache:
        cls = getattr(jsonschema, "Draft202012Validator", None) or jsonschema.Draft7Validator
        cache[key] = cls(content[media]["schema"], resolver=resolver)
    errors = sorted(cache[key].iter_errors(body), key=lambda e: list(e.absolute_path))
    out = []
    for e in errors[:20]:
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        out.append("%s %s %s: %s: %s" % (method, tmpl, status, where, e.message[:300]))
    return out, 1 if errors else 0


def serve(spec_path, fifo, out_path):
    """Lines "METHOD PATH STATUS BODYFILE" written to the named pipe fifo
    (opened here for reading and writing, so that writers come and go
    without an end of file), until a line "STOP": each answer is checked
    (and its file removed); mismatches go to out_path."""
    doc, resolver = load(spec_path)
    cache = {}
    with open(os.open(fifo, os.O_RDWR), "r") as pipe:
        for line in pipe:
            parts = line.split()
            if parts == ["STOP"]:
                break
            if len(parts) != 4:
                continue
            method, path, status, body_path = parts
            try:
                with open(body_path, "rb") as f:
                    raw = f.read()
                os.unlink(body_path)
            except OSError:
                continue
            msgs, rc = check(doc, resolver, method, path, status, raw, cache)
            if rc == 1:
                with open(out_path, "a") as f:
                    f.write("".join(m + "\n" for m in msgs))
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "--serve":
        return serve(argv[2], argv[3], argv[4])
    if len(argv) != 6:
        sys.stderr.write(__doc__)
        return 2
    spec_path, method, path, status, body_path = argv[1:]
    doc, resolver = load(spec_path)
    with open(body_path, "rb") as f:
        raw = f.read()
    msgs, rc = check(doc, resolver, method, path, status, raw, {})
    for m in msgs:
        sys.stderr.write(m + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
