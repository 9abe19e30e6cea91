#!/usr/bin/env python3
"""Every module a target imports is one it declares, and every dependency it declares is imported.

SwiftPM's --explicit-target-dependency-import-check catches imports between targets of this package; products
of other packages slip through it, so this compares each target's `import` lines with `swift package
dump-package`. Exits 1 listing each mismatch. Usage: scripts/check-imports.py (from anywhere in the repository).
"""
import json, os, re, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
env = dict(os.environ, PACKAGER_BENCHMARKS="1")  # the benchmark targets too
manifest = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=root, env=env, check=True, capture_output=True).stdout)
# Modules of the toolchain and the system, which no manifest declares.
system = {"Foundation", "FoundationNetworking", "FoundationEssentials", "Dispatch", "Glibc", "Musl", "Darwin", "Testing", "XCTest",
          "Synchronization", "_StringProcessing"}
pattern = re.compile(r"^\s*(?:@testable\s+)?(?:@preconcurrency\s+)?(?:internal\s+|package\s+|public\s+|private\s+|fileprivate\s+)?import\s+(?:struct\s+|class\s+|enum\s+|func\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)
problems = []
for target in manifest["targets"]:
    if target["type"] == "system":
        continue
    name = target["name"]
    path = target.get("path") or os.path.join("Tests" if target["type"] == "test" else "Sources", name)
    declared = set()
    for dependency in target["dependencies"]:
        for kind in ("byName", "product", "target"):
            if kind in dependency:
                declared.add(dependency[kind][0])
    imported = set()
    for folder, _, files in os.walk(os.path.join(root, path)):
        for file in files:
            if file.endswith(".swift"):
                with open(os.path.join(folder, file), encoding="utf-8") as handle:
                    imported.update(pattern.findall(handle.read()))
    module_name = name.replace("-", "_")
    # Lowercase names are Python's, from scripts inside Swift string literals; Swift modules are capitalized here.
    imported = {module for module in imported if module[0].isupper()}
    for module in sorted(imported - declared - system - {module_name}):
        problems.append(f"{name}: imports {module} but does not declare it")
    for module in sorted(declared - imported):
        problems.append(f"{name}: declares {module} but never imports it")
for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)
