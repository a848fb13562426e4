"""calculator: exact arithmetic without eval (an AST walk over numbers and operators only)."""

from __future__ import annotations

import ast
import math
import operator

from pydantic import BaseModel, Field

from domain.built_in_tools import descriptions
from runner.tools.registry import ToolContext, ToolError

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "log": math.log,
}
MAX_EXPONENT = 1000


class CalculatorInput(BaseModel):
    expression: str = Field(
        max_length=500, description="Arithmetic, e.g. '12 * (3 + 4) / 2' or 'sqrt(2) ** 2'."
    )


def evaluate(expression: str) -> float | int:
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolError(f"exponent {right} is too large (max {MAX_EXPONENT})")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        try:
            return _FUNCTIONS[node.func.id](*(_eval(a) for a in node.args))
        except (ValueError, TypeError) as exc:
            raise ToolError(f"{node.func.id}: {exc}") from None
    raise ToolError(f"unsupported element {ast.dump(node)[:60]}; use numbers, + - * / // % ** ()")


class Calculator:
    name = "calculator"
    description = descriptions()["calculator"]
    Input = CalculatorInput

    async def run(self, args: CalculatorInput, ctx: ToolContext) -> str:  # type: ignore[override]
        value = evaluate(args.expression)
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            value = int(value)
        return str(value)
