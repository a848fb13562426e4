"""Agent Runner (seed: Tracer, Executor, Adapter): runs an AgentDefinition on an input."""
