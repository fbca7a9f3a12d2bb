#!/usr/bin/env python3
"""Turns `swift-api-digester -dump-sdk` output (JSON) into the public interface of one module as text: one line per
public declaration, its full signature as the compiler mangles it (demangled: parameter labels and types, generic
constraints, `throws(…)`, `async`, `static`, `mutating`), then what the mangling leaves out (which parameters have a
default, attributes such as `@discardableResult` or `@available`, a variable's accessors, a type's conformances and
superclass). Lines are sorted, so the text is stable from build to build and a diff of two of them reads as the
change to the API.

    scripts/api-surface.py DUMP.json > api/Module.txt

The digester also lists `package` declarations (`isInternal`) and `@_spi` ones (`spi_group_names`), which a user's
package cannot reach: they are left out.
"""
import json
import subprocess
import sys

# Attributes that say nothing about what a user may write (storage, optimiser hints).
IGNORED_ATTRIBUTES = {"HasStorage", "HasInitialValue", "Semantics", "EagerMove", "AddressableForDependencies",
                      "Implements"}
# Conformances every type gets from the compiler; a toolchain may add more of them.
IGNORED_CONFORMANCES = {"Copyable", "Escapable", "SendableMetatype", "BitwiseCopyable"}
TYPE_KINDS = {"TypeNominal", "TypeFunc", "TypeNameAlias", "TypeAlias"}


def declarations(node):
    """Every declaration below `node`, depth first (imports left out: they are not API)."""
    for child in node.get("children", []):
        if child.get("kind") in TYPE_KINDS and child.get("declKind") is None:
            continue
        if child.get("declKind") == "Import":
            continue
        if child.get("declKind") is not None:
            yield child
        yield from declarations(child)


def details(node):
    """What the mangled name does not say."""
    notes = []
    defaults = [str(i) for i, child in enumerate(node.get("children", [])[1:], start=1)
                if child.get("hasDefaultArg")]
    if defaults:
        notes.append("default arguments " + ",".join(defaults))
    attributes = sorted(set(node.get("declAttributes", [])) - IGNORED_ATTRIBUTES)
    if attributes:
        notes.append("@" + " @".join(attributes))
    accessors = sorted(a.get("accessorKind", a.get("name", "")) for a in node.get("accessors", [])
                       if not a.get("isInternal") and not a.get("spi_group_names"))
    if accessors:
        notes.append("{ " + " ".join(accessors) + " }")
    conformances = sorted(c["printedName"] for c in node.get("conformances", [])
                          if c["printedName"] not in IGNORED_CONFORMANCES)
    if conformances:
        notes.append(": " + ", ".join(conformances))
    if node.get("superclassNames"):
        notes.append("superclass " + node["superclassNames"][0])
    if node.get("implicit"):
        notes.append("implicit")
    return notes


def own_conformances(node, module):
    """The conformances `module` adds to another module's type."""
    prefix = f"s:{len(module)}{module}"
    return [c for c in node.get("conformances", []) if c.get("usr", "").startswith(prefix)]


def main(path):
    root = json.load(open(path))["ABIRoot"]
    module = root_module(root)
    nodes = []
    for node in declarations(root):
        if not node.get("mangledName"):
            continue
        if node.get("isExternal") and node.get("declKind") in ("Struct", "Enum", "Class", "Protocol"):
            # Another module's type that this one extends: only the conformances this module adds are its API
            # (its members are kept one by one, below).
            node = dict(node, conformances=own_conformances(node, module))
            if node["conformances"]:
                nodes.append(node)
            continue
        if not node.get("isInternal") and not node.get("spi_group_names"):
            nodes.append(node)
    demangler = subprocess.run(["swift", "demangle"], input="\n".join(n["mangledName"] for n in nodes),
                               capture_output=True, text=True, check=True)
    names = demangler.stdout.splitlines()
    if len(names) != len(nodes):
        sys.exit(f"api-surface: swift demangle gave {len(names)} lines for {len(nodes)} names")
    lines = set()
    for node, name in zip(nodes, names):
        kind = node["declKind"].lower()
        lines.add(" ".join([kind, name] + [f"[{note}]" for note in details(node)]))
    print("\n".join(sorted(lines)))


def root_module(root):
    for node in declarations(root):
        if not node.get("isExternal") and node.get("moduleName"):
            return node["moduleName"]
    return ""


if __name__ == "__main__":
    main(sys.argv[1])
