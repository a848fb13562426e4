"""Prompt templates: f-string or jinja2 (sandboxed: templates may be written by a model)."""

from __future__ import annotations

import string
from typing import Any

from jinja2 import StrictUndefined, meta
from jinja2.sandbox import SandboxedEnvironment

from domain.lightning import PromptTemplate

_jinja = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


class TemplateError(ValueError):
    """The template does not render with the sample it was given."""


def placeholders(template: PromptTemplate) -> set[str]:
    if template.engine == "jinja2":
        return set(meta.find_undeclared_variables(_jinja.parse(template.template)))
    return {f for _, f, _, _ in string.Formatter().parse(template.template) if f}


def render(template: PromptTemplate, values: dict[str, Any]) -> str:
    try:
        if template.engine == "jinja2":
            return _jinja.from_string(template.template).render(**values)
        return template.template.format_map(values)
    except KeyError as exc:
        raise TemplateError(
            f"template needs {exc.args[0]!r}; the sample has {sorted(values)}"
        ) from None
    except Exception as exc:  # jinja2 errors
        raise TemplateError(f"template does not render: {exc}") from None
