"""Fakes of external services (scripted servers on 127.0.0.1) shared by the test suites."""
