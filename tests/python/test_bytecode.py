"""The worker's bytecode cache: used only where torch's bytecode cannot be cached in place."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import py_compile
import sys

import pytest

from gpuprobe.worker import bytecode


def _package(tmp_path, name="fakepkg"):
    package = tmp_path / name
    (package / "testing" / "_internal").mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "testing" / "_internal" / "common_methods_invocations.py").write_text("op_db = []\n")
    return package


def _compile(source, mode=py_compile.PycInvalidationMode.TIMESTAMP):
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)), invalidation_mode=mode, doraise=True)


@pytest.fixture
def no_prefix(monkeypatch):
    # A test filling a cache says so; the others must not compile this machine's library.
    monkeypatch.setattr(bytecode, "FILL_MIN_CORES", 1 << 20)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    before = os.environ.pop("PYTHONPYCACHEPREFIX", None)
    yield
    # enable_if_needed exports the prefix; it must not reach the other tests' interpreters
    # (monkeypatch.delenv records nothing for a variable that was absent).
    os.environ.pop("PYTHONPYCACHEPREFIX", None)
    if before is not None:
        os.environ["PYTHONPYCACHEPREFIX"] = before


def test_current_bytecode_is_fresh_and_a_changed_source_is_not(tmp_path, no_prefix):
    source = _package(tmp_path) / "__init__.py"
    cached = importlib.util.cache_from_source(str(source))
    assert not bytecode._fresh(str(source), cached)
    _compile(source)
    assert bytecode._fresh(str(source), cached)
    source.write_text("VALUE = 22\n")  # another size
    assert not bytecode._fresh(str(source), cached)


def test_hash_based_bytecode_follows_its_check_mode(tmp_path, no_prefix):
    source = _package(tmp_path) / "__init__.py"
    cached = importlib.util.cache_from_source(str(source))
    _compile(source, py_compile.PycInvalidationMode.CHECKED_HASH)
    assert bytecode._fresh(str(source), cached)
    source.write_text("VALUE = 2\n")
    assert not bytecode._fresh(str(source), cached)
    _compile(source, py_compile.PycInvalidationMode.UNCHECKED_HASH)
    source.write_text("VALUE = 3\n")
    assert bytecode._fresh(str(source), cached)  # Python uses it without looking


def test_bytecode_of_another_interpreter_is_not_fresh(tmp_path, no_prefix):
    source = _package(tmp_path) / "__init__.py"
    cached = importlib.util.cache_from_source(str(source))
    _compile(source)
    data = bytearray(open(cached, "rb").read())
    data[0] ^= 0xFF
    open(cached, "wb").write(bytes(data))
    assert not bytecode._fresh(str(source), cached)


def test_no_problem_when_python_can_write_or_read_in_place(tmp_path, no_prefix, monkeypatch):
    package = _package(tmp_path)
    monkeypatch.setattr(bytecode, "_writable", lambda cached: True)
    assert bytecode.in_place_problem(str(package)) is None
    monkeypatch.setattr(bytecode, "_writable", lambda cached: False)
    _compile(package / "__init__.py")
    _compile(package / "testing" / "_internal" / "common_methods_invocations.py")
    assert bytecode.in_place_problem(str(package)) is None


def test_missing_bytecode_in_an_unwritable_tree_is_a_problem(tmp_path, no_prefix, monkeypatch):
    package = _package(tmp_path)
    _compile(package / "__init__.py")
    monkeypatch.setattr(bytecode, "_writable", lambda cached: False)
    problem = bytecode.in_place_problem(str(package))
    assert problem is not None and "common_methods_invocations.py" in problem and "not writable" in problem


def _fake_torch(monkeypatch, package):
    spec = importlib.machinery.ModuleSpec("torch", None, origin=str(package / "__init__.py"), is_package=True)
    spec.submodule_search_locations = [str(package)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == "torch" else None)


def test_the_prefix_is_set_only_when_in_place_caching_cannot_work(tmp_path, no_prefix, monkeypatch):
    package = _package(tmp_path, "torch")
    _fake_torch(monkeypatch, package)
    cache = tmp_path / "cache"
    monkeypatch.setattr(bytecode, "_writable", lambda cached: True)
    assert bytecode.enable_if_needed(str(cache)) is None
    assert sys.pycache_prefix is None and "PYTHONPYCACHEPREFIX" not in os.environ

    monkeypatch.setattr(bytecode, "_writable", lambda cached: False)
    note = bytecode.enable_if_needed(str(cache))
    assert note is not None and str(cache) in note
    assert sys.pycache_prefix.startswith(str(cache))
    assert os.environ["PYTHONPYCACHEPREFIX"] == sys.pycache_prefix


def test_dont_write_bytecode_keeps_bytecode_out_of_the_tree_not_out_of_the_cache(tmp_path, no_prefix, monkeypatch):
    package = _package(tmp_path, "torch")
    _fake_torch(monkeypatch, package)
    monkeypatch.setattr(bytecode, "_writable", lambda cached: True)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    note = bytecode.enable_if_needed(str(tmp_path / "cache"))
    assert note is not None and "PYTHONDONTWRITEBYTECODE" in note
    assert sys.pycache_prefix.startswith(str(tmp_path / "cache")) and not sys.dont_write_bytecode
    # With current bytecode in place there is nothing to gain: left alone.
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _compile(package / "__init__.py")
    _compile(package / "testing" / "_internal" / "common_methods_invocations.py")
    assert bytecode.enable_if_needed(str(tmp_path / "cache")) is None
    assert sys.dont_write_bytecode


@pytest.mark.parametrize("setting", ["prefix_already", "no_cache_dir"])
def test_the_users_choices_are_left_alone(tmp_path, no_prefix, monkeypatch, setting):
    package = _package(tmp_path, "torch")
    _fake_torch(monkeypatch, package)
    monkeypatch.setattr(bytecode, "_writable", lambda cached: False)
    cache = str(tmp_path / "cache")
    if setting == "prefix_already":
        monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "theirs"))
    else:
        cache = None
    before = sys.pycache_prefix
    assert bytecode.enable_if_needed(cache) is None
    assert sys.pycache_prefix == before


def test_a_missing_torch_changes_nothing(no_prefix, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert bytecode.enable_if_needed("/tmp/unused") is None
    assert sys.pycache_prefix is None


def _tree(tmp_path, name, modules=3):
    package = tmp_path / name
    package.mkdir()
    for index in range(modules):
        (package / f"m{index}.py").write_text(f"VALUE = {index}\n")
    (package / "__init__.py").write_text("")
    return package


def test_an_empty_cache_is_filled_once_and_then_left_alone(tmp_path, no_prefix):
    torch_dir = _tree(tmp_path, "torchlike")
    other = _tree(tmp_path, "otherpkg")
    prefix = tmp_path / "cache"
    note = bytecode.fill_once(str(prefix), str(torch_dir), None, [str(torch_dir), str(other)])
    assert note is not None and "filled it once for all workers: 8 of 8 files current" in note, note
    written = sorted(p.name for p in (prefix / str(tmp_path).lstrip(os.sep)).rglob("*.pyc"))
    assert len(written) == 8, written
    # Nothing beside the sources: the fill writes under the prefix only.
    assert not list(torch_dir.rglob("__pycache__"))
    # The bytecode is what this interpreter reads for each source under that prefix.
    sys.pycache_prefix = str(prefix)
    source = torch_dir / "m1.py"
    assert bytecode._fresh(str(source), importlib.util.cache_from_source(str(source)))
    sys.pycache_prefix = None
    assert bytecode.fill_once(str(prefix), str(torch_dir), None, [str(torch_dir)]) is None


def test_a_reinstalled_torch_gets_a_new_fill(tmp_path, no_prefix):
    torch_dir = _tree(tmp_path, "torchlike")
    prefix = tmp_path / "cache"
    assert bytecode.fill_once(str(prefix), str(torch_dir), None, [str(torch_dir)]) is not None
    (torch_dir / "__init__.py").write_text("# a new release\n")
    assert bytecode.fill_once(str(prefix), str(torch_dir), None, [str(torch_dir)]) is not None


def test_the_standard_library_walk_leaves_out_tests_and_installed_packages(tmp_path, no_prefix):
    stdlib = _tree(tmp_path, "stdlib")
    for skipped in ("test", "site-packages"):
        (stdlib / skipped).mkdir()
        (stdlib / skipped / "big.py").write_text("X = 1\n")
    (stdlib / "json").mkdir()
    (stdlib / "json" / "kept.py").write_text("X = 1\n")
    prefix = tmp_path / "cache"
    note = bytecode.fill_once(str(prefix), str(stdlib), str(stdlib), [])
    assert "5 of 5 files current" in note, note
    # (The fill's own process caches its imports there too: only the tree's files count.)
    mirror = prefix / str(stdlib).lstrip(os.sep)
    assert sorted(p.name.split(".")[0] for p in mirror.rglob("*.pyc")) == ["__init__", "kept", "m0", "m1", "m2"]


def test_the_package_walk_leaves_out_their_tests_and_nothing_else(tmp_path, no_prefix):
    # A package installed below a directory named "tests" is still walked: the patterns
    # apply to the part of a path inside the tree.
    package = _package(tmp_path / "tests" / "site", "pkg")
    for skipped in ("tests", "test", "sub/tests"):
        (package / skipped).mkdir(parents=True)
        (package / skipped / "case.py").write_text("X = 1\n")
    (package / "tests_util.py").write_text("X = 1\n")
    prefix = tmp_path / "cache"
    note = bytecode.fill_once(str(prefix), str(package), "", [str(package)])
    assert "3 of 3 files current" in note, note
    mirror = prefix / str(package).lstrip(os.sep)
    kept = sorted(str(p.relative_to(mirror)).split(".")[0] for p in mirror.rglob("*.pyc"))
    assert kept == ["__init__", "testing/_internal/common_methods_invocations", "tests_util"], kept


def test_the_database_dependencies_are_filled_when_installed(tmp_path, no_prefix):
    stdlib, packages = bytecode.fill_directories(str(_package(tmp_path, "torch")))
    found = {os.path.basename(p) for p in packages}
    for name in ("numpy", "sympy", "scipy", "_pytest", "pluggy"):
        if importlib.util.find_spec(name) is not None:
            assert name in found, (name, packages)
    assert "definitely_not_installed_pkg" not in found


def test_a_worker_waits_for_the_one_filling_the_cache(tmp_path, no_prefix):
    import fcntl
    import threading

    torch_dir = _tree(tmp_path, "torchlike")
    prefix = tmp_path / "cache"
    prefix.mkdir()
    holder = open(prefix / ".fill.lock", "a+b")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    notes = []
    waiter = threading.Thread(
        target=lambda: notes.append(bytecode.fill_once(str(prefix), str(torch_dir), None, [str(torch_dir)]))
    )
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive(), "the second worker must wait while the first fills"
    # The first worker finishes: its stamp is there when the lock is released.
    open(bytecode._fill_stamp(str(prefix), str(torch_dir)), "w").close()
    fcntl.flock(holder.fileno(), fcntl.LOCK_UN)
    holder.close()
    waiter.join(10)
    assert notes and notes[0].startswith("waited"), notes
    assert not list(prefix.rglob("*.pyc")), "the waiting worker compiles nothing itself"


def test_few_cores_compile_only_what_each_worker_imports(tmp_path, no_prefix, monkeypatch):
    package = _package(tmp_path)
    monkeypatch.setattr(bytecode, "in_place_problem", lambda _: "no bytecode")
    _fake_torch(monkeypatch, package)
    calls = []
    monkeypatch.setattr(bytecode, "fill_once", lambda *args: calls.append(args) or "filled")
    monkeypatch.setattr(os, "cpu_count", lambda: bytecode.FILL_MIN_CORES - 1)
    note = bytecode.enable_if_needed(str(tmp_path / "cache"))
    assert note is not None and "filled" not in note and not calls
    monkeypatch.setattr(os, "cpu_count", lambda: bytecode.FILL_MIN_CORES)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    note = bytecode.enable_if_needed(str(tmp_path / "cache"))
    assert note.endswith("; filled") and len(calls) == 1
