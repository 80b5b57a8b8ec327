"""What keeps the process up and readable: its logs (secrets redacted) and the supervisor of its background
loops. Every layer may use it; it imports only itself and the
config's schema (the defaults of its settings)."""
