"""Temporal payload encryption (AES-256-GCM) and the codec server that lets the Web UI and the
CLI read encrypted payloads."""
