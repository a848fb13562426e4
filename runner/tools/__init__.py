"""Python implementations of the tools an AgentDefinition may declare."""

from runner.tools.registry import Tool, ToolContext, ToolError, ToolRegistry, default_registry

__all__ = ["Tool", "ToolContext", "ToolError", "ToolRegistry", "default_registry"]
