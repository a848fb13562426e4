"""Estimated cost per call from a per-model price table (USD per million tokens)."""

from __future__ import annotations

# (input, output) USD per million tokens; matched by longest model-name prefix.
PRICES: dict[str, tuple[float, float]] = {
    "offline": (0.0, 0.0),
    # Family defaults, then the exceptions that cost differently. Estimates: set your own
    # contract prices here when they differ.
    "claude-opus": (5.0, 25.0),
    "claude-opus-4-0": (15.0, 75.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-2": (15.0, 75.0),
    "claude-sonnet": (3.0, 15.0),
    "claude-haiku": (1.0, 5.0),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.8, 4.0),
}


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for one call, or None when the model is not in the table (unknown, not free)."""
    matches = [prefix for prefix in PRICES if model.startswith(prefix)]
    if not matches:
        return None
    price_in, price_out = PRICES[max(matches, key=len)]
    return round((prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000, 8)
