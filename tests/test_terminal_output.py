"""Text from outside is data on the terminal: a model's output, a rater's comment, a directive
and an id someone typed, holding terminal escape sequences (OSC 52 clipboard, window title,
cursor moves, erase) and Rich markup, go through a real lineage (a scripted Claude endpoint,
the real worker and dev server) and out of every command that prints them, each run as a
process on a pseudo-terminal: nothing reaches the terminal but the text, escaped, and the
markup as written."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import tty
import uuid
from pathlib import Path

from pydantic import SecretStr
from rich.console import Console

from client import start_session
from demo.watch import changes
from domain.spec import parse_spec
from tests.conftest import ESSAY_PROMPT, awaiting, lineage_state, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, text_message

ROOT = Path(__file__).parent.parent
MODEL = "claude-sonnet-5"
MARKUP = "[/bold][link=https://evil.example]click[/link][conceal]hidden[/conceal]"
SHORT_MARKUP = "[/bold][link=https://evil.example]"
HOSTILE = (
    "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: sets the clipboard
    "\x1b]0;owned\x07"  # OSC 0: sets the window title
    "\x1b[2K\x1b[1A\r"  # erases the line, moves up, back to its start
    "\x9b2J"  # an 8-bit CSI: clears the screen
    "\u202e"  # right-to-left override: what follows reads backwards
    f"{MARKUP}"
)
# What a terminal acts on, once the style codes Rich itself writes are taken out
ACTED_ON = ("\x1b", "\x07", "\x9b", "\r", "\u202e")
SGR = re.compile(r"\x1b\[[0-9;]*m")


# The commands' processes: one interpreter imports the commands, and what they load, once
# (seconds of CPU for each command otherwise), on a terminal of its own as a shell would start
# it; then it forks a process per command onto that command's own terminal, which runs the
# command's entry point as `python starter.py …` (or `python -m services.training_data …`)
# does, ending with its exit code (reported back here).
LAUNCHER = """
import json, os, sys
import client, domain.spec, review.inbox_table, review.views, services.instructions, store
import starter, workflows.lineage
from services import training_data

report, commands = int(sys.argv[1]), json.loads(sys.argv[2])
children = []
for fd, argv in commands:
    child = os.fork()
    if child == 0:
        try:
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            for other, _ in commands:
                os.close(other)
            sys.argv = argv
            (starter if argv[0] == "starter.py" else training_data).main()
        finally:
            os._exit(70)
    children.append(child)
for fd, _ in commands:
    os.close(fd)
codes = [os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) for child in children]
os.write(report, json.dumps(codes).encode())
"""


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal, 400 columns wide, raw (bytes arrive as written, no newline
    translation): its master and slave."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 400, 0, 0))
    return master, slave


def _written(master: int, deadline: float) -> str:
    """Everything written on a terminal until the command and every copy of it are gone."""
    written = b""
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the command and every copy of the terminal are gone
                    break
                if not chunk:
                    break
                written += chunk
    finally:
        os.close(master)
    return written.decode("utf-8", "replace")


async def in_terminals(
    commands: list[tuple[str, ...]], env: dict[str, str]
) -> list[tuple[int, str]]:
    """Run each command (``python`` arguments: ``starter.py …`` or ``-m
    services.training_data …``) at once, each on a pseudo-terminal of its own, and return
    each one's exit code and everything it wrote there."""
    terminals = [_terminal() for _ in commands]
    own_master, own_slave = _terminal()
    report_read, report_write = os.pipe()
    argvs = [
        [str(ROOT / "services" / "training_data.py"), *c[2:]] if c[0] == "-m" else list(c)
        for c in commands
    ]
    slaves = [slave for _, slave in terminals]
    jobs = json.dumps([[slave, argv] for slave, argv in zip(slaves, argvs, strict=True)])
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(report_write), jobs],
        stdin=subprocess.DEVNULL,
        stdout=own_slave,
        stderr=own_slave,
        pass_fds=(report_write, *slaves),
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "TERM": "xterm-256color", **env},
    )
    for fd in (own_slave, report_write, *slaves):
        os.close(fd)
    deadline = time.monotonic() + 120
    try:
        *shown, own = await asyncio.gather(
            *(asyncio.to_thread(_written, m, deadline) for m, _ in [*terminals, (own_master, 0)])
        )
        with os.fdopen(report_read) as report:
            codes = report.read()
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.returncode is None:
            proc.kill()
    assert proc.wait() == 0 and codes, own[-3000:]
    return list(zip(json.loads(codes), shown, strict=True))


def assert_shown_as_data(shown: str, *, expect: str = MARKUP) -> None:
    visible = SGR.sub("", shown)
    for char in ACTED_ON:
        assert char not in visible, (char, visible[-3000:])
    assert "\x1b]8;" not in shown  # no hyperlink planted
    assert "Traceback" not in visible, visible[-3000:]
    assert expect in visible, visible[-3000:]  # the markup, as written
    # the escapes, visible: \x1b (or \u001b inside JSON)
    assert "\\x1b]52;c;" in visible or "\\u001b]52;c;" in visible, visible[-3000:]


