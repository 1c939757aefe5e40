"""How the checkout is laid out (issue #49, loose ends): the Makefile declares as phony exactly
the targets it defines. Read from the files, so it runs in the fast tier."""

from __future__ import annotations

import re

from helpers import ROOT


def test_the_makefile_phony_list_names_exactly_its_targets():
    text = (ROOT / "Makefile").read_text()
    phony = set(re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE).group(1).split())
    targets = set(re.findall(r"^([a-z][a-z-]*):", text, re.MULTILINE))
    assert phony == targets, f"phony but not defined: {sorted(phony - targets)}; defined but not phony: {sorted(targets - phony)}"
