"""The worker's CPU thread budget (gpuprobe.worker.threads): applied when the engine's file
changes, ignored when it is missing or not a positive number, never raising."""

from __future__ import annotations

import os

import pytest

from gpuprobe.worker.threads import THREADS_VARIABLE, ThreadBudget


class FakeTorch:
    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.calls: list[int] = []

    def get_num_threads(self) -> int:
        return self.threads

    def set_num_threads(self, n: int) -> None:
        self.calls.append(n)
        self.threads = n


def publish(path, text: str) -> None:
    staged = str(path) + ".new"
    with open(staged, "w", encoding="ascii") as handle:
        handle.write(text)
    os.replace(staged, path)


@pytest.fixture(autouse=True)
def keep_threads_variable(monkeypatch):
    monkeypatch.setenv(THREADS_VARIABLE, "2")


def test_a_published_budget_is_applied_once_and_children_inherit_it(tmp_path):
    path = tmp_path / "threads"
    torch = FakeTorch(2)
    budget = ThreadBudget(str(path))
    assert budget.apply(torch) is None, "no file yet: nothing changes"
    publish(path, "1\n")
    assert budget.apply(torch) == 1
    assert torch.calls == [1]
    assert os.environ[THREADS_VARIABLE] == "1"
    assert budget.apply(torch) is None, "the same file is not read again"
    assert torch.calls == [1]


def test_a_new_budget_replaces_the_last(tmp_path):
    path = tmp_path / "threads"
    torch = FakeTorch(1)
    budget = ThreadBudget(str(path))
    publish(path, "1\n")
    budget.apply(torch)
    publish(path, "2\n")
    assert budget.apply(torch) == min(2, os.cpu_count() or 2)


@pytest.mark.parametrize("text", ["", "0\n", "-3\n", "four\n", "2.5\n", "\xff\xfe"])
def test_a_file_that_is_not_a_positive_number_changes_nothing(tmp_path, text):
    path = tmp_path / "threads"
    path.write_bytes(text.encode("latin-1"))
    torch = FakeTorch(3)
    assert ThreadBudget(str(path)).apply(torch) is None
    assert torch.calls == []
    assert os.environ[THREADS_VARIABLE] == "2"


def test_a_budget_above_the_cores_is_held_to_them(tmp_path):
    path = tmp_path / "threads"
    publish(path, "100000\n")
    torch = FakeTorch(1)
    assert ThreadBudget(str(path)).apply(torch) == (os.cpu_count() or 100000)


def test_no_file_named_and_a_torch_that_refuses_change_nothing(tmp_path):
    torch = FakeTorch(2)
    assert ThreadBudget(None).apply(torch) is None

    class Refusing(FakeTorch):
        def set_num_threads(self, n: int) -> None:
            raise RuntimeError("cannot set the number of threads after parallel work has started")

    path = tmp_path / "threads"
    publish(path, "1\n")
    assert ThreadBudget(str(path)).apply(Refusing(2)) is None
    assert os.environ[THREADS_VARIABLE] == "2"
