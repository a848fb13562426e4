"""Choosing the model backend for an agent: explicit by model name, never a silent switch."""

from __future__ import annotations

from domain.agent import OFFLINE_MODEL_PREFIX
from domain.settings import Settings
from runner.claude import ClaudeBackend
from runner.model_backend import ModelBackend, ModelError
from runner.offline_model import OfflineModel


class ModelBackends:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._offline = OfflineModel()
        self._claude: ClaudeBackend | None = None

    def for_model(self, model: str) -> ModelBackend:
        if model.startswith(OFFLINE_MODEL_PREFIX):
            return self._offline
        if self._settings.anthropic_api_key is None:
            raise ModelError(
                f"model {model!r} is served by Claude, but ANTHROPIC_API_KEY is not set on this "
                f"worker (use a model named '{OFFLINE_MODEL_PREFIX}-…' for the offline model)",
                retryable=False,
            )
        if self._claude is None:
            self._claude = ClaudeBackend(
                api_key=self._settings.anthropic_api_key.get_secret_value(),
                base_url=self._settings.anthropic_base_url,
                max_retries=self._settings.anthropic_max_retries,
            )
        return self._claude
