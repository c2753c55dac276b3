"""The floor of `uwf workflow show NAME` without msgspec (bench/show.py runs it).

    python bench/showfloor.py STORE NAME

Not uwf: a measuring stick. It does what a msgspec-free read of a registered
workflow would have to do at the least, on a folder store whose views are current,
with only the standard library, xxhash and uwf's own pure hashing module
(`uwf.cas.hashing`: re, struct, xxhash): look for a config file (a redactor would
mask the output) and for the workflow's file in the repo (either would send the
command down the ordinary path), read the log's last line and its digest, open
the views read-only and compare every checkpoint row with the log's head and every
signature with the one wanted (here: the store's own, read back), read the name's
row, read the node file, check the store's hash rule, hash the node, check its type,
and print what `uwf workflow show` prints (`json.dumps(indent=2,
ensure_ascii=False)`: the spelling uwf's JSON output keeps). Exit 3 when any check
fails: the ordinary path would then run. bench/show.py checks that the output is
byte for byte uwf's.
"""

from __future__ import annotations

import os
import sys

REPO_FOLDERS = (".workflows", ".workflow")
REPO_LAYOUTS = ("{name}.yaml", "{name}.yml", "{name}/index.yaml", "{name}/index.yml")
WORKFLOW_TYPE = "31YTRWH1Z3EGC"  # builtin_hash("Workflow"), baked as a fast path would


def main(root: str, name: str) -> int:
    import json
    import sqlite3
    from _sha256 import sha256  # type: ignore[import-not-found]  # CPython's own

    from uwf.cas.hashing import node_hash

    environ = os.environ
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME", "/"),
                                                            ".config")
    if os.path.exists(os.path.join(config, "uwf", "config.yaml")):
        return 3
    here = os.getcwd()
    while True:  # the working folder and each parent up to the repo's top
        for kept in REPO_FOLDERS:
            for layout in REPO_LAYOUTS:
                if os.path.exists(os.path.join(here, kept, layout.format(name=name))):
                    return 3
        if os.path.exists(os.path.join(here, ".git")) or os.path.dirname(here) == here:
            break
        here = os.path.dirname(here)
    events = os.path.join(root, "events")
    last = max(entry for entry in os.listdir(events) if entry.endswith(".jsonl"))
    with open(os.path.join(events, last), "rb") as segment:
        size = segment.seek(0, os.SEEK_END)
        segment.seek(max(0, size - 65536))
        tail = segment.read()
    if not tail.endswith(b"\n"):
        return 3  # a torn tail: the ordinary path repairs it
    line = tail[:-1].rsplit(b"\n", 1)[-1]
    head = (json.loads(line)["seq"], sha256(line).hexdigest()[:32])
    db = sqlite3.connect(f"file:{os.path.join(root, 'views', 'views.sqlite3')}?mode=ro",
                         uri=True)
    rows = db.execute("SELECT name, signature, seq, digest FROM checkpoints").fetchall()
    wanted = {row[0]: row[1] for row in rows}  # a fast path would bake these
    for view, signature, seq, digest in rows:
        if signature != wanted[view] or (seq is not None and (seq, digest) != head):
            return 3
    found = db.execute("SELECT value FROM v_workflows WHERE key = ?", (name,)).fetchone()
    db.close()
    if found is None:
        return 3
    node_name = json.loads(found[0])["hash"]
    with open(os.path.join(root, "cas", "hash-rule"), encoding="utf-8") as rule:
        if rule.read().strip() != "json-cas":
            return 3
    with open(os.path.join(root, "cas", node_name[:2], node_name + ".json"), "rb") as file:
        node = json.loads(file.read())
    if node["type"] != WORKFLOW_TYPE or node_hash(node["type"], node["payload"]) != node_name:
        return 3
    shown = {"workflow": node_name, "name": node["payload"]["name"],
             "definition": node["payload"]}
    sys.stdout.write(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
