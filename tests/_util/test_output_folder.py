"""Folders the user names: what a command that wrote there may replace (its recorded files),
what it keeps (everything else), and where it must refuse (a user's file where it writes)."""

import json
import os

import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.output_folder import (
    Record,
    files_under,
    move_in,
    plan_write,
    read_record,
    remove_files,
    write_record,
)


def make(folder, files):
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def contents(folder):
    return {name: (folder / name).read_bytes() for name in files_under(folder)}


def test_a_record_lists_the_files_written_and_an_older_marker_has_none(tmp_path):
    assert read_record(tmp_path, ".marker") is None
    write_record(tmp_path, ".marker", "finreflect-eval 9.9 view", ["b.js", "a/x.js"])
    data = json.loads((tmp_path / ".marker").read_text())
    assert data == {"written_by": "finreflect-eval 9.9 view", "files": ["a/x.js", "b.js"]}
    assert read_record(tmp_path, ".marker") == Record(
        "finreflect-eval 9.9 view", frozenset({"a/x.js", "b.js"})
    )
    (tmp_path / ".marker").write_text("finreflect-eval 0.0.1 view\n")  # an older version's
    assert read_record(tmp_path, ".marker") == Record("finreflect-eval 0.0.1 view", None)
    (tmp_path / ".marker").unlink()
    (tmp_path / ".marker").symlink_to(tmp_path / "elsewhere")  # a link is nobody's record
    assert read_record(tmp_path, ".marker") is None


def test_files_under_lists_files_and_links_never_following_a_link(tmp_path):
    make(tmp_path / "out", {"b.txt": b"", "a/z.txt": b"", "a/b/c.txt": b""})
    (tmp_path / "out" / "empty").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("x")
    (tmp_path / "out" / "link").symlink_to(tmp_path / "elsewhere")
    assert list(files_under(tmp_path / "out")) == ["b.txt", "link", "a/z.txt", "a/b/c.txt"]
    assert list(files_under(tmp_path / "missing")) == []


def test_a_plan_replaces_its_own_removes_its_stale_and_keeps_the_users(tmp_path):
    make(
        tmp_path,
        {
            "index.html": b"ours",
            "data/t/0.js": b"ours",
            "data/t/1.js": b"ours, of a bigger report",
            "data/mine.txt": b"the user's",
            "notes.md": b"the user's",
        },
    )
    ours = {"index.html", "data/t/0.js", "data/t/1.js", "data/t/2.js"}  # 2.js: gone already
    plan = plan_write(tmp_path, ["index.html", "data/t/0.js", "data/u/0.js"], ours)
    assert plan.replaced == ("index.html", "data/t/0.js")
    assert plan.stale == ("data/t/1.js",)
    assert plan.kept == ("notes.md", "data/mine.txt")
    assert plan.conflicts == ()
    plan.refuse_conflicts(tmp_path, "move it")  # nothing to refuse


@pytest.mark.parametrize(
    ("users", "conflict"),
    [
        ("index.html", "index.html"),  # the file itself
        ("data", "data"),  # a file where the write needs a folder
        ("data/t", "data/t"),
        ("index.html/x", "index.html/x"),  # a folder where the write puts a file
    ],
)
def test_a_users_file_where_the_write_goes_is_a_conflict(tmp_path, users, conflict):
    make(tmp_path, {users: b"the user's"})
    plan = plan_write(tmp_path, ["index.html", "data/t/0.js"], set())
    assert plan.conflicts == (conflict,)
    with pytest.raises(FinReflectError, match=rf"^{tmp_path} holds {conflict}, which .*; move it$"):
        plan.refuse_conflicts(tmp_path, "move it")


def test_a_link_is_never_ours_even_where_recorded(tmp_path):
    (tmp_path / "target.html").write_text("the user's")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "index.html").symlink_to(tmp_path / "target.html")
    plan = plan_write(tmp_path / "out", ["index.html"], {"index.html"})
    assert plan.conflicts == ("index.html",) and plan.replaced == ()


def test_move_in_replaces_ours_removes_the_stale_and_keeps_the_users(tmp_path):
    """A write into a folder of the user's (the current folder, say): the folder itself stays,
    ours are replaced and the stale removed, the user's files, links and empty folders stay."""
    output = tmp_path / "out"
    make(output, {"index.html": b"old", "data/t/1.js": b"stale", "notes.md": b"mine"})
    make(output, {"data/mine.txt": b"mine too", "extra/page.html": b"<p>mine</p>"})
    write_record(output, ".marker", "an older write", ["index.html", "data/t/1.js"])
    os.symlink("notes.md", output / "link.md")
    (output / "extra" / "empty").mkdir()
    inode = output.stat().st_ino
    staging = output / ".marker.1234.staging"
    make(staging, {"index.html": b"new", "data/t/0.js": b"new"})
    write_record(staging, ".marker", "this write", ["index.html", "data/t/0.js"])
    plan = plan_write(output, list(files_under(staging)), read_record(output, ".marker").files)
    move_in(staging, output, plan, ".marker")
    assert output.stat().st_ino == inode and not staging.exists()
    assert contents(output) == {
        ".marker": (output / ".marker").read_bytes(),
        "index.html": b"new",
        "link.md": b"mine",
        "notes.md": b"mine",
        "data/mine.txt": b"mine too",
        "data/t/0.js": b"new",
        "extra/page.html": b"<p>mine</p>",
    }
    assert read_record(output, ".marker").files == {"data/t/0.js", "index.html"}
    assert os.readlink(output / "link.md") == "notes.md"  # still a link, to the same name
    assert (output / "extra" / "empty").is_dir()


def test_remove_files_prunes_only_the_folders_it_empties(tmp_path):
    make(tmp_path, {"reports/a/r/index.html": b"", "reports/a/r/data/0.js": b"", "keep.md": b""})
    (tmp_path / "reports" / "users-empty").mkdir()
    remove_files(tmp_path, ["reports/a/r/index.html", "reports/a/r/data/0.js", "gone.js"])
    assert not (tmp_path / "reports" / "a").exists()
    assert (tmp_path / "reports" / "users-empty").is_dir() and (tmp_path / "keep.md").exists()
    remove_files(tmp_path / "reports", [])
    assert (tmp_path / "reports").is_dir()  # never the folder itself
