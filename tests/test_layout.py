"""How the checkout is laid out (issue #49, loose ends): a function that several modules need is
defined once and imported (two definitions drift apart); the scripts import kanx as installed
and change no import path; the Makefile declares as phony exactly the targets it defines. Read
from the files (ast), so it runs in the fast tier."""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from helpers import ROOT

SOURCES = [p for d in ("kanx", "hydra_plugins", "scripts") for p in sorted((ROOT / d).rglob("*.py"))]
# Defined once each: a run's training curve read back, beta as one number, the runs a sweep expects.
ONCE = ("read_history", "canonical_beta", "expected_grid")


def definitions(names) -> dict[str, list[str]]:
    """'path:line' of every function (at any depth) named one of ``names`` in kanx, hydra_plugins and scripts."""
    found = defaultdict(list)
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
                found[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_shared_functions_are_defined_once():
    found = definitions(ONCE)
    assert {name: len(found[name]) for name in ONCE} == dict.fromkeys(ONCE, 1), dict(found)


def test_the_makefile_phony_list_names_exactly_its_targets():
    text = (ROOT / "Makefile").read_text()
    phony = set(re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE).group(1).split())
    targets = set(re.findall(r"^([a-z][a-z-]*):", text, re.MULTILINE))
    assert phony == targets, (f"phony but not defined: {sorted(phony - targets)}; defined but not phony: "
                              f"{sorted(targets - phony)}")


def path_changes(tree: ast.AST) -> list[int]:
    """The lines that touch the import path: sys.path (insert, append, assigned, ...) or site.addsitedir."""
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name)
                  and (node.value.id, node.attr) in (("sys", "path"), ("site", "addsitedir")))


def test_the_parser_finds_import_path_changes():
    assert path_changes(ast.parse("import sys\nx = 1\nsys.path.insert(0, 'a')\n"
                                  "site.addsitedir('b')\nprint(sys.argv)")) == [3, 4]


def test_no_script_changes_the_import_path():
    """Scripts run as `python scripts/x.py` from the checkout's root import the installed kanx
    (`make install`, editable); one that puts the checkout on sys.path itself hides a missing install."""
    found = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "scripts").rglob("*.py"))
             if (lines := path_changes(ast.parse(p.read_text())))}
    assert not found, found
