"""Python implementations of the tools an AgentDefinition may declare."""

from runner.tools.calculator import Calculator
from runner.tools.documents import ReadDocument, SearchDocuments
from runner.tools.registry import Tool, ToolContext, ToolError, ToolRegistry


def default_registry() -> ToolRegistry:
    return ToolRegistry([Calculator(), SearchDocuments(), ReadDocument()])


__all__ = ["Tool", "ToolContext", "ToolError", "ToolRegistry", "default_registry"]
