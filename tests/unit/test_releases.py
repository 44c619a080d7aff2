"""Which release the mixed-version test runs beside this tree, and how it gets its files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.releases import RELEASE_ENV, NoRelease, export_tree, previous_release

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True,
                          env={**os.environ, **GIT_ENV})
    return done.stdout.decode().strip()


def commit(repo: Path, text: str) -> str:
    (repo / "file.txt").write_text(text, encoding="utf-8")
    git(repo, "add", "file.txt")
    git(repo, "commit", "-q", "-m", text)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(RELEASE_ENV, raising=False)
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path


def test_the_newest_release_tag_in_heads_history_by_version(repo: Path) -> None:
    first = commit(repo, "one")
    git(repo, "tag", "-a", "v0.9.0", "-m", "0.9.0")
    second = commit(repo, "two")
    git(repo, "tag", "-a", "v0.10.0", "-m", "0.10.0")  # newer than v0.9.0 by version, not by text
    git(repo, "tag", "v0.11.0-rc1")  # not a release
    commit(repo, "three")
    git(repo, "checkout", "-q", "-b", "side", first)
    commit(repo, "elsewhere")
    git(repo, "tag", "-a", "v0.12.0", "-m", "not in main's history")
    git(repo, "checkout", "-q", "main")

    assert previous_release(repo) == ("v0.10.0", second)
    git(repo, "checkout", "-q", "--detach", first)
    assert previous_release(repo) == ("v0.9.0", first)


def test_a_named_release_wins_and_must_exist(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = commit(repo, "one")
    git(repo, "tag", "-a", "v0.1.0", "-m", "0.1.0")
    commit(repo, "two")
    monkeypatch.setenv(RELEASE_ENV, "HEAD~1")
    assert previous_release(repo) == ("HEAD~1", first)
    monkeypatch.setenv(RELEASE_ENV, "v7.7.7")
    with pytest.raises(NoRelease, match=r"v7\.7\.7"):
        previous_release(repo)


def test_a_clone_without_tags_fetches_them_once(repo: Path, tmp_path: Path) -> None:
    tagged = commit(repo, "one")
    git(repo, "tag", "-a", "v0.1.0", "-m", "0.1.0")
    commit(repo, "two")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-tags", str(repo), str(clone)], check=True, capture_output=True)
    assert git(clone, "tag", "--list") == ""
    assert previous_release(clone) == ("v0.1.0", tagged)

    git(clone, "tag", "-d", "v0.1.0")
    git(clone, "remote", "remove", "origin")
    with pytest.raises(NoRelease, match="no release tag"):
        previous_release(clone)


def test_no_checkout_no_release(tmp_path: Path) -> None:
    with pytest.raises(NoRelease, match="not a git checkout"):
        previous_release(tmp_path)


def test_the_release_tree_is_exported_with_its_files_only(repo: Path, tmp_path: Path) -> None:
    released = commit(repo, "as released")
    commit(repo, "changed since")
    (repo / "untracked.txt").write_text("not in any commit", encoding="utf-8")
    tree = export_tree(released, tmp_path / "tree", repo)
    assert sorted(p.name for p in tree.iterdir()) == ["file.txt"]
    assert (tree / "file.txt").read_text(encoding="utf-8") == "as released"
