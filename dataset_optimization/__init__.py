"""Agent Lightning on Temporal (seed: server-client): an optimization algorithm queues dataset
tasks; lightweight clients on any machine take them, fetch the current resources (cached by
version), run the agent and report Rollouts."""
