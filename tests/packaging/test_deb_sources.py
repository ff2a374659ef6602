"""The Debian packaging's sources, without building: the changelog scripts/deb.sh writes from
VERSION and CHANGELOG.md, and the agent's manual page against the agent. No root, no build
(tests/packaging/test_deb.py builds, installs, upgrades and purges the packages)."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import REPO

CHANGELOG_SCRIPT = os.path.join(REPO, "scripts", "deb-changelog.sh")
CONTROL = os.path.join(REPO, "debian", "control")


def changelog(version: str, notes: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", CHANGELOG_SCRIPT, version, notes, CONTROL],
                          text=True, capture_output=True, timeout=30)


def parsed(text: str) -> dict[str, str]:
    """dpkg-parsechangelog's fields of a changelog given as text: dpkg's own reading of it."""
    res = subprocess.run(["dpkg-parsechangelog", "-l-"], input=text, text=True, capture_output=True, timeout=30)
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    fields, key = {}, None
    for line in res.stdout.splitlines():
        if line.startswith(" ") and key:
            fields[key] += "\n" + line
        else:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def test_the_changelog_carries_VERSION_and_its_entry():
    """Rule (one version in one place; Debian policy 4.4): debian/changelog is written from VERSION
    and CHANGELOG.md's entry for it, dpkg reads it without a complaint, its version is VERSION's,
    its date the entry's, its maintainer debian/control's, and no line of it is longer than 80
    columns (lintian's limit) but the trailer."""
    with open(os.path.join(REPO, "VERSION")) as f:
        version = f.read().strip()
    res = changelog(version, os.path.join(REPO, "CHANGELOG.md"))
    assert res.returncode == 0, res.stderr
    fields = parsed(res.stdout)
    assert fields["Version"] == version and fields["Source"] == "ckcd-coex"
    with open(CONTROL) as f:
        assert fields["Maintainer"] == re.search(r"^Maintainer: (.*)$", f.read(), re.M).group(1)
    with open(os.path.join(REPO, "CHANGELOG.md")) as f:
        heading = next(line for line in f if line.startswith(f"## {version} "))
    day = re.findall(r"\d{4}-\d{2}-\d{2}", heading)[-1]
    iso = subprocess.run(["date", "-u", "-d", fields["Date"], "+%F %T"], text=True, capture_output=True).stdout
    assert iso.strip() == f"{day} 00:00:00", fields["Date"]
    long = [line for line in res.stdout.splitlines() if len(line) > 80 and not line.startswith(" -- ")]
    assert long == []


def test_the_entrys_items_all_reach_the_changelog(tmp_path):
    """Rule (the notes are written once): every "- " item and "### " heading of the entry is in
    the Debian changelog, word for word, and the next entry's are not."""
    notes = tmp_path / "CHANGELOG.md"
    notes.write_text("# Changelog\n\n## 1.2.3 — 2026-01-02\n\n### Added\n- One item that runs\n  over two lines.\n"
                     "- Another.\n\n### Fixed\n- A fix.\n\n## 1.2.2 — 2026-01-01\n\n- Not this one.\n")
    res = changelog("1.2.3", str(notes))
    assert res.returncode == 0, res.stderr
    changes = parsed(res.stdout)["Changes"]
    words = " ".join(changes.replace("\n .", " ").split())
    assert "* Added: - One item that runs over two lines. - Another. * Fixed: - A fix." in words, changes
    assert "Not this one" not in changes


def test_a_version_without_an_entry_is_refused(tmp_path):
    """Rule (a release is documented): a VERSION with no "## VERSION" entry in CHANGELOG.md gives no
    changelog; the script says why and fails, so `make deb` fails."""
    notes = tmp_path / "CHANGELOG.md"
    notes.write_text("# Changelog\n\n## 1.0.0 — 2026-01-01\n\n- First.\n")
    res = changelog("1.0.1", str(notes))
    assert res.returncode != 0 and res.stdout == ""
    assert 'no "## 1.0.1" entry' in res.stderr, res.stderr


def test_the_manual_page_names_every_option_of_the_agent():
    """Rule (Debian policy 12.1, a manual page per program): ckcd-qdisc-agent(8) documents each
    option the agent's argument loop accepts, and each environment variable it reads."""
    with open(os.path.join(REPO, "datapath", "kernel", "ckcd-qdisc-agent")) as f:
        agent = f.read()
    loop = agent[agent.index("while [ $# -gt 0 ]"):agent.index("done", agent.index("while [ $# -gt 0 ]"))]
    options = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)(?=[|)])", loop))
    assert {"--db", "--interval", "--once", "--help", "-h"} <= options, options
    environment = set(re.findall(r"\$\{(\w+):-", agent)) - {"DB"}
    assert {"TC", "CKCD_QDISC_AGENT_STATE"} <= environment, environment
    with open(os.path.join(REPO, "debian", "ckcd-qdisc-agent.8")) as f:
        page = f.read().replace("\\-", "-")
    # The tag line after each .TP names the option(s) it describes.
    tagged = set(re.findall(r"--?[a-z][a-z-]*", " ".join(re.findall(r"^\.TP\n(.*)$", page, re.M))))
    assert options <= tagged, options - tagged
    assert all(re.search(rf"^\.B {name}$", page, re.M) for name in environment | {"TC_LIB_DIR"})
