"""How pytest's workers share the tests out (pytest-xdist, ``-n auto
--dist loadgroup`` in pyproject.toml), and the one thread each worker's
children run torch on. Here at the root, so that it holds for any path given
to pytest: ``pytest book/attention.ipynb`` too, where tests/conftest.py is not
read."""

import os

import pytest

# Under workers, every process a worker starts runs torch on one thread
# unless told otherwise: each chapter's kernel (nbval starts it in this
# environment), and the tests' fresh processes (a test that means another
# count sets it, as the flex test's two threads do). With the other core busy,
# two OpenMP threads on two shared cores wait on each other (the pathology
# tests/conftest.py names for the tests' own process): book/baseline.ipynb's
# training cell took 180 s instead of 13 s. No verdict or chapter output
# depends on it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Two workers (pytest-xdist, `-n auto --dist loadgroup` in pyproject.toml)
# share the tests out a group at a time. A group runs on one worker, in
# order: each chapter notebook (nbval runs its cells in one kernel), and each
# test file (its module fixtures built once); the files in SPREAD_FILES have
# no fixture worth keeping and go a test at a time. The longest groups start
# first (HEAVY_FIRST: the seconds each took in a run of the suite on
# the two-core machine, two workers, 2026-11-28), so that no long one is
# left to run alone at the end.
SPREAD_FILES = {"tests/test_site.py", "tests/test_conventions.py"}
FLEX_FRESH = (
    "tests/test_conventions.py::test_flex_equals_eager_at_every_length_in"
)
# The built site's pages in the browser, one after another on one worker
# (for every two workers): a page's check waits on the browser drawing and on
# the driver's round trips, and leaves part of a core idle, which the other
# worker's tests (compiling, training: never waiting) fill. Two workers both
# in the browser left 20-29 % of the two cores idle (sampled every 5 s).
# This way 8-9 % stay idle. A third worker (`-n 3`) fills them (98 % busy),
# but three processes on two cores cost about as many CPU-seconds more: whole
# runs took 654 and 595 s with three workers, 612 and 672 s with two (taken
# in turn, 2026-11-29), no gain beyond the machine's drift. So a worker a core.
SITE_PAGES = "tests/test_site.py::test_the_page_works_in_a_browser"
HEAVY_FIRST = (
    # 66 pages at two widths: 524 s on one worker (a run of the suite)
    SITE_PAGES,
    # four fresh processes compiling flex_attention, two groups: 96 + 29 s
    FLEX_FRESH,
    # a fresh process compiling three models: 65 s alone
    "tests/test_train.py::test_the_gpu_profiles_code_path_runs_on_a_cpu",
    "tests/test_gpu_check.py",  # the CPU rehearsal: 42 s
    "tests/test_live_run.py",  # 40 s
    "tests/test_experiments_gmlp.py",  # 39 s
    "tests/test_site_views.py",  # 38 s
    "tests/test_cuda_absent_independence.py",  # a child pytest: 37 s
    "tests/test_runs_share_a_folder.py",  # 37 s
    "tests/test_alibi.py",  # 29 s
    "tests/test_experiments_side_by_side.py",  # 29 s
    "book/",  # each chapter: 8-25 s
    "tests/test_train.py",  # the rest: 14 s
)


# Tests of a grouped file that go alone: a fresh process, long, with no
# fixture of the file's.
ALONE = {
    "tests/test_train.py::test_the_gpu_profiles_code_path_runs_on_a_cpu_and_equals_the_eager_one",
}


def xdist_group(item) -> str | None:
    if item.nodeid.startswith(FLEX_FRESH):
        # The two flex processes of a thread count generate the same kernels:
        # one after the other on one worker, the second copies the first's
        # C++ builds (tests/cxx_store.py) instead of waiting for them.
        return (
            f"flex fresh processes, {item.callspec.params['threads']} threads"
        )
    path = item.nodeid.split("::")[0]
    alone = item.nodeid.split("[")[0] in ALONE
    return None if path in SPREAD_FILES or alone else path


def heaviness(item) -> int:
    """The place of the item's group in HEAVY_FIRST (the rest after)."""
    return next(
        (
            place
            for place, prefix in enumerate(HEAVY_FIRST)
            if item.nodeid.startswith(prefix)
        ),
        len(HEAVY_FIRST),
    )


# First: pytest-xdist's own hook reads the groups (it appends each to its
# test's id), so they must be marked before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if group := xdist_group(item):
            item.add_marker(pytest.mark.xdist_group(group))
    # The site's pages in one group for every two workers, where the run has
    # at least as many other tests as pages to fill the idle core (`pytest
    # tests/test_site.py` spreads them over every worker).
    parts = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "2")) // 2)
    pages = [item for item in items if item.nodeid.startswith(SITE_PAGES)]
    if len(items) < 2 * len(pages):
        pages = []
    for place, item in enumerate(pages):
        group = f"the site's pages, part {place % parts + 1} of {parts}"
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=heaviness)  # stable: each group's own order is kept
