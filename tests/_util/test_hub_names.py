"""A Hub repo id that cannot be one is refused before anything is uploaded, by name: through the
Python API as on the command line (where it is a usage error), never read as a network problem."""

import pytest

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval._util.hub import check_repo_id
from finreflect_eval.data import push_dataset
from finreflect_eval.view import push_report

BAD = ["my space", "org/name/extra", "-org/name", "org/" + "n" * 97, ""]


@pytest.mark.parametrize("repo_id", BAD)
def test_a_malformed_repo_id_is_refused_naming_it(repo_id):
    with pytest.raises(FinReflectError, match="is not a Hub repo id") as raised:
        check_repo_id(repo_id, "--push")
    assert str(raised.value).startswith(f"--push: {repo_id!r}") and "\n" not in str(raised.value)


@pytest.mark.parametrize("push", [push_report, push_dataset])
def test_the_python_api_checks_the_repo_id_before_the_folder_and_the_network(push, tmp_path):
    with pytest.raises(FinReflectError, match=r"^repo_id: 'my space' is not a Hub repo id"):
        push(tmp_path, "my space")


def test_a_well_formed_repo_id_passes():
    assert check_repo_id("acme/kg-7b.v2", "--push") == "acme/kg-7b.v2"
