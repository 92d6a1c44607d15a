"""The embedding-capture patch against real SGLang source from PyPI wheels (cached)."""

from __future__ import annotations

import ast
import hashlib
import py_compile
import shutil
import subprocess
import sys

import pytest

from eagle3lab.wiring import patching
from eagle3lab.wiring.patching import APPLIED, NATIVE, NEEDS_PATCH, PatchError

# (version, llama state, deepseek state, deepseek forward needs the None guard) - read in source.
VERSIONS = {
    "0.5.5": (NEEDS_PATCH, NEEDS_PATCH, True),    # both +1, both unguarded
    "0.5.9": (NEEDS_PATCH, NEEDS_PATCH, True),
    "0.5.13": (NEEDS_PATCH, NEEDS_PATCH, True),   # deepseek: ids[0]==1 rule + unguarded
    "0.5.18": (NEEDS_PATCH, NEEDS_PATCH, False),  # deepseek captures in the communicator
    "0.5.21": (NEEDS_PATCH, NEEDS_PATCH, False),
    "0.5.23": (NATIVE, NEEDS_PATCH, False),       # llama: layer-boundary capture
}
N = 32


@pytest.fixture(scope="session")
def wheel_sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sglang-src")
    return {v: patching.unpack_sglang_source(v, root / v) for v in VERSIONS}


@pytest.fixture(params=list(VERSIONS))
def tree(request, wheel_sources, tmp_path):
    """A fresh copy of one version's sglang/ package directory."""
    dest = tmp_path / "pkg" / "sglang"
    shutil.copytree(wheel_sources[request.param], dest)
    return request.param, dest


