"""Domain models: the pydantic types that cross Temporal and the store's API.

Nothing here imports SQLModel tables, so workflow code can import it inside the sandbox.
"""
