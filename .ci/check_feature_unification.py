#!/usr/bin/env python3
"""Checks that building any one workspace member (`cargo run -p X`, `cargo build -p X`)
resolves every third-party dependency with the features `cargo test --workspace` gives
it, so the two share compiled artifacts and a newcomer's first command does not make the
second rebuild arrow, DataFusion and everything above them.

`oxidelake-workspace-hack` (managed by cargo-hakari, see docs/development.md) is what
makes this hold; this check is how CI knows the hack is current without installing
cargo-hakari. It compares `cargo tree` feature sets, so it resolves but compiles nothing.
"""

import json
import re
import subprocess
import sys

ENTRY = re.compile(r"^(\S+ v\S+)(?: \([^)]*\))* \[(.*)\]$")


def features(args):
    """Package -> union of its enabled features, for one cargo tree selection."""
    out = subprocess.run(
        ["cargo", "tree", "--prefix", "none", "-f", "{p} [{f}]", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        line = line.replace(" (*)", "").strip()
        m = ENTRY.match(line)
        if m:
            found.setdefault(m.group(1), set()).update(f for f in m.group(2).split(",") if f)
    return found


def members():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    return sorted(p["name"] for p in meta["packages"])


def main():
    workspace = features(["--workspace", "-e", "normal,build,dev"])
    local = {m for m in members()}
    problems = []
    for member in sorted(local):
        alone = features(["-p", member, "-e", "normal,build"])
        for package, enabled in sorted(alone.items()):
            if package.split(" ")[0] in local:
                continue
            missing = workspace.get(package, set()) - enabled
            if missing:
                problems.append(f"{member}: {package} lacks {sorted(missing)}")
    if problems:
        print("built alone, these members resolve dependencies with fewer features than")
        print("the workspace's tests, so they compile them a second time:")
        print("\n".join(problems))
        print("regenerate the hack: cargo hakari generate && cargo hakari manage-deps")
        return 1
    print(f"{len(local)} members: every dependency has the workspace's features when built alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
