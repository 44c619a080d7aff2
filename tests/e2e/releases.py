"""The previous release for the mixed-version test: which tag it is, and its files exported from git.

A release is an annotated tag ``v<major>.<minor>.<patch>`` (``CHANGELOG.md`` has a section of the same
name). The previous release is the newest such tag in the history of ``HEAD``, or the tag or commit named
by ``MUSTER_PREVIOUS_RELEASE``. Its tree is exported with ``git archive`` (no worktree registered in the
repository, so a test killed half-way leaves nothing in ``.git`` behind) into a directory the caller
removes.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

#: the checkout the tests run from (the new release's tree)
REPO = Path(__file__).resolve().parents[2]
#: names the tag or commit to run as the previous release instead of the newest release tag
RELEASE_ENV = "MUSTER_PREVIOUS_RELEASE"
RELEASE_TAG = re.compile(r"^v\d+\.\d+\.\d+$")
GIT_TIMEOUT_S = 60.0


class NoRelease(Exception):
    """No previous release can be had here; the message says why and what to do."""


def _git(repo: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise NoRelease("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise NoRelease(f"git {' '.join(args)} took longer than {timeout:g}s") from None


def _release_tags(repo: Path) -> list[str]:
    """Release tags in HEAD's history, newest version first."""
    listed = _git(repo, "tag", "--list", "v*", "--merged", "HEAD", "--sort=-v:refname")
    if listed.returncode != 0:
        return []
    return [t for t in listed.stdout.decode().split() if RELEASE_TAG.match(t)]


def _commit_of(repo: Path, ref: str) -> str | None:
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode != 0:
        return None
    return found.stdout.decode().strip() or None


def _fetch_tags(repo: Path) -> None:
    """One ``git fetch --tags`` from the clone's remote (a shallow or tagless clone); failures are ignored,
    the caller looks again and says what is missing."""
    _git(repo, "fetch", "--tags", "--quiet")


def previous_release(repo: Path = REPO) -> tuple[str, str]:
    """The previous release as (name, commit): ``MUSTER_PREVIOUS_RELEASE`` when set, else the newest release
    tag in HEAD's history. When it is not in the clone, tags are fetched once; ``NoRelease`` says why not."""
    checkout = _git(repo, "rev-parse", "--git-dir")
    if checkout.returncode != 0:
        said = checkout.stderr.decode(errors="replace").strip().splitlines()
        raise NoRelease(f"{repo} is not a git checkout git can read ({said[0] if said else 'no reason given'}): "
                        "the previous release cannot be exported")
    wanted = os.environ.get(RELEASE_ENV)
    if wanted:
        commit = _commit_of(repo, wanted)
        if commit is None:
            _fetch_tags(repo)
            commit = _commit_of(repo, wanted)
        if commit is None:
            raise NoRelease(f"{RELEASE_ENV}={wanted} names no commit of this clone (even after git fetch --tags)")
        return wanted, commit
    tags = _release_tags(repo)
    if not tags:
        _fetch_tags(repo)
        tags = _release_tags(repo)
    if not tags:
        shallow = _git(repo, "rev-parse", "--is-shallow-repository").stdout.decode().strip() == "true"
        hint = ("this is a shallow clone: fetch its history (git fetch --unshallow --tags)" if shallow
                else "cut one (see docs/releases.md), or fetch the repository's tags")
        raise NoRelease(f"no release tag v<major>.<minor>.<patch> in HEAD's history, even after git fetch --tags; "
                        f"{hint}, or name one with {RELEASE_ENV}")
    commit = _commit_of(repo, tags[0])
    if commit is None:  # listed a moment ago
        raise NoRelease(f"tag {tags[0]} names no commit")
    return tags[0], commit


def export_tree(commit: str, dest: Path, repo: Path = REPO) -> Path:
    """Write the files of ``commit`` into ``dest`` (``git archive``); returns ``dest``."""
    archived = _git(repo, "archive", "--format=tar", commit, timeout=120.0)
    if archived.returncode != 0:
        raise NoRelease(f"git archive {commit} failed: {archived.stderr.decode(errors='replace').strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def tree_environment(tree: Path) -> dict[str, str]:
    """Environment under which this interpreter imports Muster from ``tree`` alone: the tree first on the
    path, and not the working directory (``python -m`` would otherwise put it first, and that is where the
    tests run: the new tree). The virtualenv's installed packages are the same for both trees."""
    return {"PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}


def imported_from(tree: Path) -> Path:
    """Where a child process started with ``tree_environment(tree)`` imports ``services`` from (a check that
    the two trees really run apart)."""
    shown = subprocess.run([sys.executable, "-c", "import services; print(services.__file__)"],
                           env={**os.environ, **tree_environment(tree)}, capture_output=True, check=True,
                           timeout=60)
    return Path(shown.stdout.decode().strip()).resolve().parent.parent
