"""Database backends: engines and transactions (SQLite in WAL mode, PostgreSQL), SQL dialect
helpers, migrations."""
