#!/usr/bin/env python3
"""The include-order check: every #include in heapscope's own sources goes to its own layer or to one the
layer depends on (directly or through others), never into another layer's private folders, and no two
folders include each other, directly or round a cycle. The layers are the build's (layers.json, written by
cmake/layers.cmake). docs/architecture.md's layer table must name the same layers, folders and direct
dependencies in the same order.

    check_layers.py SOURCE_DIR LAYERS_JSON
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def load_layers(path):
    layers = json.load(open(path))["layers"]
    by_name = {layer["name"]: layer for layer in layers}
    for layer in layers:
        for dep in layer["depends"]:
            if dep not in by_name:
                sys.exit(f"layers.json: layer {layer['name']} depends on unknown layer {dep}")
    return layers, by_name


def reachable(by_name, name):
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(by_name[n]["depends"])
    return seen


def folder_of(source_dir, including_folder, include):
    """The folder (relative to the source root) an include names, or None for a header not ours."""
    for base in (including_folder, "engine", ""):
        candidate = os.path.normpath(os.path.join(base, include))
        if os.path.isfile(os.path.join(source_dir, candidate)):
            return os.path.dirname(candidate)
    return None


def find_cycle(edges):
    """A cycle in a {folder: {folder}} graph as a list, or None."""
    state = {}

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def check_docs(source_dir, layers):
    """docs/architecture.md's table: | layer | folders | depends on | … in the build's order."""
    text = open(os.path.join(source_dir, "docs", "architecture.md")).read()
    rows = []
    in_table = False
    for line in text.splitlines():
        if line.startswith("| layer | folders | depends on |"):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set(cells[0]) <= set("-: "):
                continue
            rows.append(cells)
    problems = []
    if not rows:
        return ["docs/architecture.md has no '| layer | folders | depends on |' table"]
    names = [r[0].strip("`") for r in rows]
    if names != [layer["name"] for layer in layers]:
        problems.append(f"docs/architecture.md lists the layers {names}, the build {[l['name'] for l in layers]}")
    for row, layer in zip(rows, layers):
        folders = re.findall(r"`([^`]+)`", row[1])
        want = [f + "/" for f in layer["folders"]] + [f + "/ (private)" for f in layer["private_folders"]]
        if sorted(folders) != sorted(want):
            problems.append(f"docs/architecture.md: layer {layer['name']} folders {folders}, build {want}")
        deps = re.findall(r"`([^`]+)`", row[2])
        if sorted(deps) != sorted(layer["depends"]):
            problems.append(f"docs/architecture.md: layer {layer['name']} depends on {deps}, build {layer['depends']}")
    return problems


def main():
    source_dir, layers_json = sys.argv[1], sys.argv[2]
    layers, by_name = load_layers(layers_json)
    layer_of, private = {}, set()
    for layer in layers:
        for folder in layer["folders"]:
            layer_of[folder] = layer["name"]
        for folder in layer["private_folders"]:
            layer_of[folder] = layer["name"]
            private.add(folder)
    allowed = {layer["name"]: reachable(by_name, layer["name"]) for layer in layers}

    problems, edges, checked = [], {}, 0
    for folder in sorted(layer_of):
        path = os.path.join(source_dir, folder)
        for name in sorted(os.listdir(path)):
            if not name.endswith((".h", ".cpp", ".c")):
                continue
            checked += 1
            rel = os.path.join(folder, name)
            for number, line in enumerate(open(os.path.join(path, name), errors="replace"), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = folder_of(source_dir, folder, m.group(1))
                if target is None or target == folder:
                    continue
                where = f"{rel}:{number}: #include \"{m.group(1)}\""
                if target not in layer_of:
                    problems.append(f"{where}: {target}/ belongs to no layer")
                    continue
                own, theirs = layer_of[folder], layer_of[target]
                if theirs not in allowed[own]:
                    problems.append(f"{where}: layer {own} may not use layer {theirs}")
                elif target in private and own != theirs:
                    problems.append(f"{where}: {target}/ is private to layer {theirs}")
                edges.setdefault(folder, set()).add(target)
    cycle = find_cycle(edges)
    if cycle:
        problems.append("folders include each other: " + " → ".join(cycle))
    for folder in sorted(set(f for l in layers for f in l["folders"] + l["private_folders"])):
        if not os.path.isdir(os.path.join(source_dir, folder)):
            problems.append(f"layer folder {folder}/ does not exist")
    problems += check_docs(source_dir, layers)
    for p in problems:
        print(p)
    print(f"{checked} files in {len(layer_of)} folders of {len(layers)} layers checked")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
