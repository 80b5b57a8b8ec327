"""What every model provider shares, local or remote: pinned model files and the retry policy of HTTP APIs.

It sits below memory, media and llm (each uses it) and above config: nothing here knows which model it serves.
"""