async def test_stored_text_reaches_the_terminal_as_data(
    client, store, settings, run_worker, temporal_address, tmp_path
):
    session = f"s-{uuid.uuid4().hex[:10]}"
    data = {
        "name": f"Hostile {session}",
        "id": session,
        # the question is shown by `inbox` and `output` too
        "inputs": [f"{SHORT_MARKUP} Explain the four-day work week. {HOSTILE}"],
        "lineages": [
            {
                "label": "A",
                "agent": {
                    "name": "Analyst",
                    "systemPrompt": ESSAY_PROMPT,
                    "parameters": {"model": MODEL, "temperature": 0.7, "maxTokens": 2048},
                },
            }
        ],
    }
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(data))
    spec = parse_spec(data)
    lineage = spec.lineage_id("A")
    with FakeMessagesAPI() as api:
        api.script = [
            (200, text_message(f"First answer. {HOSTILE}", MODEL)),
            # the inbox shows the first 80 characters: markup first, the escapes after
            (200, text_message(f"{SHORT_MARKUP} {HOSTILE}", MODEL)),
        ]
        claude = settings.model_copy(
            update={
                "anthropic_api_key": SecretStr("sk-test-000000"),
                "anthropic_base_url": api.base_url,
            }
        )
        async with run_worker(claude):
            (handle,) = await start_session(client, spec, settings.task_queue)
            await wait_for_state(handle, awaiting(1))
            await handle.signal("directive", {"kind": "sticky", "content": f"Be kind {HOSTILE}"})
            await handle.signal(
                "score", {"score": 3, "comment": f"too long, use bullets {HOSTILE}", "rater": "x"}
            )
            await wait_for_state(handle, awaiting(2))

            env = {
                "TEMPORAL_ADDRESS": temporal_address,
                "TRAINING_CAMP_DATABASE_URL": settings.database_url,
                "COLUMNS": "400",
            }
            data_cli = ("-m", "services.training_data")
            runs = {
                "status": ("starter.py", "status", str(spec_path)),
                "inbox": ("starter.py", "inbox", "--session", session),
                "output": ("starter.py", "output", lineage),
                "blame": ("starter.py", "blame", lineage),
                "as-of": (*data_cli, "as-of", lineage),
                "history": (*data_cli, "history", lineage),
            }
            done = await in_terminals(list(runs.values()), env)
    for name, (code, shown) in zip(runs, done, strict=True):
        assert code == 0, (name, shown[-3000:])
        try:
            # the inbox and blame cut long text short ("…"): its start is enough there
            cut = name in ("inbox", "blame")
            assert_shown_as_data(shown, expect=SHORT_MARKUP if cut else MARKUP)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


async def test_an_id_typed_with_markup_and_escapes_is_one_line_of_data(tmp_path):
    typed = f"[/bold]{HOSTILE}"
    env = {"TRAINING_CAMP_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", "COLUMNS": "400"}
    data_cli = ("-m", "services.training_data")
    runs = [
        ("starter.py", "output", typed),
        ("starter.py", "blame", typed),
        (*data_cli, "history", typed),
        (*data_cli, "as-of", typed),
    ]
    done = await in_terminals(runs, env)
    for args, (code, shown) in zip(runs, done, strict=True):
        assert code == 1, (args, shown[-3000:])
        assert_shown_as_data(shown)
        assert len(SGR.sub("", shown).strip().splitlines()) == 1, shown


def test_the_demo_watch_prints_a_lineage_state_as_data():
    """The demo's running account (its other parts start a dev server: tests/
    test_demo_command.py) prints outputs, directives, evolutions and rejections from `state`."""
    before = lineage_state(latest_output_preview=None, latest_output_words=0)
    now = before.model_copy(
        update={
            "cycle": 2,
            "agent_version": 2,
            "last_evolution": f"shorter {HOSTILE}",
            "latest_output_preview": f"An answer {HOSTILE}",
            "latest_output_words": 3,
            "sticky_directives": [f"Be kind {HOSTILE}"],
            "rejected_feedback": 1,
            "recent_rejections": [f"bad {HOSTILE}"],
        }
    )
    console = Console(force_terminal=True, width=400, emoji=False)
    with console.capture() as captured:
        for line in changes(before, now):
            console.print(line, highlight=False)
    assert_shown_as_data(captured.get())


def test_line_ends_and_tabs_stay_as_they_are():
    from services.terminal import printable

    assert printable("a\tb\r\nc\n") == "a\tb\nc\n"  # a Windows line end is a line end
    assert printable("progress 10%\rdone") == "progress 10%\\x0ddone"  # a lone one rewrites
