"""ci/github-actions.yml against GitHub's workflow schema (check-jsonschema's
vendored copy; actionlint has no PyPI wheel and no Debian 12 package), and the
release job's shape: on a tag, after the board matrix, the signing key from
the repository's secrets only."""
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "ci" / "github-actions.yml"
TOOL = shutil.which("check-jsonschema") or (
    str(pathlib.Path(sys.executable).parent / "check-jsonschema")
    if (pathlib.Path(sys.executable).parent / "check-jsonschema").exists() else None)
needs_tool = pytest.mark.skipif(TOOL is None, reason="check-jsonschema is not installed (pip install check-jsonschema)")


def _check(path):
    return subprocess.run([TOOL, "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)


@needs_tool
def test_workflow_passes_the_github_schema(tmp_path):
    r = _check(WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    # the check can fail: a job without runs-on, and a bad trigger, are refused
    wf = yaml.safe_load(WORKFLOW.read_text())
    del wf["jobs"]["release"]["runs-on"]
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump(wf))
    assert _check(bad).returncode != 0


def test_release_job_runs_on_tags_after_the_boards_with_the_key_from_secrets():
    wf = yaml.safe_load(WORKFLOW.read_text())
    on = wf.get("on", wf.get(True))               # YAML 1.1 reads the key `on` as true
    assert "v*" in on["push"]["tags"]
    job = wf["jobs"]["release"]
    assert job["if"].startswith("startsWith(github.ref, 'refs/tags/v')")
    assert "boards" in job["needs"]
    assert job["strategy"]["matrix"]["board"] == wf["jobs"]["boards"]["strategy"]["matrix"]["board"]
    step = next(s for s in job["steps"] if "edgerun release" in s.get("run", ""))
    assert step["env"]["SIGNING_KEY"] == "${{ secrets.EDGERUN_SIGNING_KEY }}"
    assert "mktemp" in step["run"] and "rm -rf" in step["run"]
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and "release-${{ matrix.board }}/" in uploads[0]["with"]["path"]
    # no key in the tree for the workflow to pick up
    text = WORKFLOW.read_text()
    assert "keys/signing-key.pem" not in text.replace("$keys/signing-key.pem", "")
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True).stdout.split()
    assert not [f for f in tracked if f.endswith("-key.pem") or f.endswith("signing-key.pem")]
