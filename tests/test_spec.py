"""Spec files: a good one loads; a bad one is refused with the file, the field and the problem,
before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.spec import SpecError, load_spec

EXAMPLE = Path(__file__).parent.parent / "examples" / "essay-session.yaml"

GOOD = """
name: Demo
inputs: ["Explain X."]
lineages:
  - label: A
    agent:
      name: a
      systemPrompt: Be brief.
      parameters: {model: offline-1, maxTokens: 300}
"""


def test_example_spec_loads():
    spec = load_spec(EXAMPLE)
    assert spec.session_id == "essay-demo"
    assert [lineage.label for lineage in spec.lineages] == ["A", "B"]
    agent = spec.lineages[0].agent
    assert agent.parameters.max_tokens == 2048 and agent.constraints.max_tokens == 4096


def test_every_example_loads():
    examples = sorted(EXAMPLE.parent.glob("*.yaml"))
    assert len(examples) >= 2
    for path in examples:
        assert load_spec(path).lineages
    research = load_spec(EXAMPLE.parent / "research-session.yaml")
    assert [d.name for d in research.loaded_documents] == ["team-handbook.md"]


def test_json_and_defaults(tmp_path: Path):
    path = tmp_path / "s.json"
    path.write_text(
        '{"name": "My Session!", "inputs": ["q"], "lineages": [{"label": "A", "agent": '
        '{"name": "a", "systemPrompt": "p", "parameters": {"model": "offline-1"}}}]}'
    )
    spec = load_spec(path)
    assert spec.session_id == "my-session"
    assert spec.lineage_id("A") == "my-session-A"
    assert spec.lineages[0].options.max_attempts == 3


@pytest.mark.parametrize(
    ("replace", "field", "problem"),
    [
        ("maxTokens: 300", "lineages[0].agent.parameters.maxTokens", "greater than or equal to 1"),
        ("systemPrompt: Be brief.", "lineages[0].agent.systemPrompt", "Field required"),
        ('inputs: ["Explain X."]', "inputs", "at least 1 item"),
        ("label: A", "lineages[0].label", "should match pattern"),
        ("name: a\n", "lineages[0].agent.name", "Field required"),
    ],
)
def test_errors_name_the_file_the_field_and_the_problem(tmp_path, replace, field, problem):
    broken = {
        "maxTokens: 300": "maxTokens: 0",
        "systemPrompt: Be brief.": "description: none",
        'inputs: ["Explain X."]': "inputs: []",
        "label: A": "label: 'A B'",
        "name: a\n": "\n",
    }[replace]
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace(replace, broken))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    message = str(err.value)
    assert str(path) in message
    assert field in message, message
    assert problem in message, message


def test_agent_breaking_its_own_constraints_is_refused(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        GOOD.replace(
            "maxTokens: 300}",
            "maxTokens: 3000}\n      constraints: {maxTokens: 1000, forbiddenPatterns: ['brief']}",
        )
    )
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert "maxTokens 3000 exceeds constraints.maxTokens 1000" in str(err.value)
    assert "forbidden pattern 'brief'" in str(err.value)


def test_duplicate_labels_and_unreadable_files(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text(GOOD + GOOD.split("lineages:\n")[1])
    with pytest.raises(SpecError, match="repeated: A"):
        load_spec(path)
    with pytest.raises(SpecError, match="cannot read spec file"):
        load_spec(tmp_path / "missing.yaml")
    bad_yaml = tmp_path / "broken.yaml"
    bad_yaml.write_text("name: [unclosed")
    with pytest.raises(SpecError, match=r"broken\.yaml: not valid yaml"):
        load_spec(bad_yaml)


def test_starter_refuses_a_bad_spec_before_starting_anything(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace("maxTokens: 300", "maxTokens: -5"))
    # no Temporal server at this address: a bad spec must fail before any connection attempt
    result = subprocess.run(
        [sys.executable, "starter.py", "start", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent.parent,
        env={"TEMPORAL_ADDRESS": "127.0.0.1:1", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "lineages[0].agent.parameters.maxTokens" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("agent_extra", "message"),
    [
        (
            {"tools": [{"name": "shell"}]},
            "lineages[0].agent.tools[0]: no implementation for tool 'shell'",
        ),
        (
            {"flow": [{"name": "a", "prompt": "{nope}"}]},
            "flow[0] (a): prompt uses unknown placeholder(s) ['nope']",
        ),
        (
            {"flow": [{"name": "a", "prompt": "{b}"}, {"name": "b", "prompt": "{input}"}]},
            "unknown placeholder(s) ['b']",
        ),
        (
            {"flow": [{"name": "a", "prompt": "{input}", "tools": ["calculator"]}]},
            "tool 'calculator' is not declared",
        ),
        (
            {"tools": [{"name": "calculator"}], "constraints": {"allowedTools": ["read_document"]}},
            "tool 'calculator' is not in constraints.allowedTools",
        ),
    ],
)
def test_tools_and_flows_are_checked_before_anything_starts(tmp_path, agent_extra, message):
    import json

    agent = {"name": "a", "systemPrompt": "p", "parameters": {"model": "offline-1"}, **agent_extra}
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"name": "S", "inputs": ["q"], "lineages": [{"label": "A", "agent": agent}]})
    )
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert message in str(err.value)


def test_documents_are_read_relative_to_the_spec(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("hello")
    path = tmp_path / "s.yaml"
    path.write_text(GOOD + "documents: [docs/a.md]\n")
    assert [(d.name, d.content) for d in load_spec(path).loaded_documents] == [("a.md", "hello")]
    path.write_text(GOOD + "documents: [docs/missing.md]\n")
    with pytest.raises(SpecError, match=r"documents\[0\] \(docs/missing.md\): cannot read"):
        load_spec(path)
