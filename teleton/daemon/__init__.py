"""The long-running process: wiring, systemd integration, status, signals."""
