"""Fixtures for the container tests: the image (built once), SSH keys and fresh compose stacks.

The image is built once per session the way `make build CPU=1` builds it (compose, with the
CPU override: the tests need no GPU and no NVIDIA runtime). Every stack is torn down with
`down --volumes`, even on failure; what a teardown could not remove (a second Ctrl-C, a killed
run) the session's sweep does, at its end and at the next run's start (tests.machines.leftovers).
Each container gets the memlock limit the engine grants, found out as `make up` finds it
(tests.machines.engine).

Environment knobs:
  BASE_IMAGE, EXTRA_CA_CERT, CUDA_FLAVOUR  passed to the build by `make build`
  TORCHRIG_TEST_IMAGE   reuse this image tag and skip the build (fast local iteration)
  CHROMIUM              the Chromium binary for the browser test (default: `chromium` on PATH)
  TEST_ARTIFACTS_DIR    where the browser test saves a screenshot when it fails
  REQUIRE_DOCKER=1      a missing engine or Chromium fails instead of skipping
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import paramiko
import pytest

from tests.machines import leftovers

from . import ssh
from .ssh import KeyPair, new_key_pair
from .stack import REPO_ROOT, Stack, new_stack

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
CPU_OVERRIDE = REPO_ROOT / "docker-compose.cpu.yml"
PUBLISHED = REPO_ROOT / "docker-compose.published.yml"
# A registry on the loopback with nothing listening: a pull fails on this machine, at once.
PUBLISHED_REGISTRY = "localhost:1/torchrig"
BUILD_TIMEOUT_S = 3600
# A uid/gid that is neither the image's 1000 nor ours, so ownership tests can tell them apart.
TEST_PUID = "4242"
TEST_PGID = "4343"
# A variable set only in the test's compose override: SSH sessions must see compose's env.
COMPOSE_MARKER = ("TORCHRIG_TEST_MARKER", "set-in-compose")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

StackFactory = Callable[..., Stack]


def say(config: pytest.Config, line: str) -> None:
    """A line on the terminal now, past pytest's capture: what the session is doing."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """What earlier runs of this checkout left (killed, or a fixture that failed half way) is
    removed first; at the end, whatever this run's teardowns missed (tests/slurm shares it)."""
    earlier = leftovers.sweep()
    if earlier:
        say(request.config, "removed what an earlier test run left: " + ", ".join(earlier))
    yield
    missed = leftovers.sweep(own_pid=os.getpid())
    if missed:
        say(request.config, "removed what this run's tests left: " + ", ".join(missed))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator:
    """Keep each phase's report on the item, so fixtures can tell a failed test at teardown."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def cpu_compose_files() -> list[Path]:
    for path in (COMPOSE_FILE, CPU_OVERRIDE):
        assert path.is_file(), f"{path.name} is missing"
    return [COMPOSE_FILE, CPU_OVERRIDE]


def _build_image(compose_files: list[Path], log_path: Path) -> str:
    """`make build CPU=1`, the path a user takes (it passes BASE_IMAGE, EXTRA_CA_CERT,
    CUDA_FLAVOUR on to compose from the environment); returns the tag it built."""
    files = [arg for path in compose_files for arg in ("-f", str(path))]
    command = ["make", "build", "CPU=1"]
    with log_path.open("w") as log:
        result = subprocess.run(
            command,
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    if result.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-60:])
        pytest.fail(f"`{shlex.join(command)}` exited {result.returncode}:\n{tail}", pytrace=False)
    return _image_tag(files)


def _image_tag(file_args: list[str]) -> str:
    """The tag compose gives the image (TORCHRIG_IMAGE or the compose file's default)."""
    result = subprocess.run(
        ["docker", "compose", *file_args, "config", "--images"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.split()[0]


@pytest.fixture(scope="session")
def image(
    cpu_compose_files: list[Path],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> str:
    """The image under test: TORCHRIG_TEST_IMAGE if given, else built once for the session."""
    given = os.environ.get("TORCHRIG_TEST_IMAGE")
    if given:
        return given
    log_path = tmp_path_factory.mktemp("build") / "build.log"
    # The longest silence of the run otherwise: minutes on a cold cache.
    say(request.config, f"building the image for the container tests (`make build`): {log_path}")
    # One build at a time across `make test`'s workers (their base folder's parent is shared):
    # the first writes .env and builds, the next finds both made.
    with (tmp_path_factory.getbasetemp().parent / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_image(cpu_compose_files, log_path)


@pytest.fixture
def published_name(image: str) -> Iterator[str]:
    """The image under test, also tagged as if it had been pulled from a registry."""
    name = f"{PUBLISHED_REGISTRY}:{leftovers.name()}-cu130"
    client = docker.from_env()
    client.images.get(image).tag(name)
    yield name
    client.images.remove(name)


@pytest.fixture(scope="session")
def ssh_keys() -> KeyPair:
    return new_key_pair()


@pytest.fixture(scope="session")
def other_keys() -> KeyPair:
    """A key pair the stacks do not authorize."""
    return new_key_pair()


def _compose_marker_override(root: Path) -> Path:
    """An extra compose file setting one variable, as a user's own compose edit would."""
    name, value = COMPOSE_MARKER
    path = root / "compose.test.yml"
    path.write_text(f"services:\n  workstation:\n    environment:\n      {name}: {value}\n")
    return path


@pytest.fixture(scope="session")
def make_stack_in(
    cpu_compose_files: list[Path], image: str, ssh_keys: KeyPair
) -> Callable[..., Stack]:
    """Make (not start) a stack under a given dir. Tearing it down is the job of the fixture
    that asked for it: `stack_factory` or `running_stack`."""

    def make(
        root: Path,
        extra_files: tuple[Path, ...] = (),
        unset: tuple[str, ...] = (),
        **overrides: str,
    ) -> Stack:
        files = [*cpu_compose_files, _compose_marker_override(root), *extra_files]
        defaults = {"PUID": TEST_PUID, "PGID": TEST_PGID, "SSH_PUBLIC_KEY": ssh_keys.public_line}
        return new_stack(files, root, image, unset, **{**defaults, **overrides})

    return make


@pytest.fixture
def stack_factory(
    make_stack_in: Callable[..., Stack],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[StackFactory]:
    """Fresh stacks for one test (not started): `stack_factory(PUID="5000")`,
    `stack_factory(unset=("JUPYTER_TOKEN",))` for the image's default."""
    made: list[Stack] = []

    def factory(
        extra_files: tuple[Path, ...] = (), unset: tuple[str, ...] = (), **overrides: str
    ) -> Stack:
        root = tmp_path_factory.mktemp("stack")
        stack = make_stack_in(root, extra_files, unset, **overrides)
        made.append(stack)
        return stack

    yield factory
    for stack in made:
        if _failed(request.node):
            _print_evidence(stack)
        stack.down(volumes=True)


def _failed(item: pytest.Item) -> bool:
    report = getattr(item, "rep_call", None) or getattr(item, "rep_setup", None)
    return bool(report is not None and report.failed)


def _print_evidence(stack: Stack) -> None:
    """The compose commands and the service's logs, shown with the failed test's report."""
    print(f"--- {stack.name}: compose commands\n" + "\n".join(stack.log))
    print(f"--- {stack.name}: logs\n{stack.logs()}")


@pytest.fixture(scope="session")
def running_stack(
    make_stack_in: Callable[..., Stack],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Stack]:
    """One healthy stack shared by the tests where a fresh container is not the point.

    Its logs are captured right after it became healthy, before any test pokes at it, so the
    clean-start test judges an untouched start.
    """
    stack = make_stack_in(tmp_path_factory.mktemp("running"), SHM_SIZE="256m")
    try:
        stack.up()
        stack.wait_ready()
        stack.start_logs = stack.logs()
        yield stack
    finally:
        if request.session.testsfailed:
            _print_evidence(stack)
        stack.down(volumes=True)


# --- a real browser (Chromium, driven by Playwright) ------------------------------------------


def chromium_path() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if found:
        return found
    reason = "Chromium is not installed (apt-get install chromium, or set CHROMIUM)"
    if os.environ.get("REQUIRE_DOCKER") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def browser_page(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[object]:
    """A Chromium page; a screenshot lands in the test's tmp dir when the test fails."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            yield page
        finally:
            report = getattr(request.node, "rep_call", None)
            if report is not None and report.failed:
                # TEST_ARTIFACTS_DIR: somewhere CI keeps; pytest's tmp dirs rotate away.
                shots = Path(os.environ.get("TEST_ARTIFACTS_DIR", tmp_path))
                shots.mkdir(parents=True, exist_ok=True)
                shot = shots / f"{request.node.name}.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"screenshot: {shot}")
            browser.close()


@contextmanager
def running(stack: Stack) -> Iterator[Stack]:
    """The stack up and answering for the block; down with its volumes after it, even when the
    start failed. For a module's own `stack` fixture, made with `make_stack_in`."""
    try:
        stack.up()
        stack.wait_ready()
        yield stack
    finally:
        stack.down(volumes=True)


@pytest.fixture(scope="module")
def session(stack: Stack, ssh_keys: KeyPair) -> Iterator[paramiko.SSHClient]:
    """One SSH session as dev into the module's `stack` (its fixture of that name)."""
    with ssh.connect(stack.ssh_port, ssh_keys.private) as client:
        yield client
