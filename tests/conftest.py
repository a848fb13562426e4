"""Shared fixtures: one real Temporal dev server per test run, a fresh store per test, and
unique task queues and ids so tests never see each other's work."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from traceback import format_exception
from types import ModuleType
from typing import Any
from unittest import mock

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Interceptor
from typer.testing import CliRunner

from domain import search_attributes
from domain.lineage import LineageState
from domain.settings import Settings
from domain.spec import SessionSpec, parse_spec
from services import command_line, training_data
from services.dev_server import port_open, start_in_memory, temporal_binary
from store import Store
from tests import forked
from tests.store_backends import URL_ENV, database_url, postgres_admin_url
from worker import build_worker
from workflows.lineage import LineageWorkflow

SUGGEST_CONTINUE_AS_NEW_AFTER = 20
ESSAY_PROMPT = (
    "You are an expert analyst. Provide comprehensive, detailed analysis. "
    "Structure your response professionally."
)


# The server suggests continue-as-new after this many events (4,096 by default), so every
# lineage in the suite crosses runs after a cycle or two.
DEV_SERVER_ARGS = [
    "--dynamic-config-value",
    f"limit.historyCount.suggestContinueAsNew={SUGGEST_CONTINUE_AS_NEW_AFTER}",
]
# Set by the xdist controller (pytest -n 2) for its workers: the address of the run's one dev
# server, which it started.
SHARED_DEV_SERVER = "TC_TEST_SHARED_TEMPORAL_ADDRESS"


def _distributing(config: pytest.Config) -> bool:
    """This process is the controller of xdist workers (``-n 2``), not a worker nor a plain
    run (no xdist, ``-n 0``, ``-p no:xdist``)."""
    return (
        not hasattr(config, "workerinput")
        and getattr(config.option, "dist", "no") != "no"
        and not config.option.collectonly
    )


def _start_shared_dev_server() -> tuple[subprocess.Popen[bytes], str, Path]:
    """The dev server as ``start_in_memory`` starts it for ``temporal_env`` (the flags the SDK's
    start_local gives it, ours), but as a plain process: the controller loads no Temporal
    runtime, whose threads abort an interpreter at exit now and then (sdk-python#300)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # fmt: off
    command = [
        temporal_binary(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
        "--namespace", "default", "--headless", "--log-format", "pretty", "--log-level", "error",
        "--dynamic-config-value", "frontend.enableServerVersionCheck=false",
        "--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=true",
        "--dynamic-config-value", "frontend.enableUpdateWorkflowExecutionAsyncAccepted=true",
        *[f"--search-attribute={key.name}=Keyword" for key in search_attributes.ALL],
        *DEV_SERVER_ARGS,
    ]
    # fmt: on
    # its log in a file, not amid the tests' progress (pytest captured the fixture-started one's)
    log = tempfile.NamedTemporaryFile(prefix="tc-test-temporal-", suffix=".log", delete=False)  # noqa: SIM115 (lives with the process)
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not port_open("127.0.0.1", port):
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(f"the dev server did not start ({log.name}): {' '.join(command)}")
        time.sleep(0.05)
    return server, f"127.0.0.1:{port}", Path(log.name)


_shared_dev_server = pytest.StashKey[tuple[subprocess.Popen[bytes], Path]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist, the run's one dev server is started here, in the controller, before the
    workers, which inherit its address; so is PostgreSQL, when the suite starts its own."""
    if not _distributing(session.config):
        return
    server, address, log = _start_shared_dev_server()
    session.config.stash[_shared_dev_server] = server, log
    os.environ[SHARED_DEV_SERVER] = address
    os.environ[URL_ENV] = postgres_admin_url()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _shared_dev_server not in config.stash:
        return
    server, log = config.stash[_shared_dev_server]
    server.kill()  # in memory: nothing to keep, and a graceful stop takes seconds
    server.wait()
    log.unlink()


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """The run's dev server: started here, or (an xdist worker) the controller's."""
    shared = os.environ.get(SHARED_DEV_SERVER)
    if shared:
        from temporalio.contrib.pydantic import pydantic_data_converter

        client = await Client.connect(shared, data_converter=pydantic_data_converter)
        yield WorkflowEnvironment.from_client(client)
        return
    env = await start_in_memory(dev_server_extra_args=DEV_SERVER_ARGS)
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server, for timers (a score window of hours passes at once). It
    has no custom search attributes: start lineages on it without them."""
    from temporalio.contrib.pydantic import pydantic_data_converter

    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
        data_converter=pydantic_data_converter,
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture
def temporal_address(client: Client) -> str:
    return client.service_client.config.target_host


BACKENDS = ["sqlite", "postgresql"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``every_backend`` (or in a module so marked) that uses the store runs once
    per backend: one behavioural suite, every storage backend."""
    if metafunc.definition.get_closest_marker("every_backend") and (
        "backend_url" in metafunc.fixturenames
    ):
        metafunc.parametrize("backend_url", BACKENDS, indirect=True)


@pytest.fixture
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The store's database: SQLite unless the test is marked ``every_backend``. For a test
    that opens the ``store`` it is a copy of one migrated once per run; else it is empty."""
    backend = getattr(request, "param", "sqlite")
    with database_url(backend, tmp_path, migrated="store" in request.fixturenames) as url:
        yield url


@pytest.fixture
def store(backend_url: str) -> Iterator[Store]:
    s = Store.open(backend_url)
    yield s
    s.close()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def settings(store: Store, task_queue: str) -> Settings:
    url = store.engine.url.render_as_string(hide_password=False)
    return Settings(task_queue=task_queue, database_url=url)


@pytest.fixture
def run_worker(
    client: Client, store: Store, settings: Settings
) -> Callable[..., contextlib.AbstractAsyncContextManager[Any]]:
    """``async with run_worker():`` a real worker on this test's queue and store."""

    @contextlib.asynccontextmanager
    async def _run(
        custom: Settings | None = None, interceptors: Sequence[Interceptor] = ()
    ) -> AsyncIterator[Any]:
        worker = build_worker(client, store, custom or settings, interceptors=interceptors)
        async with worker:
            yield worker

    return _run


def make_spec(
    *,
    labels: tuple[str, ...] = ("A",),
    model: str = "offline-analyst-1",
    prompt: str = ESSAY_PROMPT,
    inputs: list[str] | None = None,
    options: dict[str, Any] | None = None,
    constraints: dict[str, Any] | None = None,
    max_tokens: int = 2048,
    agent_extra: dict[str, Any] | None = None,
    prompts: dict[str, str] | None = None,  # a different system prompt for some labels
) -> SessionSpec:
    session = f"s-{uuid.uuid4().hex[:10]}"
    agent = {
        "name": "Analyst",
        "systemPrompt": prompt,
        "parameters": {"model": model, "temperature": 0.7, "maxTokens": max_tokens},
        "constraints": constraints or {"maxTokens": 4096},
        **(agent_extra or {}),
    }
    return parse_spec(
        {
            "name": f"Test {session}",
            "id": session,
            "inputs": inputs or ["Explain the four-day work week for small software teams."],
            "lineages": [
                {
                    "label": label,
                    "agent": {**agent, "systemPrompt": (prompts or {}).get(label, prompt)},
                    "options": options or {},
                }
                for label in labels
            ],
        }
    )


async def wait_for_state(
    handle: WorkflowHandle[Any, Any],
    predicate: Callable[[LineageState], bool],
    timeout: float = 30.0,
) -> LineageState:
    """Poll the `state` query until ``predicate`` holds (fails with the last state seen)."""
    deadline = asyncio.get_running_loop().time() + timeout
    state: LineageState | None = None
    for pause in _polls():
        with contextlib.suppress(Exception):
            state = await handle.query(LineageWorkflow.state)
            if predicate(state):
                return state
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting; last state: {state}")
        await asyncio.sleep(pause)
    raise AssertionError("unreachable")


def _polls() -> Iterator[float]:
    """The pauses between polls: 10 ms, doubling up to 100 ms. Most waits are over in a few
    hundred milliseconds, and a fixed 100 ms poll added 50 ms to each on average."""
    pause = 0.01
    while True:
        yield pause
        pause = min(pause * 2, 0.1)


def awaiting(cycle: int) -> Callable[[LineageState], bool]:
    return lambda s: s.status == "awaiting_score" and s.cycle == cycle


Waiter = Callable[..., Awaitable[LineageState]]


class CliResult:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


async def temporal_cli(address: str, *args: str) -> CliResult:
    """Run the real `temporal` CLI without blocking the loop (the worker runs on it too)."""
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(),
        *args,
        "--address",
        address,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return CliResult(proc.returncode or 0, out.decode(), err.decode())


async def spawn_worker(
    temporal_address: str, database_url: str, task_queue: str, **env: str
) -> forked.AsyncForked:
    """``worker.py`` in a process of its own (to be killed with SIGKILL mid-step), forked from
    one that imported the app (tests/forked.py); ``env`` adds variables, e.g.
    ``ANTHROPIC_BASE_URL``."""
    return await forked.spawn(
        ["worker.py"],
        env={
            "PATH": "/usr/bin:/bin",
            "TEMPORAL_ADDRESS": temporal_address,
            "TRAINING_CAMP_DATABASE_URL": database_url,
            "TRAINING_CAMP_TASK_QUEUE": task_queue,
            **env,
        },
    )


async def polled_by(client: Client, task_queue: str, workers: int, timeout: float = 60) -> None:
    """Wait until ``workers`` workers (identities) poll ``task_queue`` for workflow tasks and
    for activity tasks: a worker process just spawned spends seconds importing the app, and
    work started before it polls all goes to the others."""
    deadline = asyncio.get_running_loop().time() + timeout
    polls = _polls()
    kinds = (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)
    while True:
        seen: list[set[str]] = []
        try:
            for kind in kinds:
                described = await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace=client.namespace,
                        task_queue=TaskQueue(name=task_queue),
                        task_queue_type=kind,
                    )
                )
                seen.append({poller.identity for poller in described.pollers})
        except RPCError:
            seen = [set()]  # a busy server cancels the call now and then: ask again
        if min(len(identities) for identities in seen) >= workers:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{workers} workers never polled {task_queue}: {seen}")
        await asyncio.sleep(next(polls))


def training_data_cli(
    *args: str, url: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The ``training-camp-data`` command as a user runs it, on the store at ``url``: a process
    of its own (forked from one that imported the app, tests/forked.py)."""
    return forked.run(
        ["-m", "services.training_data", *args, "--database-url", url],
        env={"PATH": os.environ["PATH"], "COLUMNS": "200", **(env or {})},
    )


def app_in_process(
    module: ModuleType, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A command (``module.app``, its Typer app) run in this process, as a new process runs
    it but without a new interpreter importing the whole app (seconds of CPU each): for tests
    about what a command does, not about the process. The environment holds ``env`` and none
    of this process's TRAINING_CAMP_ variables; the stores it opens are closed after it; it
    ends as the process would (services/command_line.py): an error is exit code 1, with one
    line on stderr for an operator's mistake, else the traceback."""
    opened: list[Store] = []
    open_store = Store.open

    def recorded(*a: Any, **kw: Any) -> Store:
        opened.append(open_store(*a, **kw))
        return opened[-1]

    environ: dict[str, str | None] = {k: None for k in os.environ if k.startswith("TRAINING_CAMP_")}
    env = {"COLUMNS": "200", **(env or {})}
    # the width COLUMNS gives a new process (the app's console is made when it is imported)
    wide = Console(emoji=False, width=int(env["COLUMNS"]))
    with (
        mock.patch.object(Store, "open", recorded),
        mock.patch.object(module, "console", wide),
    ):
        try:
            result = CliRunner().invoke(module.app, list(args), env={**environ, **env})
        finally:
            for store in opened:
                store.close()
    code, stderr = result.exit_code, result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        line = command_line.operator_error(result.exception)
        code = 1
        stderr += f"error: {line}\n" if line else "".join(format_exception(result.exception))
    return subprocess.CompletedProcess(list(args), code, result.stdout, stderr)


def training_data_app(
    *args: str, url: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``training-camp-data …`` on the store at ``url``, in this process (app_in_process);
    as a process of its own: training_data_cli."""
    return app_in_process(training_data, *args, "--database-url", url, env=env)


def starter_cli(*args: str, temporal_address: str, database_url: str, columns: int = 250) -> str:
    """`training-camp …` as a user runs it; its output (it must succeed)."""
    result = run_starter(
        *args, temporal_address=temporal_address, database_url=database_url, columns=columns
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def run_starter(
    *args: str, temporal_address: str, database_url: str, columns: int = 250
) -> subprocess.CompletedProcess[str]:
    """`training-camp …` as a user runs it, whether it succeeds or not: a process of its own
    (forked from one that imported the app, tests/forked.py)."""
    return forked.run(
        ["starter.py", *args],
        timeout=60,
        env={
            "PATH": os.environ["PATH"],
            "COLUMNS": str(columns),
            "TEMPORAL_ADDRESS": temporal_address,
            "TRAINING_CAMP_DATABASE_URL": database_url,
        },
    )


def exported_corrections(database_url: str, out: Path) -> list[dict[str, Any]]:
    """`training-camp-data export corrections` as a user runs it: the rows it wrote."""
    exported = training_data_cli("export", "corrections", "--out", str(out), url=database_url)
    assert exported.returncode == 0, exported.stderr
    return [json.loads(line) for line in (out / "corrections.jsonl").read_text().splitlines()]


def threaded_starter_cli(temporal_address: str, database_url: str) -> Callable[..., Awaitable[str]]:
    """``starter_cli`` on one dev server and store, run in a thread: the test's worker keeps
    running on the event loop while the command waits on it."""

    async def cli(*args: str) -> str:
        return await asyncio.to_thread(
            starter_cli, *args, temporal_address=temporal_address, database_url=database_url
        )

    return cli


def lineage_state(**changes: object) -> LineageState:
    """A lineage awaiting its first score, with ``changes``: what the demo's screen is fed."""
    base = LineageState(
        session_id="s",
        lineage_id="s-A",
        label="A",
        cycle=1,
        status="awaiting_score",
        agent_version=1,
        locked=False,
        latest_output_preview="first line\nsecond line",
        latest_output_words=4,
        last_evolution=None,
        score_history=[],
        queued_scores=0,
        sticky_directives=[],
        oneshot_directives=[],
        rejected_feedback=0,
    )
    return base.model_copy(update=changes)


async def eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait until ``check()`` holds, e.g. for a store write made by an activity still running."""
    deadline = asyncio.get_running_loop().time() + timeout
    polls = _polls()
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition never became true")
        await asyncio.sleep(next(polls))


def local_activity_type(event: Any) -> str | None:
    """The activity a history event records as a local activity (its marker), else None."""
    if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return None
    marker = event.marker_recorded_event_attributes
    if marker.marker_name != "core_local_activity":
        return None
    return json.loads(marker.details["data"].payloads[0].data)["activity_type"]


async def lineage_history(client: Client, handle: WorkflowHandle) -> AsyncIterator[HistoryEvent]:
    """A lineage's history events, in order, across its runs (continue-as-new)."""
    run_id = handle.first_execution_run_id
    assert run_id, "a handle from starting the workflow"
    while run_id:
        run = client.get_workflow_handle(handle.id, run_id=run_id)
        run_id = None
        async for event in run.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                attributes = event.workflow_execution_continued_as_new_event_attributes
                run_id = attributes.new_execution_run_id
            yield event


async def steps_run(client: Client, handle: WorkflowHandle) -> tuple[list[str], list[str]]:
    """The activities a lineage's history shows, in order, across its runs: those scheduled on
    the task queue, and those run as local activities (markers)."""
    queued: list[str] = []
    local: list[str] = []
    async for event in lineage_history(client, handle):
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            queued.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif (activity_type := local_activity_type(event)) is not None:
            local.append(activity_type)
    return queued, local


async def start_without_search_attributes(
    client: Client, spec: SessionSpec, label: str, task_queue: str
) -> WorkflowHandle[Any, Any]:
    """One lineage of ``spec`` started as the starter starts it, but with no search attributes
    (the time-skipping server has none)."""
    from domain.lineage import LineageInput

    lineage = next(li for li in spec.lineages if li.label == label)
    lineage_id = spec.lineage_id(label)
    return await client.start_workflow(
        LineageWorkflow.run,
        LineageInput(
            session_id=spec.session_id,
            session_name=spec.name,
            lineage_id=lineage_id,
            label=label,
            options=lineage.options,
            initial_agent=lineage.agent,
            inputs=spec.inputs,
        ),
        id=f"lineage-{lineage_id}",
        task_queue=task_queue,
    )
