"""tests/cxx_store.py, the C++ compiler of the fresh-process compile tests:
a library is copied from the store only for the same source, arguments and
included header, and every other call reaches the real compiler."""

import ctypes
import os
import subprocess
from pathlib import Path

import pytest
from cxx_store import compiler_environment

CXX_STORE = Path(__file__).with_name("cxx_store.py")
SOURCE = 'extern "C" int answer() { return %d; }\n'


@pytest.fixture
def build(tmp_path, monkeypatch):
    """``build(name, source, *flags)``: the answer() of the library that
    tests/cxx_store.py builds (or copies) from ``source``, in a folder of its
    own, and what the store's log says of it: "built" or "stored"."""
    store = tmp_path / "store"
    store.mkdir()
    for variable, value in compiler_environment(store).items():  # g++
        monkeypatch.setenv(variable, value)

    def build(name, source, *flags):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "answer.cpp").write_text(source)
        library = folder / "answer.so"
        done = subprocess.run(
            [os.environ["CXX"], folder / "answer.cpp", *flags]
            + ["-shared", "-fPIC", "-o", library],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        log = (store / "log").read_text().splitlines()
        return ctypes.CDLL(str(library)).answer(), log[-1].split()[0]

    return build


def test_the_same_build_in_another_folder_is_copied_and_works(build):
    assert build("first", SOURCE % 1) == (1, "built")
    assert build("second", SOURCE % 1) == (1, "stored")


def test_another_source_or_argument_is_built(build):
    assert build("first", SOURCE % 1) == (1, "built")
    assert build("source", SOURCE % 2) == (2, "built")
    assert build("flag", SOURCE % 1, "-O2") == (1, "built")
    assert build("flag again", SOURCE % 1, "-O2") == (1, "stored")


def test_another_included_header_is_built(build, tmp_path):
    header = tmp_path / "value.h"
    source = '#ifndef VALUE\n#define VALUE 0\n#endif\n' + SOURCE % 0
    source = source.replace("return 0", "return VALUE")
    header.write_text("#define VALUE 3\n")
    assert build("first", source, "-include", header) == (3, "built")
    header.write_text("#define VALUE 4\n")
    assert build("second", source, "-include", header) == (4, "built")


def test_a_failed_build_fails_and_stores_nothing(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "broken.cpp").write_text("int answer( {\n")
    env = {**os.environ, **compiler_environment(store)}
    command = [env["CXX"], tmp_path / "broken.cpp", "-shared", "-fPIC"]
    done = subprocess.run(
        command + ["-o", tmp_path / "broken.so"], env=env, capture_output=True
    )
    assert done.returncode != 0 and b"error" in done.stderr
    assert not list(store.glob("*.so")) and not (store / "log").exists()


def test_a_call_that_builds_no_library_reaches_the_compiler(tmp_path):
    env = {**os.environ, **compiler_environment(tmp_path)}
    done = subprocess.run(
        [env["CXX"], "--version"], env=env, capture_output=True, text=True
    )
    real = subprocess.run(["g++", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == real.stdout
    assert not (tmp_path / "log").exists()


def test_inductor_takes_the_front_for_the_compiler_behind_it(tmp_path):
    # Inductor picks its flags (and so the C++ it writes) by the compiler's
    # name: tests/cxx_store.py under its own name passed for another compiler
    # and the kernels' sources changed.
    from torch._inductor.cpp_builder import _is_clang, _is_gcc

    for compiler, is_it in [("g++", _is_gcc), ("/usr/bin/clang++", _is_clang)]:
        front = compiler_environment(tmp_path, compiler)["CXX"]
        assert is_it(front) and Path(front).resolve() == CXX_STORE.resolve()
    front = compiler_environment(tmp_path, "g++")["CXX"]  # made once, reused
    assert Path(front).name == "g++"