def snapshot(root):
    """Every path in the tree (directories too) with its bytes' hash."""
    return {p.relative_to(root): p.is_dir() or hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


def capture_block(path):
    """The ``if i in self.layers_to_capture:`` statement of the forward loop, as source."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and isinstance(node.test.ops[0], ast.In)
                and ast.unparse(node.test.comparators[0]) == "self.layers_to_capture"
                and "aux_hidden_states.append" in ast.unparse(node)):
            return ast.unparse(node)
    raise AssertionError(f"no capture block in {path}")


def run_capture(block, i, hidden, residual):
    self = type("M", (), {"layers_to_capture": [i], "enable_a2a_moe": False,
                          "first_k_dense_replace": 0})()
    scope = {"self": self, "i": i, "hidden_states": hidden, "residual": residual,
             "aux_hidden_states": []}
    exec(block, scope)
    return scope["aux_hidden_states"]


def test_check_reports_the_expected_state_per_version(tree):
    version, root = tree
    plan = patching.check(root)
    assert plan.version == version and plan.ok and not plan.applied
    assert [f.state for f in plan.files] == list(VERSIONS[version][:2])


def test_apply_compiles_and_captures_the_embedding_for_id_minus_one(tree, tmp_path):
    version, root = tree
    before = {m: [patching.layers_to_capture(root, m, ids, N) for ids in ([1, 15, 28], [2, 16, 29], [0, 5, 9])]
              for m in patching.TARGET_FILES}
    plan = patching.apply(root)
    assert plan.applied and all(f.state in (APPLIED, NATIVE) for f in plan.files)
    for rel in patching.TARGET_FILES.values():
        py_compile.compile(str(root / rel), cfile=str(tmp_path / "x.pyc"), doraise=True)
    # llama: the +1 rule for every id, -1 -> boundary 0 (the embedding).
    assert patching.layers_to_capture(root, "llama", [-1, 2, 30], N) == [0, 3, 31]
    # deepseek: -1 -> 0; the other ids keep the version's rule (the seed's fix ids).
    assert patching.layers_to_capture(root, "deepseek_v2", [-1, 1, 15], N) == [0, 2, 16]
    # Ids without -1 behave exactly as before the patch.
    after = {m: [patching.layers_to_capture(root, m, ids, N) for ids in ([1, 15, 28], [2, 16, 29], [0, 5, 9])]
             for m in patching.TARGET_FILES}
    assert after == before


def test_patched_forward_captures_the_embedding_before_layer_zero(tree, wheel_sources):
    version, root = tree
    files = {"llama": VERSIONS[version][0] == NEEDS_PATCH, "deepseek_v2": VERSIONS[version][2]}
    patching.apply(root)
    for model, guarded in files.items():
        path = root / patching.TARGET_FILES[model]
        if not guarded:  # the capture lives elsewhere (layer boundary/communicator): untouched
            assert "residual is not None else hidden_states" not in path.read_text()
            continue
        original = capture_block(wheel_sources[version] / patching.TARGET_FILES[model])
        patched = capture_block(path)
        assert run_capture(patched, 3, 10, 5) == [15]  # later layers: hidden + residual, as before
        with pytest.raises(TypeError):  # stock code: residual is None before layer 0
            run_capture(original, 0, 10, None)
        assert run_capture(patched, 0, 10, None) == [10]  # the embedding output


def test_apply_is_idempotent_and_revert_is_byte_identical(tree):
    version, root = tree
    pristine = snapshot(root)
    patching.apply(root)
    patched = snapshot(root)
    assert patched != pristine
    stamps = {p: p.stat().st_mtime_ns for p in root.rglob("*.py")}
    assert patching.apply(root).applied
    assert snapshot(root) == patched
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*.py")} == stamps  # nothing rewritten
    patching.revert(root)
    assert snapshot(root) == pristine  # same files, same bytes: no backups left behind
    assert not list(root.parent.rglob(".eagle3lab-*"))
    patching.revert(root)  # reverting an unpatched tree changes nothing
    assert snapshot(root) == pristine


def test_diff_shows_the_patch_before_and_after_applying(tree):
    version, root = tree
    text = patching.diff(root)
    assert "+++ b/sglang/srt/models/deepseek_v2.py" in text and patching.MARKER in text
    patching.apply(root)
    assert patching.diff(root) == text


def test_unknown_shape_is_refused_and_nothing_is_written(tree):
    version, root = tree
    deepseek = root / patching.TARGET_FILES["deepseek_v2"]
    deepseek.write_text(deepseek.read_text().replace(
        "def set_eagle3_layers_to_capture(self, layer_ids: Optional[List[int]] = None):",
        "def set_eagle3_layers_to_capture(self, layer_ids: Optional[List[int]] = None):\n"
        "        self.model.layers_to_capture = sorted(layer_ids or [])", 1))
    pristine = snapshot(root)
    assert not patching.check(root).ok
    with pytest.raises(PatchError, match="shape this patch does not know"):
        patching.apply(root)
    assert snapshot(root) == pristine  # llama.py was patchable, yet untouched: all or nothing


def test_revert_refuses_when_the_patched_file_was_edited(tree):
    version, root = tree
    patching.apply(root)
    deepseek = root / patching.TARGET_FILES["deepseek_v2"]
    deepseek.write_text(deepseek.read_text() + "# local edit\n")
    edited = snapshot(root)
    with pytest.raises(PatchError, match="byte-identical"):
        patching.revert(root)
    assert snapshot(root) == edited


def test_a_failed_write_leaves_every_file_as_it_was(wheel_sources, tmp_path, monkeypatch):
    root = tmp_path / "sglang"
    shutil.copytree(wheel_sources["0.5.13"], root)
    pristine = snapshot(root)
    real_write = patching._atomic_write
    calls = []

    def flaky(path, data):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        real_write(path, data)

    monkeypatch.setattr(patching, "_atomic_write", flaky)
    with pytest.raises(OSError):
        patching.apply(root)
    assert snapshot(root) == pristine and len(calls) == 3  # 2 writes + 1 roll-back


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "eagle3lab", "patch", "sglang", *args],
                          capture_output=True, text=True)


def test_cli_check_apply_revert(wheel_sources, tmp_path):
    root = tmp_path / "sglang"
    shutil.copytree(wheel_sources["0.5.21"], root)
    pristine = snapshot(root)
    out = run_cli("--check", "--sglang-dir", str(root))
    assert out.returncode == 0 and "patch applies" in out.stdout
    out = run_cli("--apply", "--sglang-dir", str(root), "--diff")
    assert out.returncode == 0 and "+++ b/sglang/srt/models/llama.py" in out.stdout
    out = run_cli("--check", "--sglang-dir", str(root))
    assert out.returncode == 0 and "patch applied" in out.stdout
    assert run_cli("--revert", "--sglang-dir", str(root)).returncode == 0
    assert snapshot(root) == pristine
    # A shape it does not know: --check exits 1, --apply refuses in one line (exit 2).
    llama = root / patching.TARGET_FILES["llama"]
    llama.write_text(llama.read_text().replace("[val + 1 for val in layer_ids]", "[val for val in layer_ids]"))
    assert run_cli("--check", "--sglang-dir", str(root)).returncode == 1
    out = run_cli("--apply", "--sglang-dir", str(root))
    assert out.returncode == 2 and "Traceback" not in out.stderr and "nothing written" in out.stderr
    assert run_cli("--check", "--sglang-dir", str(tmp_path / "nowhere")).returncode == 2


def test_the_post_release_the_accept_rate_allows_keeps_the_wiring_files_of_its_minor_release():
    """The index's table of ids reads minor releases; its caption says 0.5.10.post1 (the newest release
    whose accept rate matches the incident's log) reads as 0.5.10. Both wheels, from PyPI: the files that
    decide what the draft is fed are byte for byte the same."""
    import zipfile

    from eagle3lab.report.postmortem.known_box import POST_SAME, WIRING_FILES

    files = {}
    for version in POST_SAME:
        with zipfile.ZipFile(patching.sglang_wheel(version)) as wheel:
            files[version] = [wheel.read(f"sglang/{name}") for name in WIRING_FILES]
    post, minor = POST_SAME
    assert all(a == b for a, b in zip(files[post], files[minor])), WIRING_FILES
    assert all(b"set_eagle3_layers_to_capture" in blob for blob in files[minor][::2])  # the setter and its caller
