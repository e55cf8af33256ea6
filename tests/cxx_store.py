#!/usr/bin/env python3
"""The C++ compiler that the fresh-process compile tests give Inductor: the
real one, with a store of the libraries it has built.

Inductor writes each CPU kernel as C++ source and builds it with ``$CXX``; a
fresh process with an empty ``TORCHINDUCTOR_CACHE_DIR`` builds every kernel
again, and those builds are most of such a process's time (about 8 s each on
the two-core machine). The processes of one test session often generate
byte-identical sources (the four flex processes: 17 distinct kernels among
36 builds), and a compiler given the same input twice writes the same
library. So a build is keyed by all that its output depends on and that can
differ between two builds of one session (the source's bytes, the arguments,
the bytes of each ``-include``d header), and a key built before is copied
from the store instead of built again. The system's and torch's headers are
the same for the whole session, which is all the store lives for.

What stays fresh: Inductor's own caches (graphs, kernels and their sources)
are empty in each process, so every kernel is generated again; a source that
a compile order or a thread count changes gets a key of its own and is built.

A process gets it through ``compiler_environment``: ``MIXERS_CXX_STORE``,
the store's folder (a test session's temporary one); ``MIXERS_CXX``, the
compiler that builds (``g++`` if unset); ``CXX``, this script. Each build
appends ``built KEY`` or ``stored KEY`` to ``log`` in the store.
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path


def compiler_environment(store, compiler: str = "g++") -> dict[str, str]:
    """The variables that make a process build its C++ with this script and
    ``store``, ``compiler`` behind it. ``CXX`` is a link to this script under
    the compiler's own name: Inductor chooses its flags, and so the code it
    writes, by that name (gcc's when it has "g++" in it), and they must be
    those of the compiler behind."""
    front = Path(store) / "bin" / Path(compiler).name
    front.parent.mkdir(exist_ok=True)
    try:
        front.symlink_to(Path(__file__).resolve())
    except FileExistsError:  # made by another process of the session
        pass
    return {
        "CXX": str(front),
        "MIXERS_CXX": compiler,
        "MIXERS_CXX_STORE": str(store),
    }


def key(args: list[str]) -> str | None:
    """The build's key, or None for a call that is not one source built into
    one shared library (a version query, a preprocessing, a header)."""
    sources = [a for a in args if a.endswith((".cpp", ".cc", ".cxx"))]
    if len(sources) != 1 or "-shared" not in args or "-o" not in args:
        return None
    output = args[args.index("-o") + 1]
    digest = hashlib.sha256()
    for i, arg in enumerate(args):
        # the source's and the library's paths differ from one process to
        # the next: the source's bytes count, not where it lies
        digest.update(
            b"\0"
            + {sources[0]: b"SOURCE", output: b"OUT"}.get(arg, arg.encode())
        )
        if arg == sources[0] or (i and args[i - 1] == "-include"):
            digest.update(b"\0" + Path(arg).read_bytes())
    return digest.hexdigest()


def main(args: list[str]) -> int:
    compiler = os.environ.get("MIXERS_CXX", "g++")
    store = os.environ.get("MIXERS_CXX_STORE")
    build_key = key(args) if store else None
    if build_key is None:
        return subprocess.run([compiler, *args]).returncode
    store = Path(store)
    stored = store / f"{build_key}.so"
    output = args[args.index("-o") + 1]
    # One build of a key at a time: a process that needs a library another
    # is building waits for it instead of building it too.
    with open(store / f"{build_key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stored.exists():
            shutil.copy(stored, output)
            verdict = "stored"
        else:
            built = subprocess.run([compiler, *args]).returncode
            if built != 0:
                return built
            partial = stored.with_suffix(f".{os.getpid()}.part")
            shutil.copy(output, partial)
            partial.replace(stored)  # whole or absent, never half written
            verdict = "built"
    with open(store / "log", "a") as log:
        log.write(f"{verdict} {build_key}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
