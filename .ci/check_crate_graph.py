#!/usr/bin/env python3
"""Fails if a workspace crate depends on an internal crate the layering does not allow.

The allowed edges are the table of spec section 3 plus the managed-object crates of
AMENDMENTS A4. Every crate may also depend on `oxidelake-workspace-hack`, which holds no
code: it only names third-party dependencies with the features the whole workspace
uses (see .ci/check_feature_unification.py), and depends on no workspace crate. Reads
`cargo metadata`, so it checks what Cargo will actually build.
"""
import json
import subprocess
import sys

ALLOWED = {
    "oxidelake-core": set(),
    "oxidelake-memory": {"oxidelake-core"},
    "oxidelake-device": {"oxidelake-core", "oxidelake-memory"},
    "oxidelake-compute": {"oxidelake-core", "oxidelake-memory", "oxidelake-device"},
    "oxidelake-storage": {"oxidelake-core", "oxidelake-memory"},
    "oxidelake-planner": {"oxidelake-core", "oxidelake-compute"},
    "oxidelake-tui": {"oxidelake-core"},
    "oxidelake-runtime": {
        "oxidelake-core", "oxidelake-memory", "oxidelake-device", "oxidelake-compute",
        "oxidelake-storage", "oxidelake-planner", "oxidelake-tui",
    },
    # The SDK only through the `python` feature: the Python package offers LakeClient
    # beside Session (docs/python.md; a deviation from spec section 3 noted in STATUS.md).
    "oxidelake-api": {"oxidelake-runtime", "oxidelake-sdk"},
    "oxidelake-objects": {"oxidelake-core"},
    "oxidelake-catalog": {"oxidelake-core"},
    "oxidelake-sdk": {"oxidelake-core", "oxidelake-objects", "oxidelake-catalog", "oxidelake-runtime"},
    # The binaries (ADR-0011): `oxide insert` links the SDK, which depends on the runtime.
    "oxidelake-cli": {
        "oxidelake-core", "oxidelake-device", "oxidelake-storage", "oxidelake-runtime",
        "oxidelake-sdk", "oxidelake-objects",
    },
    "oxidelake-workspace-hack": set(),
}
HACK = "oxidelake-workspace-hack"
for crate, allowed in ALLOWED.items():
    if crate != HACK:
        allowed.add(HACK)


def main() -> int:
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"]))
    members = {p["name"]: p for p in meta["packages"]}
    errors = []
    for name in sorted(members):
        if name not in ALLOWED:
            errors.append(f"{name}: not in the layering table (add it to .ci/check_crate_graph.py)")
            continue
        for dep in members[name]["dependencies"]:
            target = dep["name"]
            if target in members and target not in ALLOWED[name]:
                kind = dep.get("kind") or "normal"
                errors.append(f"{name} -> {target} ({kind}) is not an allowed edge")
    for name in sorted(set(ALLOWED) - set(members)):
        errors.append(f"{name}: listed in the layering table but not a workspace member")
    if errors:
        print("crate graph check FAILED:")
        for e in errors:
            print("  " + e)
        return 1
    edges = sum(1 for p in members.values() for d in p["dependencies"] if d["name"] in members)
    print(f"crate graph check: {len(members)} crates, {edges} internal edges, all allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
