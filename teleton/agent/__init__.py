"""The agent: one turn as an ordered pipeline (runtime), sessions, the system prompt, privacy-gated context,
compaction and slash commands. ``build_agent(config, db=..., gateway=...)`` wires it from the config."""

from teleton.agent.factory import AgentStack, build_agent
from teleton.agent.runtime import Agent, AgentDeps, AgentSettings

__all__ = ["Agent", "AgentDeps", "AgentSettings", "AgentStack", "build_agent"]
