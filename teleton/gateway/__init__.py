"""The boundary between the agent and a chat network: incoming events in, actions out."""
