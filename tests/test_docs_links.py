"""The docs point at files that exist: every relative Markdown link, and every path of a script,
test or page they name, in README.md, CHANGELOG.md, docs/ (the journal included) and the READMEs
under scripts/. A moved or renamed file must take its mentions with it."""

import re

from helpers import ROOT

PAGES = sorted({ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md"),
                *(ROOT / "scripts").rglob("README.md")})
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# A path from the checkout's root, as the docs write it: `scripts/studies/calibrate.py`, docs/SLURM.md, ...
PATH = re.compile(r"(?<![\w./-])((?:scripts|docs|tests)/[\w./-]*\w\.(?:py|sh|md|png))")


def links(text: str) -> list[str]:
    """The relative link targets of a Markdown text, anchors dropped (web links left out)."""
    out = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def test_the_parsers_find_links_and_paths():
    text = ("See [a](docs/A.md#x), ![f](figures/f.png), [w](https://x.org/a.md), "
            "[s](#top); run `scripts/x/run.sh` or docs/B.md.")
    assert links(text) == ["docs/A.md", "figures/f.png"]
    assert PATH.findall(text) == ["docs/A.md", "scripts/x/run.sh", "docs/B.md"]
    assert len(PAGES) > 10 and ROOT / "docs" / "journal" / "benchmark-runs.md" in PAGES


def test_every_relative_link_points_at_a_file():
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in PAGES for target in links(page.read_text())
              if not (page.parent / target).exists()]
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def test_every_named_script_test_and_page_exists():
    missing = sorted({f"{page.relative_to(ROOT)}: {path}" for page in PAGES for path in PATH.findall(page.read_text())
                      if not (ROOT / path).exists()})
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)
